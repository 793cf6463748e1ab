"""A small vectorised verifier whose steps can be swapped one at a time: the mutants' common skeleton.

With the default steps it is exact speculative sampling under the shared convention of `specref.randomness`
(uniforms [B, g+1]; u_i < p(d)/q(d) strictly; u_g feeds one inverse-CDF draw; an empty residual falls back to p),
so each mutant differs from a correct engine in exactly the step it replaces. Arithmetic is float64 on [B, g]
and [B, V] tensors (the drafted entries, and one target and one draft row per batch row); no [B, g, V] copy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

Tensor = torch.Tensor


def draw_uniforms(generator: torch.Generator | None, batch: int, gamma: int, device) -> Tensor:
    """[B, g+1] float64 uniforms in [0, 1) from the caller's generator."""
    if generator is None:
        raise ValueError("generator=None: a mutant draws its uniforms from the caller's torch.Generator")
    return torch.rand(batch, gamma + 1, generator=generator, dtype=torch.float64, device=generator.device).to(device)


def uniforms_for(uniforms: Tensor | None, generator, draft_tokens: Tensor) -> Tensor:
    """The injected uniforms, or [B, g+1] fresh ones from the generator."""
    batch, gamma = draft_tokens.shape
    return draw_uniforms(generator, batch, gamma, draft_tokens.device) if uniforms is None else uniforms


def gather(rows: Tensor, tokens: Tensor) -> Tensor:
    """rows [..., V] at tokens [...] -> [...]."""
    return rows.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def inverse_cdf(weights: Tensor, u: Tensor) -> Tensor:
    """[B] first j with w_j > 0 and cumsum_j > u * total; else the last j with w_j > 0 (else V - 1)."""
    vocab_size = weights.shape[-1]
    partial = weights.cumsum(-1)  # [B, V]
    hit = (weights > 0) & (partial > u[:, None] * partial[:, -1:])
    first = hit.to(torch.int8).argmax(-1)
    last_positive = vocab_size - 1 - (weights > 0).flip(-1).to(torch.int8).argmax(-1)
    return torch.where(hit.any(-1), first, last_positive)


def leading_accepts(accepted: Tensor) -> Tensor:
    """[B] number of accepts before the first rejection."""
    return accepted.to(torch.int64).cumprod(-1).sum(-1)


def assemble(draft_tokens: Tensor, num_accepted: Tensor, final_token: Tensor) -> Tensor:
    """[B, g+1]: the first num_accepted drafts, then final_token (-1 for none), then -1."""
    batch, gamma = draft_tokens.shape
    padded = torch.cat([draft_tokens, draft_tokens.new_full((batch, 1), -1)], dim=1)  # [B, g+1]
    positions = torch.arange(gamma + 1, device=draft_tokens.device)
    tokens = torch.where(positions < num_accepted[:, None], padded, -1)
    return tokens.scatter(1, num_accepted[:, None], final_token[:, None].to(torch.int64))


# --- the steps a mutant may replace ---


def accept_exact(u: Tensor, p_at_draft: Tensor, q_at_draft: Tensor) -> Tensor:
    return u < p_at_draft / q_at_draft  # accept with min(1, p/q); u = 0 never accepts p = 0


def residual_exact(p_row: Tensor, q_row: Tensor, draft_token: Tensor) -> Tensor:
    return (p_row - q_row).clamp(min=0)  # Z * p', unnormalised; the draw normalises


@dataclass(frozen=True)
class Steps:
    accept: Callable[[Tensor, Tensor, Tensor], Tensor] = accept_exact  # (u [B,g], p(d), q(d)) -> [B,g] bool
    residual: Callable[[Tensor, Tensor, Tensor], Tensor] = residual_exact  # (p [B,V], q [B,V], d [B]) -> [B,V]
    count: Callable[[Tensor], Tensor] = leading_accepts  # accepted [B,g] -> [B] tokens kept
    empty_token: str | None = None  # None: an empty residual falls back to p; "vocab_size": emit id V
    bonus_offset: int = 0  # the bonus comes from target row g + bonus_offset
    bonus: bool = True  # False: no token after g accepts
    draw: Callable[[Tensor, Tensor], Tensor] = inverse_cdf  # (weights [B,V], u [B]) -> [B] the final token


EXACT = Steps()


def run(
    target_probs: Tensor,  # [B, g+1, V]
    draft_probs: Tensor | None,  # [B, g, V]; None = point masses
    draft_tokens: Tensor,  # [B, g]
    uniforms: Tensor,  # [B, g+1]
    steps: Steps = EXACT,
) -> Tensor:
    """Verify with `steps`; returns [B, g+1] int64 tokens, -1 padded."""
    batch, gamma = draft_tokens.shape
    vocab_size = target_probs.shape[-1]
    draft_tokens = draft_tokens.long()
    device = target_probs.device
    uniforms = uniforms.to(device=device, dtype=torch.float64)

    p_at_draft = gather(target_probs[:, :gamma], draft_tokens).double()  # [B, g]
    if draft_probs is None:
        q_at_draft = torch.ones_like(p_at_draft)
    else:
        q_at_draft = gather(draft_probs, draft_tokens).double()
    accepted = steps.accept(uniforms[:, :gamma], p_at_draft, q_at_draft)  # [B, g]
    num_accepted = steps.count(accepted)  # [B]
    rejected = num_accepted < gamma
    rows = torch.arange(batch, device=device)
    at = num_accepted.clamp(max=gamma - 1)  # the rejected position, for rejected rows
    drafted = draft_tokens[rows, at]  # [B]
    p_row = target_probs[rows, at].double()  # [B, V]
    if draft_probs is None:
        q_row = torch.nn.functional.one_hot(drafted.clamp(0, vocab_size - 1), vocab_size).double()
    else:
        q_row = draft_probs[rows, at].double()
    residual = steps.residual(p_row, q_row, drafted)
    empty = ~(residual > 0).any(-1)  # numerically empty residual
    if steps.empty_token is None:
        residual = torch.where(empty[:, None], p_row, residual)
    bonus_row = target_probs[:, gamma + steps.bonus_offset].double()  # [B, V]
    weights = torch.where(rejected[:, None], residual, bonus_row)
    final = steps.draw(weights, uniforms[:, gamma])
    if steps.empty_token == "vocab_size":
        final = torch.where(rejected & empty, vocab_size, final)
    if not steps.bonus:
        final = torch.where(rejected, final, -1)
    return assemble(draft_tokens, num_accepted, final)
