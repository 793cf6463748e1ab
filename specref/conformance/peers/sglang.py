"""SGLang's tree speculative sampling kernel, on chains and on trees (CUDA only: sgl_kernel ships CUDA binaries).

    sgl_kernel.tree_speculative_sampling_target_only(predicts, accept_index, accept_token_num, candidates, ...)

Checked against the public API of sgl-project/sglang (sgl-kernel/python/sgl_kernel/speculative.py): the current
signature takes a draft_probs buffer and uniform_samples_for_final_sampling; both variants are handled.
Rule "match": target-only verification treats each sampled draft as a point mass (accept d with probability p(d),
else draw from p with d removed), so the law is p whatever q was, and the acceptance rate is E_q[p(d)], not
sum_x min(p, q). `.ci/gpu-check` runs it where CUDA and sgl_kernel are present.
"""

from __future__ import annotations

import inspect

import torch

from ..chain.adapters import Adapter, seeds_from

# Read at sgl-project/sglang commits 6bfad8f187aa80f7c9a2a06f7861409c4e3a4ad2 (with a draft_probs buffer) and
# 01fe7c22269dc027da4b77a9ca807073225f7c24 (without); kernel in sgl-kernel/csrc/speculative/
# speculative_sampling.cuh at b227f63247cdaf7fcbc4cfec8c3379120276ec82. Node 0 is the root (the last verified
# token), nodes 1..N the drafts; retrive_next_token is the first child, retrive_next_sibling the next sibling
# (`tree_links`), and the node-j target row is target_probs[:, j], one to one with the tree contract (a chain is the
# tree parents = [0, 1, ..., g-1]). uniform_samples[b, j] is the one coin for node j's children: child k is accepted
# when coin <= p(c_1) + ... + p(c_k) (a running sum in sibling order), and uniform_samples_for_final_sampling[b]
# feeds the final draw from p with the rejected children removed. Coins are float32, compared with <=.
# It is target-only: draft_probs is ignored (a scratch buffer). That keeps the law p for any draft law (on distinct
# children), but a chain's acceptance rate is E_q[p(d)], not sum_x min(p, q): the chain adapter declares "match"
# (the law of a point-mass verification of a sampled draft) and the tree adapter "target_only".


def tree_links(parents: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """SGLang's tree encoding of `parents` [B, N] (specref's: node i+1's parent, -1 for padding): the first-child
    and next-sibling links retrive_next_token, retrive_next_sibling [B, N+1] over nodes 0..N (node 0 the root),
    -1 where there is none; siblings in increasing node order, padding nodes unreachable."""
    batch, n = parents.shape
    node = torch.arange(1, n + 1, device=parents.device)
    none = n + 1  # larger than any node
    same = (parents[:, :, None] == parents[:, None, :]) & (parents[:, :, None] >= 0)  # [B, N, N]: i, j siblings
    later = torch.where(same & (node[None, None, :] > node[None, :, None]), node[None, None, :], none)
    next_sibling = later.min(-1).values  # [B, N]
    child = torch.where(parents[:, None, :] == torch.arange(n + 1, device=parents.device)[None, :, None],
                        node[None, None, :], none)  # fmt: skip
    next_token = child.min(-1).values  # [B, N+1]: the smallest child of each node
    root = torch.full((batch, 1), none, device=parents.device)
    next_sibling = torch.cat([root, next_sibling], 1)
    return torch.where(next_token == none, -1, next_token), torch.where(next_sibling == none, -1, next_sibling)


def _kernel(target_probs, draft_tokens, parents, uniforms, threshold_acc=1.0):
    """One call of the kernel on a tree: (tokens [B, N+1], accepted nodes [B, N]), -1 padded."""
    from sgl_kernel import tree_speculative_sampling_target_only

    batch, n = draft_tokens.shape
    device = target_probs.device
    nodes = n + 1
    parents = parents.to(device=device, dtype=torch.int64)
    next_token, next_sibling = tree_links(parents)
    root = torch.zeros(batch, 1, dtype=torch.int64, device=device)  # the last verified token; the kernel never reads it
    candidates = torch.cat([root, draft_tokens.to(device=device, dtype=torch.int64)], dim=1)  # [B, N+1]
    candidates = torch.where(candidates < 0, 0, candidates).contiguous()  # padding nodes are unreachable
    retrive_index = torch.arange(batch, device=device)[:, None] * nodes + torch.arange(nodes, device=device)
    predicts = torch.full((batch * nodes,), -1, dtype=torch.int32, device=device)
    accept_index = torch.full((batch, nodes), -1, dtype=torch.int32, device=device)
    accept_token_num = torch.zeros(batch, dtype=torch.int32, device=device)
    uniforms = uniforms.to(device=device, dtype=torch.float32)
    kwargs = dict(
        predicts=predicts,
        accept_index=accept_index,
        accept_token_num=accept_token_num,
        candidates=candidates,
        retrive_index=retrive_index.contiguous(),
        retrive_next_token=next_token.contiguous(),
        retrive_next_sibling=next_sibling.contiguous(),
        uniform_samples=uniforms.contiguous(),
        uniform_samples_for_final_sampling=uniforms[:, n].contiguous(),
        target_probs=target_probs.float().contiguous(),
        threshold_single=1.0,
        threshold_acc=threshold_acc,
        deterministic=True,
    )
    if "draft_probs" in inspect.signature(tree_speculative_sampling_target_only).parameters:
        kwargs["draft_probs"] = torch.zeros(batch, nodes, target_probs.shape[-1], device=device)  # scratch buffer
    tree_speculative_sampling_target_only(**kwargs)
    # Emitted: predicts at the root and at each accepted node (accept_index holds their flat positions).
    count = accept_token_num.to(torch.int64)[:, None]
    column = torch.arange(nodes, device=device)
    flat = accept_index.to(torch.int64)
    tokens = predicts.to(torch.int64)[flat.clamp(min=0)]
    tokens = torch.where(column <= count, tokens, -1)
    accepted = flat[:, 1:] - torch.arange(batch, device=device)[:, None] * nodes  # node numbers 1..N
    accepted = torch.where(column[1:] <= count, accepted, -1)
    return tokens, accepted


def _uniforms(generator, batch, nodes, device, uniforms=None):
    if uniforms is not None:
        return uniforms
    (seed,) = seeds_from(generator, 1)
    return torch.rand(batch, nodes, generator=torch.Generator(device=device).manual_seed(seed), device=device)


def _sglang_verify(
    target_probs, draft_probs, draft_tokens, generator=None, *, num_draft=None, uniforms=None, threshold_acc=1.0
):
    """The chain contract: a chain of num_draft (default g) drafts is the tree parents = [0, 1, ..., n-1, -1, ...]."""
    batch, gamma = draft_tokens.shape
    device = target_probs.device
    counts = torch.full((batch,), gamma, device=device) if num_draft is None else num_draft.to(device)
    node = torch.arange(gamma, device=device)
    parents = torch.where(node < counts[:, None], node, -1)
    uniforms = _uniforms(generator, batch, gamma + 1, device, uniforms)
    tokens, _ = _kernel(target_probs, draft_tokens, parents, uniforms, threshold_acc)
    return tokens


def _sglang_tree_verify(
    target_probs, draft_probs, draft_tokens, parents, generator=None, *, return_nodes=False, uniforms=None
):
    """The tree contract (specref.tree_contract); draft_probs is not read (target-only). uniforms [B, N+1]: SGLang's
    own convention (column j is node j's one coin, column N the final draw), given by the rare-edge probe."""
    batch, n = draft_tokens.shape
    uniforms = _uniforms(generator, batch, n + 1, target_probs.device, uniforms)
    tokens, nodes = _kernel(target_probs, draft_tokens, parents, uniforms)
    return (tokens, nodes) if return_nodes else tokens


def _sglang_threshold_verify(target_probs, draft_probs, draft_tokens, generator=None, **kwargs):
    return _sglang_verify(target_probs, draft_probs, draft_tokens, generator, threshold_acc=0.5, **kwargs)


_SGLANG_NOTES = (
    "sgl_kernel.tree_speculative_sampling_target_only on a chain tree. Target-only: drafts are verified as point "
    "masses and draft_probs is ignored (law p, lower acceptance). Coins are float32 and compared with <=."
)


def sglang_adapter() -> Adapter:
    return Adapter(
        "sglang",
        _sglang_verify,
        ragged=True,
        point_mass=True,
        uniforms=True,
        device="cuda",
        rule="match",
        notes=_SGLANG_NOTES,
    )


def sglang_tree_adapter():
    from ..tree.adapters import TreeAdapter

    return TreeAdapter(
        "sglang-tree",
        _sglang_tree_verify,
        device="cuda",
        rule="target_only",
        scheme="topk",
        nodes=True,
        uniforms=True,
        coupled=False,
        uniform_dtype=torch.float32,
        notes="sgl_kernel.tree_speculative_sampling_target_only on the harness's top-k trees (EAGLE's drafting). "
        "One coin per node, compared with the running sum of p over the children in sibling order: the law of "
        "the target_only rule, with its own coupling (so no coupling check; its uniforms reach the rare-edge "
        "probe only). Float32 coins, compared with <=.",
    )


def sglang_threshold_adapter() -> Adapter:
    return Adapter(
        "sglang-threshold",
        _sglang_threshold_verify,
        ragged=True,
        point_mass=True,
        uniforms=True,
        device="cuda",
        rule="match",
        lossy=True,
        notes=_SGLANG_NOTES + " Configured with threshold_acc=0.5 (accept if coin <= 2 p(d)): lossy by design.",
    )
