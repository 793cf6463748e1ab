"""Tree adapters: verifiers of the tree contract (`specref.tree_contract`), with the capabilities they declare.

    verify(target_probs [B, N+1, V], draft_probs [B, N, V], draft_tokens [B, N], parents [B, N], generator,
           **capability_kwargs) -> tokens [B, D+1] int64 (-1 padded), or (tokens, nodes [B, D]) with `nodes`

A TreeAdapter is an Adapter of kind "tree" with two more declarations:
  scheme  how the harness drafts the children it verifies: "iid" (with replacement), "without_replacement",
          "dedup" (i.i.d. draws merged in order of first occurrence) or "topk" (deterministic);
  nodes   it accepts return_nodes=True and returns the accepted nodes too (the harness then checks the path).
`rule` names the tree rule it follows (specref.reference.tree.DECLARABLE: mss, rsd, target_only, sample_match, kseq,
traversal, or
a rule with its sibling order, "mss:random-order": the children tested in a uniformly random order). The harness
always passes draft_probs (the parent's draft row per node); rules that do not read it ignore it.
With `uniforms` declared it accepts uniforms=[B, N+1] (the coupling convention of `specref.reference.tree`) and
the harness checks it token for token against the reference engine (check `coupling`); a random sibling order has
no such convention, so it cannot be declared with uniforms. `coupled=False` declares uniforms in a convention of
its own (SGLang's: one coin per node for all its children): no coupling check, but the rare-edge probe can still
give it a 0 where its generator cannot be forced (on a one-node tree, column 0 is the accept test, column 1 the
final draw, in both conventions).

Built-ins: the batched tree engine under each lossless rule with the scheme the rule assumes (index order only), and
the batched chain verifiers called through `chain_as_tree` (chain-shaped scenarios only). `reference_tree_adapter`
runs the reference engine row by row, under any declarable rule.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from ...reference.tree import parse_rule
from ..chain.adapters import Adapter
from .scenarios import SCHEMES

#: The drafting schemes each declarable tree rule is lossless on (specref.reference.tree); the first is its default.
RULE_SCHEMES = {
    "mss": ("iid",),
    "rsd": ("without_replacement", "dedup"),
    "target_only": ("topk", "without_replacement", "dedup"),
    "sample_match": SCHEMES,
    "mss:random-order": ("iid",),
    "kseq": ("iid",),
    "traversal": ("without_replacement", "dedup"),
}


@dataclass
class TreeAdapter(Adapter):
    kind: str = "tree"
    rule: str = "mss"
    scheme: str = "iid"
    nodes: bool = False  # accepts return_nodes=True
    chains_only: bool = False  # accepts chain-shaped trees only (a chain verifier through chain_as_tree)
    expected_conforming: bool = True  # False for the mutants (a deliberate bug)

    def __post_init__(self):
        if self.scheme not in SCHEMES:
            raise ValueError(f"scheme={self.scheme!r}; expected one of {SCHEMES}")
        if parse_rule(self.rule).order != "index" and self.uniforms:
            raise ValueError(f"rule={self.rule!r} with uniforms=True: a random sibling order has no injected-uniforms "
                             "convention (specref.reference.tree); declare uniforms=False")  # fmt: skip


_TREE_CAPABILITIES = ("dtype", "device", "rule", "scheme", "nodes", "chains_only", "uniforms", "coupled", "lossy",
                      "uniform_dtype", "notes")  # fmt: skip


def is_tree(obj) -> bool:
    return isinstance(obj, TreeAdapter) or getattr(obj, "kind", None) == "tree"


def as_tree_adapter(obj, name: str | None = None) -> TreeAdapter:
    """A TreeAdapter passes through; an object with `verify` is wrapped with the capabilities it declares; a plain
    verify function gets the defaults (rule mss, scheme iid, no nodes)."""
    if isinstance(obj, TreeAdapter):
        return obj if name is None else replace(obj, name=name)
    verify = getattr(obj, "verify", None)
    if callable(verify):
        declared = {f: getattr(obj, f) for f in _TREE_CAPABILITIES if hasattr(obj, f)}
        return TreeAdapter(name=name or str(getattr(obj, "name", type(obj).__name__)), verify=verify, **declared)
    if callable(obj):
        return TreeAdapter(name=name or getattr(obj, "__name__", "verify_tree"), verify=obj)
    raise ValueError(f"obj={obj!r} is neither a verify_tree function, a TreeAdapter, nor an object with verify")


def batched_tree_adapter(rule: str, scheme: str | None = None) -> TreeAdapter:
    if parse_rule(rule).order != "index":
        raise ValueError(f"rule={rule!r}: the batched tree engine tests siblings in index order only; "
                         "reference_tree_adapter runs any declarable rule")  # fmt: skip
    from ...batched.tree import verify_tree

    def verify(target_probs, draft_probs, draft_tokens, parents, generator=None, **kwargs):
        return verify_tree(target_probs, draft_probs, draft_tokens, parents, generator, rule=rule, **kwargs)

    scheme = scheme or RULE_SCHEMES[rule][0]
    return TreeAdapter(f"tree-{rule.replace('_', '-')}" + ("" if scheme == RULE_SCHEMES[rule][0] else f"-{scheme}"),
                       verify, rule=rule, scheme=scheme, nodes=True, uniforms=True,
                       notes=f"specref.batched.tree.verify_tree(rule={rule!r}) on {scheme} children")  # fmt: skip


def reference_tree_adapter(rule: str, scheme: str | None = None) -> TreeAdapter:
    """specref.reference.tree.verify_tree per row on float64 lists, under any declarable rule (a random sibling
    order included): the randomness of a call is one PCG64 stream seeded from the generator."""
    from ...randomness import Sampled
    from ...reference.tree import verify_tree

    parse_rule(rule)
    scheme = scheme or RULE_SCHEMES[rule][0]

    def verify(target_probs, draft_probs, draft_tokens, parents, generator=None, *, return_nodes=False):
        batch, n = parents.shape
        seed = int(torch.randint(2**62, (1,), generator=generator))
        rng = Sampled(seed)
        target, draft = target_probs.double().tolist(), draft_probs.double().tolist()
        tokens_in, parents_in = draft_tokens.tolist(), parents.tolist()
        tokens = torch.full((batch, n + 1), -1, dtype=torch.long)
        nodes = torch.full((batch, n), -1, dtype=torch.long)
        for b in range(batch):
            emitted, path = verify_tree(target[b], draft[b], tokens_in[b], parents_in[b], rng, rule=rule,
                                        validate=False, return_nodes=True)  # fmt: skip
            tokens[b, : len(emitted)] = torch.tensor(emitted)
            nodes[b, : len(path)] = torch.tensor(path, dtype=torch.long)
        return (tokens, nodes) if return_nodes else tokens

    return TreeAdapter(f"tree-reference-{rule.replace('_', '-').replace(':', '-')}-{scheme}", verify, rule=rule,
                       scheme=scheme, nodes=True, dtype=torch.float64,
                       notes=f"specref.reference.tree.verify_tree(rule={rule!r}) per row on float64 lists, "
                       f"{scheme} children")  # fmt: skip


def chain_tree_adapter(engine: str = "batched") -> TreeAdapter:
    """A chain verifier of specref through `chain_as_tree`: 'batched' (specref.batched.verify) or 'reference'
    (specref.reference.verify per row on float64 lists)."""
    from ...tree_contract import chain_as_tree

    if engine == "reference":
        from ..chain.adapters import reference_adapter

        chain = reference_adapter()
        return TreeAdapter("tree-chain-reference", chain_as_tree(chain.verify), rule="mss", scheme="iid", nodes=True,
                           uniforms=True, chains_only=True, dtype=torch.float64, uniform_dtype=chain.uniform_dtype,
                           notes="specref.reference.verify (one row at a time) through tree_contract.chain_as_tree "
                           "(chain-shaped trees only)")  # fmt: skip
    from ...batched import verify as verify_chain

    return TreeAdapter(
        "tree-chain-batched",
        chain_as_tree(verify_chain),
        rule="mss",
        scheme="iid",
        nodes=True,
        uniforms=True,
        chains_only=True,
        notes="specref.batched.verify through tree_contract.chain_as_tree (chain-shaped trees only)",
    )


def builtin_tree_adapters() -> dict[str, Callable[[], TreeAdapter]]:
    """name -> factory of the tree built-ins that can run here (the rows of kind tree in specref.builtins)."""
    from ...builtins import BUILTINS

    return {b.name: b.load for b in BUILTINS if b.kind == "tree" and b.available()}


def with_dtype(adapter: TreeAdapter, dtype: torch.dtype) -> TreeAdapter:
    return replace(adapter, dtype=dtype)
