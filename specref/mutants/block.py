"""Block verifiers gone wrong: each declares rule="block" (specref.mutants.CATALOGUE) and breaks one part of it.

Block verification (Sun et al., ICLR 2025; specref.reference.block): b_0 = 1, b_i = min(1, b_{i-1} p(x_i) / q(x_i)),
h_i = r_i / (r_i + 1 - b_i) with r_i = sum (b_i p_i - q_i)_+, h_g = b_g; tau = max{i : u_{i-1} < h_i}; the last
token from (b_tau p_tau - q_tau)_+ (tau < g) or p_g. Uniforms [B, g+1] as in specref.batched.block.
"""

from __future__ import annotations

import torch

from .core import Tensor, inverse_cdf, run, uniforms_for


def block_token_rule(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """Declared block verification, but the token rule runs: accept each draft with min(1, p/q) until the first
    rejection, correction from (p - q)_+ (vllm-ascend's block_verify before its fix). The law stays p; the
    acceptance is token verification's, below block's."""
    return run(target_probs, draft_probs, draft_tokens, uniforms_for(uniforms, generator, draft_tokens))


def block_token_residual(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """Block acceptance (the weights b_i, h_i and tau of the rule), but the correction drawn from the token rule's
    (p_tau - q_tau)_+, not (b_tau p_tau - q_tau)_+: a half-fix that moves the output law."""
    return _block(target_probs, draft_probs, draft_tokens, uniforms_for(uniforms, generator, draft_tokens),
                  scale_residual=False)  # fmt: skip


def _block(target_probs: Tensor, draft_probs: Tensor, draft_tokens: Tensor, uniforms: Tensor, *,
           scale_residual: bool) -> Tensor:  # fmt: skip
    """Block verification of full drafts in float64, with the residual's weight b_tau applied or not."""
    p, q = target_probs.double(), draft_probs.double()
    batch, gamma = draft_tokens.shape
    x = draft_tokens.long()
    ratio = p[:, :gamma].gather(2, x[..., None])[..., 0] / q.gather(2, x[..., None])[..., 0]  # [B, g]
    b = [torch.ones(batch, dtype=torch.float64)]
    for i in range(gamma):
        b.append(torch.clamp(b[-1] * ratio[:, i], max=1.0))
    b = torch.stack(b, 1)  # [B, g+1]
    r = (b[:, :gamma, None] * p[:, :gamma] - q).clamp(min=0).sum(-1)  # [B, g]: r_0 .. r_{g-1}
    h = torch.where(r > 0, r / (r + 1 - b[:, :gamma]), torch.zeros_like(r))
    h = torch.cat([h[:, 1:], b[:, gamma:]], 1)  # h_1 .. h_g
    index = torch.arange(1, gamma + 1)
    tau = ((uniforms[:, :gamma].double() < h) * index).amax(1) if gamma else torch.zeros(batch, dtype=torch.long)
    rows = torch.arange(batch)
    p_tau, q_tau = p[rows, tau], q[rows, tau.clamp(max=gamma - 1)]
    scale = b[rows, tau][:, None] if scale_residual else 1.0
    weights = torch.where((tau < gamma)[:, None], (scale * p_tau - q_tau).clamp(min=0), p_tau)
    weights = torch.where((weights > 0).any(-1, keepdim=True), weights, p_tau)
    final = inverse_cdf(weights, uniforms[:, gamma].double())
    out = torch.where(torch.arange(gamma)[None, :] < tau[:, None], x, -1)
    out = torch.cat([out, torch.full((batch, 1), -1, dtype=torch.long)], 1)
    return out.scatter_(1, tau[:, None], final[:, None])
