"""Block verification (Sun et al., ICLR 2025) for B chains at once, in torch: `specref.reference.block`, batched.

Same inputs as `specref.batched.verify` (target_probs [B, g+1, V], draft_probs [B, g, V] | None, draft_tokens
[B, g], num_draft, uniforms [B, g+1]); returns [B, g+1] emitted tokens, -1 padded. With the reference's notation:

  b_i = min(1, b_{i-1} p_{i-1}(x_i) / q_{i-1}(x_i))      a loop over i (sequential), on [B] tensors
  r_i = sum_x (b_i p_i(x) - q_i(x))_+                    one [B, g-1, V] pass
  h_i = r_i / (r_i + 1 - b_i), h_g = b_g;  tau = max{i : u_{i-1} < h_i};  final draw from
  (b_tau p_tau - q_tau)_+ (tau < g) or p_g with u_g.

A row with n = num_draft[b] < g drafts is verified as a block of n (its h_n = b_n). Coupling: token for token with
the reference on float64 (sequential totals, the same IEEE operations); fp32 and lower run in fp32.
"""

from __future__ import annotations

import torch

from . import kernels
from .chain import checked_uniforms
from .tree import _total, inverse_cdf


def verify_block(
    target_probs: torch.Tensor,  # [B, g+1, V]  p_0 .. p_g
    draft_probs: torch.Tensor | None,  # [B, g, V]  q_0 .. q_{g-1}; None for point-mass drafts
    draft_tokens: torch.Tensor,  # [B, g]  x_1 .. x_g
    generator: torch.Generator | None = None,
    *,
    num_draft: torch.Tensor | None = None,  # [B] drafts per row, 0..g
    uniforms: torch.Tensor | None = None,  # [B, g+1]
    validate: bool = True,
) -> torch.Tensor:
    """Verify B chains as blocks; return [B, g+1] int64 emitted tokens, left-aligned, padded with -1."""
    dtype, uniforms = checked_uniforms(
        target_probs, draft_probs, draft_tokens, generator, num_draft, uniforms, validate
    )
    batch, rows, vocab_size = target_probs.shape
    gamma = rows - 1
    device = target_probs.device
    if num_draft is None:
        num_draft = torch.full((batch,), gamma, dtype=torch.long, device=device)
    num_draft = num_draft.long().to(device)
    positions = torch.arange(gamma, device=device)
    active = positions < num_draft[:, None]  # [B, g]
    tokens = torch.where(active, draft_tokens.long(), 0)  # [B, g]
    walked = kernels.block_verify(target_probs, draft_probs, tokens, num_draft, uniforms)
    if walked is not None:  # the C kernel (CPU): h from the top down, rows above tau never read
        return walked[0]
    p = target_probs.to(dtype)
    if draft_probs is None:  # point masses at the drafts
        q = torch.zeros(batch, gamma, vocab_size, dtype=dtype, device=device).scatter_(2, tokens[..., None], 1.0)
    else:
        q = draft_probs.to(dtype)

    # b_0 .. b_g: [B, g+1]
    p_x = p[:, :gamma].gather(2, tokens[..., None])[..., 0]  # [B, g]
    q_x = q.gather(2, tokens[..., None])[..., 0]
    b = [torch.ones(batch, dtype=dtype, device=device)]
    for i in range(1, gamma + 1):
        b.append(torch.clamp(b[i - 1] * p_x[:, i - 1] / q_x[:, i - 1], max=1))
    b = torch.stack(b, 1)  # [B, g+1]; entries past num_draft are unused

    # h_1 .. h_g: [B, g]; h_n = b_n at each row's own length n
    if gamma > 1:
        residual = (b[:, 1:gamma, None] * p[:, 1:gamma]).sub_(q[:, 1:gamma]).clamp_(min=0)  # [B, g-1, V]
        r = _total(residual.reshape(-1, vocab_size)).view(batch, gamma - 1)
        h = torch.where(r > 0, r / (r + 1 - b[:, 1:gamma]), 0)
        h = torch.cat([h, b[:, gamma:]], 1)
    else:
        h = b[:, 1:]
    index = torch.arange(1, gamma + 1, device=device)
    h = torch.where(index == num_draft[:, None], b[:, 1:], h)
    passed = (uniforms[:, :gamma] < h) & active  # eta_i <= h_i
    tau = (passed * index).amax(1) if gamma else torch.zeros(batch, dtype=torch.long, device=device)  # [B]

    # final draw: (b_tau p_tau - q_tau)_+ if tau < n, else p_n; numerically empty: p_tau
    batch_index = torch.arange(batch, device=device)
    p_tau = p[batch_index, tau]  # [B, V]
    q_tau = q[batch_index, tau.clamp(max=max(gamma - 1, 0))] if gamma else torch.zeros_like(p_tau)
    b_tau = b.gather(1, tau[:, None])  # [B, 1]
    weights = torch.where((tau < num_draft)[:, None], (b_tau * p_tau - q_tau).clamp_(min=0), p_tau)
    weights = torch.where((weights > 0).any(-1, keepdim=True), weights, p_tau)
    final = inverse_cdf(weights, uniforms[:, gamma])

    out = torch.where(positions < tau[:, None], tokens, -1)
    out = torch.cat([out, torch.full((batch, 1), -1, dtype=torch.long, device=device)], 1)
    return out.scatter_(1, tau[:, None], final[:, None])
