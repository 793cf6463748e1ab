"""SGLang's tree speculative sampling kernel, run on a chain tree (CUDA only: sgl_kernel ships CUDA binaries).

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

from ..adapters import Adapter, seeds_from

# Read at sgl-project/sglang commits 6bfad8f187aa80f7c9a2a06f7861409c4e3a4ad2 (with a draft_probs buffer) and
# 01fe7c22269dc027da4b77a9ca807073225f7c24 (without); kernel in sgl-kernel/csrc/speculative/
# speculative_sampling.cuh at b227f63247cdaf7fcbc4cfec8c3379120276ec82. The tree here is a chain: node 0 is the
# root (the last verified token), node i (1..g) is d_i; retrive_next_token[i] = i+1, the last -1, no siblings.
# The node-i target row is p_{i+1}, so target_probs maps one to one. uniform_samples[b, i] is the coin for node i's
# child (d_{i+1}) and uniform_samples_for_final_sampling[b] feeds the final draw: the specref convention, except
# that the kernel accepts with `coin <= p(d) / threshold_acc` and draws in float32.
# It is target-only: each draft is verified as a point mass (accept with p(d); residual p with d removed), and any
# draft_probs given are ignored. That keeps the law p for any draft law, but the acceptance rate is E_q[p(d)], not
# sum_x min(p, q): rate checks for the min(1, p/q) rule will flag it.


def _sglang_verify(
    target_probs, draft_probs, draft_tokens, generator=None, *, num_draft=None, uniforms=None, threshold_acc=1.0
):
    from sgl_kernel import tree_speculative_sampling_target_only

    batch, gamma = draft_tokens.shape
    device = target_probs.device
    nodes = gamma + 1
    if uniforms is None:
        (seed,) = seeds_from(generator, 1)
        uniforms = torch.rand(batch, nodes, generator=torch.Generator(device=device).manual_seed(seed), device=device)
    uniforms = uniforms.to(device=device, dtype=torch.float32)
    counts = torch.full((batch,), gamma, device=device) if num_draft is None else num_draft.to(device)
    node = torch.arange(nodes, device=device)
    root = torch.zeros(batch, 1, dtype=torch.int64, device=device)  # the last verified token; the kernel never reads it
    candidates = torch.cat([root, draft_tokens.to(device=device, dtype=torch.int64)], dim=1)  # [B, g+1]
    candidates = torch.where(candidates < 0, 0, candidates).contiguous()  # placeholders past num_draft are unread
    retrive_index = (torch.arange(batch, device=device)[:, None] * nodes + node).contiguous()  # [B, g+1]
    retrive_next_token = torch.where(node < counts[:, None], node + 1, -1).contiguous()  # chain ends at num_draft
    retrive_next_sibling = torch.full((batch, nodes), -1, dtype=torch.int64, device=device)
    predicts = torch.full((batch * nodes,), -1, dtype=torch.int32, device=device)
    accept_index = torch.full((batch, nodes), -1, dtype=torch.int32, device=device)
    accept_token_num = torch.zeros(batch, dtype=torch.int32, device=device)
    kwargs = dict(
        predicts=predicts,
        accept_index=accept_index,
        accept_token_num=accept_token_num,
        candidates=candidates,
        retrive_index=retrive_index,
        retrive_next_token=retrive_next_token,
        retrive_next_sibling=retrive_next_sibling,
        uniform_samples=uniforms.contiguous(),
        uniform_samples_for_final_sampling=uniforms[:, gamma].contiguous(),
        target_probs=target_probs.float().contiguous(),
        threshold_single=1.0,
        threshold_acc=threshold_acc,
        deterministic=True,
    )
    if "draft_probs" in inspect.signature(tree_speculative_sampling_target_only).parameters:
        kwargs["draft_probs"] = torch.zeros(batch, nodes, target_probs.shape[-1], device=device)  # scratch buffer
    tree_speculative_sampling_target_only(**kwargs)
    # Emitted: predicts at the root and at each accepted node, accept_token_num + 1 tokens per row.
    tokens = predicts.view(batch, nodes).to(torch.int64)
    return torch.where(node <= accept_token_num[:, None].to(torch.int64), tokens, -1)


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
