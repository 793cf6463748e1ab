"""Chain verification in the batched engine: exact speculative sampling for B sequences at once (CPU or CUDA).

It follows the verify contract (`specref.conformance.adapters`) and the sampling convention of `specref.randomness`,
so that with the same uniforms it emits the same tokens as `specref.reference`, token for token, on float64 inputs:

  * uniforms [B, g+1]: u_i (i < g) feeds the accept test of draft i as u_i < p_i(d_i) / q_i(d_i), strictly;
    u_g feeds the one final draw (correction or bonus), also for rows with fewer drafts (num_draft);
  * the final draw is an inverse CDF over unnormalised weights w: the first j with w_j > 0 and
    cumsum(w)_j > u_g * cumsum(w)_{V-1}; if rounding leaves none, the last j with w_j > 0;
  * an empty residual (numerically all zero) is replaced by the target row p itself.

Precision. float64 inputs run in float64 with the reference's own IEEE operations (on CUDA the cumsum is a
parallel scan, equal up to ties within rounding). fp32, fp16 and bf16 inputs run in fp32, and the final draw is a
two-level inverse CDF (`specref.batched.draw`): the convention up to a relative error of a few 1e-7 on each
block's mass, far below what any law check can see.

Cost. No Python loop over B or g, and no [B, g, V] temporary: the accept ratios are gathered at the drafted tokens
([B, g]); each row then reads one target row and one draft row ([B, V]) at its first rejection, or one target row
(p_{g+1}) when every draft is accepted. A fused kernel (`specref.batched.kernels`: C on CPU, Triton on CUDA) reads
those rows once; without one, torch operations copy and combine them. On CPU, fp32/fp16/bf16 inputs with
V > BLOCK go through one C call for the whole verification (`draw.fused_chain`: the accept tests with the same fp32
operations as below, the draw, the emitted tokens), which saves the dozen torch operations' fixed cost and their
reads of cold memory.

Randomness. With a generator, the uniforms are one torch.rand draw of shape [B, g+1] (see `draw_uniforms`), so a
row's uniforms depend on its index in the batch. With injected uniforms a row's result depends on that row alone.

Syncs. `validate=False` skips every data check. One host sync remains on accelerators: a `.any()` deciding whether
the rare slow path runs (a residual that is numerically empty, or a threshold that rounds up to the row total).
The first call on each CUDA device also runs the Triton kernel's one-off self-check
(`specref.batched.kernels.cuda`).
"""

from __future__ import annotations

import torch

from .draw import FinalRows, final_draw, fused_chain, release_workspace
from .validation import check_shapes, check_values, compute_dtype

__all__ = ["verify", "verify_logits", "draw_uniforms", "num_emitted", "release_workspace"]


def verify(
    target_probs: torch.Tensor,  # [B, g+1, V]  p_1 .. p_{g+1}
    draft_probs: torch.Tensor | None,  # [B, g, V]  q_1 .. q_g; None for point-mass drafts
    draft_tokens: torch.Tensor,  # [B, g]  d_1 .. d_g (int64); entries past num_draft are ignored (may be -1)
    generator: torch.Generator | None = None,
    *,
    num_draft: torch.Tensor | None = None,  # [B] drafts per row, 0..g; None means g for every row
    uniforms: torch.Tensor | None = None,  # [B, g+1] in [0, 1); replaces the generator's draw
    validate: bool = True,
) -> torch.Tensor:
    """Verify B rows of g drafts; return [B, g+1] int64 emitted tokens, left-aligned, padded with -1.

    Injected uniforms take precedence over the generator and are cast to the compute dtype (fp32 unless the
    probabilities are float64). A row with num_draft = 0 emits one token drawn from its first target row.
    """
    dtype, uniforms = checked_uniforms(
        target_probs, draft_probs, draft_tokens, generator, num_draft, uniforms, validate
    )
    fused = fused_chain(target_probs, draft_probs, draft_tokens, num_draft, uniforms, dtype)  # CPU: one C call
    if fused is not None:
        return fused
    batch, rows, vocab_size = target_probs.shape
    gamma = rows - 1
    device = target_probs.device
    draft_tokens = draft_tokens.long()

    # Accept tests at the drafted tokens only: [B, g]. Inactive positions (past num_draft) are masked before any
    # gather, so -1 placeholders are never used as indices.
    positions = torch.arange(gamma, device=device)
    if num_draft is None:
        num_draft = torch.full((batch,), gamma, dtype=torch.long, device=device)
    num_draft = num_draft.long()
    active = positions < num_draft[:, None]  # [B, g]
    safe_tokens = torch.where(active, draft_tokens, 0)  # [B, g]
    p_at_draft = target_probs[:, :gamma].gather(2, safe_tokens[..., None]).squeeze(-1).to(dtype)  # [B, g]
    if draft_probs is None:
        ratio = p_at_draft  # q(d) = 1
    else:
        ratio = p_at_draft / draft_probs.gather(2, safe_tokens[..., None]).squeeze(-1).to(dtype)  # [B, g]
    accepted = (uniforms[:, :gamma] < ratio) & active  # strict: u = 0 never accepts p(d) = 0; NaN never accepts
    num_accepted = accepted.to(torch.int32).cumprod(dim=1).sum(dim=1)  # [B] leading accepts
    rejected = num_accepted < num_draft  # [B]

    # The final draw (one per row): from max(0, p_{k+1} - q_{k+1}) at the first rejection k, or from the bonus row
    # p_{k+1} after k = num_draft accepts; a rejected point-mass draft leaves p_{k+1} without its token.
    no_row = torch.full_like(num_accepted, -1)
    if draft_probs is None:
        last_draft = safe_tokens.gather(1, num_accepted.clamp(max=gamma - 1)[:, None])[:, 0]
        draft_row, removed = no_row, torch.where(rejected, last_draft, -1)
    else:
        draft_row, removed = torch.where(rejected, num_accepted, -1), no_row
    final = FinalRows(target_probs, draft_probs, num_accepted, draft_row, removed)
    final_token = final_draw(final, uniforms[:, gamma], dtype)

    # Emitted: the accepted drafts, then the final token, then -1.
    out_positions = torch.arange(rows, device=device)  # [g+1]
    padded_drafts = torch.cat([draft_tokens, draft_tokens.new_zeros(batch, 1)], dim=1)  # [B, g+1]
    tokens = torch.where(out_positions < num_accepted[:, None], padded_drafts, -1)  # [B, g+1]
    return tokens.scatter_(1, num_accepted[:, None].long(), final_token[:, None])


def verify_logits(
    target_logits: torch.Tensor,  # [B, g+1, V]
    draft_logits: torch.Tensor | None,  # [B, g, V]; None for point-mass drafts
    draft_tokens: torch.Tensor,  # [B, g]
    generator: torch.Generator | None = None,
    *,
    temperature: float = 1.0,
    **kwargs,
) -> torch.Tensor:
    """`verify` on softmax(logits / temperature), computed in fp32 (float64 for float64 logits).

    This materialises the [B, g+1, V] probabilities; callers who hold probabilities should call `verify`.
    """
    if not (isinstance(temperature, (int, float)) and temperature > 0):
        raise ValueError(f"temperature={temperature!r} must be a number > 0")
    if kwargs.get("validate", True):
        for name, logits in (("target_logits", target_logits), ("draft_logits", draft_logits)):
            if logits is not None:
                _check_logits(name, logits)
    target_probs = _softmax(target_logits, temperature)
    draft_probs = None if draft_logits is None else _softmax(draft_logits, temperature)
    return verify(target_probs, draft_probs, draft_tokens, generator, **kwargs)


def checked_uniforms(target_probs, draft_probs, draft_tokens, generator, num_draft, uniforms, validate: bool):
    """Check a chain verifier's inputs; return (compute dtype, uniforms [B, g+1] in it: given, or drawn)."""
    check_shapes(target_probs, draft_probs, draft_tokens, num_draft, uniforms, generator)
    if validate:
        check_values(target_probs, draft_probs, draft_tokens, num_draft, uniforms)
    dtype = compute_dtype(target_probs.dtype)
    if uniforms is None:
        batch, rows, _ = target_probs.shape
        uniforms = draw_uniforms(batch, rows - 1, generator, target_probs.device, dtype=dtype)
    return dtype, uniforms.to(dtype)


def draw_uniforms(
    batch: int, gamma: int, generator: torch.Generator, device, dtype: torch.dtype = torch.float32
) -> torch.Tensor:
    """The [B, g+1] uniforms `verify` draws when given a generator and no uniforms (drawn on the generator's device)."""
    uniforms = torch.rand((batch, gamma + 1), generator=generator, device=generator.device, dtype=dtype)
    return uniforms.to(device)


def num_emitted(tokens: torch.Tensor) -> torch.Tensor:
    """[B] number of tokens each row emitted (1..g+1): the entries before the -1 padding."""
    return (tokens >= 0).sum(dim=1)


def _softmax(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    return torch.softmax(logits.to(compute_dtype(logits.dtype)) / temperature, dim=-1)


def _check_logits(name: str, logits: torch.Tensor) -> None:
    if not isinstance(logits, torch.Tensor) or not logits.is_floating_point():
        raise ValueError(f"{name} is {type(logits).__name__}; expected a float torch.Tensor")
    bad = torch.isnan(logits) | (logits == float("inf"))
    if bool(bad.any()):
        index = tuple(int(i) for i in bad.nonzero()[0])
        raise ValueError(f"{name}{list(index)}={logits[index].item()!r}: logits must be finite or -inf")
    if bool((logits == float("-inf")).all(dim=-1).any()):
        raise ValueError(f"{name} has a row that is -inf everywhere; no token can be drawn")
