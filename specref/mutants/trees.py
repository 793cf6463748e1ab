"""Tree mutants: one per tree bug seen in the wild, and the lossy tree rules (negative controls).

Each is a TreeAdapter that declares the correct rule and scheme and carries one bug; `CAUGHT_BY` names the checks
designed to catch it (a test runs each and asserts one of them fails). The bugs:

  residual_not_updated   mss: the residual stays p between siblings (accept min(1, p/q) for every child)
  rsd_raw_q              rsd: the residual is updated with the raw q instead of the masked q_k
  merged_as_iid          i.i.d. draws merged into distinct children, verified as if i.i.d. (mss on dedup children)
  topk_min_p_over_q      deterministic top-k children verified with min(1, p/q) (mss with the draft rows)
  wrong_parent_row       a node's children are verified against its parent's target row (a grandparent context:
                         wrong tree position ids or attention mask)
  sibling_row            a node's target row is its previous sibling's
  bonus_wrong_leaf       the bonus at a leaf comes from the row of the tree's last node
  path_not_root_to_node  the accepted nodes are read as the first A nodes in index order, not the walked path
  accept_le_fp32         mss whose accept test is `u <= p/q` on float32 uniforms (SGLang's `coin <= prob_acc`): a
                         rare edge (2^-24 per accept test), shown by the forced edge probe (specref.mutants.tree_bugs)
Negative controls (declared lossy; the verdict is "lossy by configuration"):
  topk_rsd               top-k children verified with without-replacement probabilities (VERIFIERS: TV .68)
  greedy_match           accept a child iff it is the target's argmax, emit the argmax (greedy under sampling)
"""

from __future__ import annotations

import torch

from ..batched.tree import verify_tree
from ..conformance.engine.registry import check_caught_by
from ..conformance.tree.adapters import TreeAdapter
from ..randomness import Injected
from ..reference.tree import Accept, ArrayTree, Emit, _normalised, _residual
from .tree_bugs import tree_accept_le_fp32


def _batched(rule, transform=None, after=None):
    def verify(target_probs, draft_probs, draft_tokens, parents, generator=None, return_nodes=False, **kwargs):
        if transform is not None:
            target_probs = transform(target_probs, parents)
        tokens, nodes = verify_tree(target_probs, draft_probs, draft_tokens, parents, generator, rule=rule,
                                    return_nodes=True, **kwargs)  # fmt: skip
        if after is not None:
            tokens, nodes = after(tokens, nodes, draft_tokens)
        return (tokens, nodes) if return_nodes else tokens

    return verify


def _rows_from(target_probs, parents, source):
    """target_probs with row j replaced by row source[:, j-1] for nodes j >= 1 (source -1: keep)."""
    batch, n = parents.shape
    index = torch.arange(1, n + 1).expand(batch, n)
    index = torch.where(source >= 0, source, index)
    index = torch.cat([torch.zeros(batch, 1, dtype=torch.long), index], 1)
    return target_probs.gather(1, index[:, :, None].expand_as(target_probs))


def _parent_rows(target_probs, parents):
    return _rows_from(target_probs, parents, parents)


def _sibling_rows(target_probs, parents):
    batch, n = parents.shape
    source = torch.full_like(parents, -1)
    for i in range(1, n):  # previous sibling: the latest earlier node with the same parent
        same = (parents[:, :i] == parents[:, i : i + 1]) & (parents[:, i : i + 1] >= 0)
        last = i - 1 - same.flip(1).int().argmax(1)
        source[:, i] = torch.where(same.any(1), last + 1, -1)
    return _rows_from(target_probs, parents, source)


def _last_node_rows_at_leaves(target_probs, parents):
    batch, n = parents.shape
    real = parents >= 0
    has_child = torch.zeros(batch, n + 1, dtype=torch.bool).scatter_(1, parents.clamp(min=0), real)
    leaf = real & ~has_child[:, 1:]
    last = (real * torch.arange(1, n + 1)).max(1).values  # [B] the last real node
    return _rows_from(target_probs, parents, torch.where(leaf, last[:, None].expand(batch, n), -1))


def _first_nodes(tokens, nodes, draft_tokens):
    accepted = (nodes >= 0).sum(1, keepdim=True)
    flat = torch.arange(1, nodes.shape[1] + 1).expand_as(nodes)
    nodes = torch.where(flat <= accepted, flat, -1)
    prefix = draft_tokens[:, : nodes.shape[1]]
    tokens = tokens.clone()
    tokens[:, : nodes.shape[1]] = torch.where(flat <= accepted, prefix, tokens[:, : nodes.shape[1]])
    return tokens, nodes


def _argmax_rows(target_probs, parents):
    return torch.zeros_like(target_probs).scatter_(2, target_probs.argmax(2, keepdim=True), 1.0)


# --- rule bugs: a Python walk per row (float64 lists), uniforms from the generator ------------------------------


def _stale_residual(p, children, rng):
    """mss without updating r between siblings."""
    weights = p
    for k, (x, q) in enumerate(children):
        if rng.accept(p[x] / q[x]):
            return Accept(k)
        weights = _residual(p, q, p)
    return Emit(rng.categorical(weights))


def _raw_q_residual(p, children, rng):
    """rsd whose accept test uses the masked q_k but whose residual subtracts the raw q."""
    r, weights, tried = p, p, []
    for k, (x, q) in enumerate(children):
        masked = _normalised([0 if y in tried else q_y for y, q_y in enumerate(q)]) if tried else q
        if rng.accept(r[x] / masked[x]):
            return Accept(k)
        weights = _residual(r, q, p)
        r = _normalised(weights)
        tried.append(x)
    return Emit(rng.categorical(weights))


def _row_loop(step):
    def verify(target_probs, draft_probs, draft_tokens, parents, generator=None, return_nodes=False):
        batch, n = parents.shape
        uniforms = torch.rand(batch, n + 1, generator=generator, dtype=torch.float64).tolist()
        target, draft = target_probs.double().tolist(), draft_probs.double().tolist()
        tokens_in, parents_in = draft_tokens.tolist(), parents.tolist()
        tokens = torch.full((batch, n + 1), -1, dtype=torch.long)
        nodes = torch.full((batch, n), -1, dtype=torch.long)
        for b in range(batch):
            tree, rng, node, path = (
                ArrayTree(target[b], draft[b], tokens_in[b], parents_in[b]),
                Injected(uniforms[b]),
                0,
                [],
            )
            while True:
                kids = tree.children(node)
                outcome = step(tree.target(node), [(tree.token(c), tree.draft(c)) for c in kids], rng)
                if isinstance(outcome, Emit):
                    break
                node = kids[outcome.index]
                path.append(node)
            emitted = [tree.token(c) for c in path] + [outcome.token]
            tokens[b, : len(emitted)] = torch.tensor(emitted)
            nodes[b, : len(path)] = torch.tensor(path, dtype=torch.long)
        return (tokens, nodes) if return_nodes else tokens

    return verify


def _mutant(name, verify, rule, scheme, note, lossy=False) -> TreeAdapter:
    return TreeAdapter(f"tree-mutant-{name}", verify, rule=rule, scheme=scheme, nodes=True, lossy=lossy,
                       dtype=torch.float64 if verify.__qualname__.startswith("_row_loop") else torch.float32,
                       notes=note, expected_conforming=False)  # fmt: skip


MUTANTS = {
    "residual_not_updated": lambda: _mutant("residual_not_updated", _row_loop(_stale_residual), "mss", "iid",
                                            "mss with the residual left at p between siblings"),
    "rsd_raw_q": lambda: _mutant("rsd_raw_q", _row_loop(_raw_q_residual), "rsd", "without_replacement",
                                 "rsd whose residual subtracts the raw q instead of the masked q_k"),
    "merged_as_iid": lambda: _mutant("merged_as_iid", _batched("mss"), "rsd", "dedup",
                                     "merged i.i.d. draws verified by mss, as if still i.i.d."),
    "topk_min_p_over_q": lambda: _mutant("topk_min_p_over_q", _batched("mss"), "target_only", "topk",
                                         "top-k children verified with min(1, p/q)"),
    "wrong_parent_row": lambda: _mutant("wrong_parent_row", _batched("mss", _parent_rows), "mss", "iid",
                                        "each node's children verified against its parent's target row"),
    "sibling_row": lambda: _mutant("sibling_row", _batched("mss", _sibling_rows), "mss", "iid",
                                   "each node's target row taken from its previous sibling"),
    "bonus_wrong_leaf": lambda: _mutant("bonus_wrong_leaf", _batched("mss", _last_node_rows_at_leaves), "mss",
                                        "iid", "the bonus at every leaf drawn from the last node's row"),
    "path_not_root_to_node": lambda: _mutant("path_not_root_to_node", _batched("mss", after=_first_nodes), "mss",
                                             "iid", "accepted nodes read as nodes 1..A in index order"),
    "accept_le_fp32": lambda: _mutant("accept_le_fp32", tree_accept_le_fp32, "mss", "iid",
                                      "mss with `u <= p/q` on float32 uniforms (SGLang's `coin <= prob_acc`)"),
    "topk_rsd": lambda: _mutant("topk_rsd", _batched("rsd"), "rsd", "topk",
                                "top-k children verified with without-replacement probabilities", lossy=True),
    "greedy_match": lambda: _mutant("greedy_match", _batched("sample_match", _argmax_rows), "sample_match", "iid",
                                    "greedy match under sampling: accept the argmax child, emit the argmax",
                                    lossy=True),
}  # fmt: skip

LAW_CHECKS = {"first_token_law", "joint_law", "t0_zero_prob_emitted"}
#: The checks designed to catch each mutant (at least one of them must fail).
CAUGHT_BY = {
    "residual_not_updated": {"depth_acceptance", "accepted_length_law", "correction_law"} | LAW_CHECKS,
    "rsd_raw_q": {"correction_law", "depth_acceptance"} | LAW_CHECKS,
    "merged_as_iid": LAW_CHECKS | {"correction_law"},
    "topk_min_p_over_q": LAW_CHECKS | {"correction_law"},
    "wrong_parent_row": {"correction_law", "depth_acceptance", "accepted_length_law"} | LAW_CHECKS,
    "sibling_row": {"correction_law", "depth_acceptance", "accepted_length_law"} | LAW_CHECKS,
    "bonus_wrong_leaf": {"correction_law", "joint_law"},
    "path_not_root_to_node": {"t0_root_to_node"},
    "accept_le_fp32": {"rare_edge"},
    "topk_rsd": LAW_CHECKS,
    "greedy_match": LAW_CHECKS,
}
CAUGHT_BY = {name: set(check_caught_by(f"tree mutant {name}", sorted(kinds))) for name, kinds in CAUGHT_BY.items()}
#: The scenarios each mutant's test runs (its bug shows there; the rest of the catalogue is left out for speed).
SCENARIOS_FOR = {
    "residual_not_updated": ["tree_star_cf"],
    "rsd_raw_q": ["tree_duplicates_cf"],
    "merged_as_iid": ["tree_duplicates_cf"],
    "topk_min_p_over_q": ["tree_star_cf"],
    "wrong_parent_row": ["tree_eagle_markov"],
    "sibling_row": ["tree_eagle_markov"],
    "bonus_wrong_leaf": ["tree_eagle_markov"],
    "path_not_root_to_node": ["tree_eagle_markov"],
    "accept_le_fp32": ["tree_star_cf"],
    "topk_rsd": ["tree_star_cf"],
    "greedy_match": ["tree_star_cf"],
}
