"""Deliberately wrong verifiers, one per bug class seen in real engines, each a one-step change of the
exact skeleton in `core`. Every function follows the verify contract; `uniforms=` ([B, g+1]) is accepted for
deterministic tests but not declared to the harness, which runs the mutants as black boxes.
"""

from __future__ import annotations

import os

import torch

from . import core
from .core import Steps, Tensor, draw_uniforms, run, uniforms_for


def _with_verify_rows(target_probs: Tensor, verify_rows: Tensor) -> Tensor:
    """target_probs with rows 0..g-1 (the verify path) replaced and the bonus row g kept."""
    return torch.cat([verify_rows, target_probs[:, -1:].to(verify_rows.dtype)], dim=1)


# --- target law ---


def verify_ignores_temperature(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """Accept tests and residuals use softmax(l) = p^2 / sum p^2, the law before temperature 2; the bonus keeps p."""
    untempered = target_probs[:, :-1].double() ** 2
    untempered = untempered / untempered.sum(-1, keepdim=True)
    target = _with_verify_rows(target_probs, untempered)
    return run(target, draft_probs, draft_tokens, uniforms_for(uniforms, generator, draft_tokens))


def verify_ignores_top_k(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """Accept tests and residuals use an untruncated law: p mixed with 10% uniform mass over the whole vocabulary."""
    vocab_size = target_probs.shape[-1]
    untruncated = 0.9 * target_probs[:, :-1].double() + 0.1 / vocab_size
    target = _with_verify_rows(target_probs, untruncated)
    return run(target, draft_probs, draft_tokens, uniforms_for(uniforms, generator, draft_tokens))


def greedy_verification(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """Accept iff d == argmax p; the correction and the bonus are argmax p."""
    greedy = torch.nn.functional.one_hot(target_probs.argmax(-1), target_probs.shape[-1]).double()
    return run(greedy, None, draft_tokens, uniforms_for(uniforms, generator, draft_tokens))


# --- draft law ---


def ratio_other_draft_logits(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """The ratio and residual use softmax(q), the draft probabilities taken for logits, not the q drafts came from."""
    other = draft_probs.double().softmax(-1)
    return run(target_probs, other, draft_tokens, uniforms_for(uniforms, generator, draft_tokens))


def drafts_as_one_hot(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """Sampled drafts are verified as one-hot: accept with p(d), residual p without d. The law stays p (this
    rule is lossless for any draft law), but the acceptance rate drops from sum min(p, q) to E_q[p(d)]."""
    return run(target_probs, None, draft_tokens, uniforms_for(uniforms, generator, draft_tokens))


def _residual_at_drafted_token(p_row, q_row, drafted):
    residual = p_row.clone()
    at = drafted[:, None]
    return residual.scatter(1, at, (p_row.gather(1, at) - q_row.gather(1, at)).clamp(min=0))


def residual_at_drafted_token(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """The residual subtracts q only at the drafted token: p everywhere else."""
    steps = Steps(residual=_residual_at_drafted_token)
    return run(target_probs, draft_probs, draft_tokens, uniforms_for(uniforms, generator, draft_tokens), steps)


def residual_paired_by_position(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """The residual pairs p and q by position in a shifted buffer: max(0, p_x - q_{x-1}) instead of p_x - q_x."""
    steps = Steps(residual=lambda p_row, q_row, drafted: (p_row - q_row.roll(1, dims=-1)).clamp(min=0))
    return run(target_probs, draft_probs, draft_tokens, uniforms_for(uniforms, generator, draft_tokens), steps)


# --- zero edges ---

#: Resolution of the coarse uniform in `u_zero_accepts_zero_prob`: P(u = 0) = 1/256 per test, not 2^-24.
COARSE_UNIFORM_LEVELS = 256


def u_zero_accepts_zero_prob(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """Accept when u <= p/q, with a uniform that can be exactly 0: a draft with p(d) = 0 is then accepted."""

    def accept(u, p_at_draft, q_at_draft):
        coarse = torch.floor(u * COARSE_UNIFORM_LEVELS) / COARSE_UNIFORM_LEVELS
        return coarse <= p_at_draft / q_at_draft

    steps = Steps(accept=accept)
    return run(target_probs, draft_probs, draft_tokens, uniforms_for(uniforms, generator, draft_tokens), steps)


def fp32_uniforms(uniforms: Tensor | None, generator, draft_tokens: Tensor) -> Tensor:
    """The injected uniforms, or [B, g+1] float32 ones as torch.rand gives them: exactly 0 with probability 2^-24
    on CPU (the low 24 bits of one generator output), the uniforms most engines draw."""
    if uniforms is not None:
        return uniforms
    if generator is None:
        raise ValueError("generator=None: a mutant draws its uniforms from the caller's torch.Generator")
    batch, gamma = draft_tokens.shape
    drawn = torch.rand(batch, gamma + 1, generator=generator, dtype=torch.float32, device=generator.device)
    return drawn.to(draft_tokens.device)


def accept_le_fp32(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """Accept when u <= p/q on float32 uniforms (transformers' `r_i <= probability_ratio`): at u = 0 exactly, which
    happens with probability 2^-24 per accept test, a draft with p(d) = 0 is accepted. Exact otherwise."""
    steps = Steps(accept=lambda u, p_at_draft, q_at_draft: u <= p_at_draft / q_at_draft)
    return run(target_probs, draft_probs, draft_tokens, fp32_uniforms(uniforms, generator, draft_tokens), steps)


def _left_search(weights: Tensor, u: Tensor) -> Tensor:
    partial = weights.cumsum(-1)  # [B, V]
    threshold = (u * partial[:, -1])[:, None].contiguous()  # [B, 1]
    return torch.searchsorted(partial, threshold, side="left")[:, 0].clamp(max=weights.shape[-1] - 1)


def inverse_cdf_left_search(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """The correction and bonus draws search the cumulative sum on the left side, searchsorted(cumsum(w), u * sum,
    side='left'): at u = 0 (float32, 2^-24 per draw) it returns token 0 even when w_0 = 0. Exact otherwise."""
    steps = Steps(draw=_left_search)
    return run(target_probs, draft_probs, draft_tokens, fp32_uniforms(uniforms, generator, draft_tokens), steps)


def _closed_at_zero(weights: Tensor, u: Tensor) -> Tensor:
    partial = weights.cumsum(-1)  # [B, V]
    return (partial >= u[:, None] * partial[:, -1:]).to(torch.int8).argmax(-1)


def inverse_cdf_from_first_token(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """The final draw takes the first token whose cumulative sum reaches u * sum (>=, the intervals start at the
    first token, closed at 0): at u = 0 (float32, 2^-24 per draw) a leading zero-probability token is drawn."""
    steps = Steps(draw=_closed_at_zero)
    return run(target_probs, draft_probs, draft_tokens, fp32_uniforms(uniforms, generator, draft_tokens), steps)


def nan_ratio_accepted(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """The ratio's q is masked by p's support (0/0 = NaN at p(d) = 0), and the test `not (u >= ratio)` accepts NaN."""

    def accept(u, p_at_draft, q_at_draft):
        return ~(u >= p_at_draft / (q_at_draft * (p_at_draft > 0)))

    steps = Steps(accept=accept)
    return run(target_probs, draft_probs, draft_tokens, uniforms_for(uniforms, generator, draft_tokens), steps)


#: Residual mass below which `empty_residual_out_of_vocab` calls a residual empty: loose, so that near-equal p and q
#: (Z ~ 1e-3) reach the empty path at the harness's sample sizes, as large vocabularies reach it in real engines.
EMPTY_RESIDUAL_MASS = 1e-2


def _loosely_empty_residual(p_row, q_row, drafted):
    residual = (p_row - q_row).clamp(min=0)
    return torch.where(residual.sum(-1, keepdim=True) < EMPTY_RESIDUAL_MASS, 0.0, residual)


def empty_residual_out_of_vocab(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """A residual with mass Z < 1e-2 is taken as empty, and an empty residual emits id V (out of vocabulary)."""
    steps = Steps(residual=_loosely_empty_residual, empty_token="vocab_size")
    return run(target_probs, draft_probs, draft_tokens, uniforms_for(uniforms, generator, draft_tokens), steps)


# --- residual normalisation ---


def softmax_residual(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """The residual is normalised with softmax(max(0, p - q)) instead of division by its sum."""
    steps = Steps(residual=lambda p_row, q_row, drafted: (p_row - q_row).clamp(min=0).softmax(-1))
    return run(target_probs, draft_probs, draft_tokens, uniforms_for(uniforms, generator, draft_tokens), steps)


#: The floor in `residual_floor_eps`; large enough that the leak shows at V <= 64 within the harness's budget.
RESIDUAL_FLOOR = 1e-4


def residual_floor_eps(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """The residual is clamp(p - q, min=eps), leaking mass to tokens with p = 0."""
    steps = Steps(residual=lambda p_row, q_row, drafted: (p_row - q_row).clamp(min=RESIDUAL_FLOOR))
    return run(target_probs, draft_probs, draft_tokens, uniforms_for(uniforms, generator, draft_tokens), steps)


# --- vocabulary tail ---

#: The tile of `recovered_whole_tiles_only`: vLLM's sample_recovered_tokens_kernel scans 8,192 tokens a block
#: (vLLM PR 34974).
TILE = 8192


def _whole_tiles(p_row, q_row, drafted):
    residual = (p_row - q_row).clamp(min=0)
    vocab_size = residual.shape[-1]
    residual[:, (vocab_size // TILE) * TILE if vocab_size >= TILE else vocab_size :] = 0.0
    return residual


def recovered_whole_tiles_only(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """The recovered (correction) token is drawn scanning only whole tiles of 8,192 tokens: at V >= 8,192 the
    residual's mass in the last, partial tile is never emitted (the rest renormalised); the bonus draw is whole."""
    steps = Steps(residual=_whole_tiles)
    return run(target_probs, draft_probs, draft_tokens, uniforms_for(uniforms, generator, draft_tokens), steps)


# --- control flow ---


def continue_after_reject(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """Every position is verified independently: a rejected draft is replaced by its correction and verification
    goes on; the bonus follows when the last draft is accepted."""
    uniforms = uniforms_for(uniforms, generator, draft_tokens)
    batch, gamma = draft_tokens.shape
    draft_tokens = draft_tokens.long()
    p = target_probs.double()  # [B, g+1, V]
    q = draft_probs.double()  # [B, g, V]
    u = uniforms.double()
    accepted = u[:, :gamma] < core.gather(p[:, :gamma], draft_tokens) / core.gather(q, draft_tokens)  # [B, g]
    residual = (p[:, :gamma] - q).clamp(min=0)  # [B, g, V]
    residual = torch.where((residual > 0).any(-1, keepdim=True), residual, p[:, :gamma])
    flat = residual.reshape(batch * gamma, -1)
    corrections = core.inverse_cdf(flat, u[:, gamma].repeat_interleave(gamma)).view(batch, gamma)
    bonus = core.inverse_cdf(p[:, gamma], u[:, gamma])
    tokens = torch.where(accepted, draft_tokens, corrections)
    last = torch.where(accepted[:, -1], bonus, -1)
    return torch.cat([tokens, last[:, None]], dim=1)


def count_all_accepts(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """Kept = the number of accepts anywhere in the chain (FlashInfer's accepted_token_num), not those before the
    first rejection; the first that many drafts are emitted, then a correction or bonus from the next row."""
    steps = Steps(count=lambda accepted: accepted.to(torch.int64).sum(-1))
    return run(target_probs, draft_probs, draft_tokens, uniforms_for(uniforms, generator, draft_tokens), steps)


def bonus_wrong_row(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """After g accepts the bonus is drawn from p_g (row g-1) instead of p_{g+1} (row g)."""
    steps = Steps(bonus_offset=-1)
    return run(target_probs, draft_probs, draft_tokens, uniforms_for(uniforms, generator, draft_tokens), steps)


def bonus_missing(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """After g accepts no bonus token is emitted."""
    steps = Steps(bonus=False)
    return run(target_probs, draft_probs, draft_tokens, uniforms_for(uniforms, generator, draft_tokens), steps)


def placeholder_as_index(target_probs, draft_probs, draft_tokens, generator=None, *, num_draft=None, uniforms=None):
    """Ragged rows: num_draft is ignored and the -1 placeholders are used as indices (wrapping to id V-1), so
    placeholder positions are verified as drafts of token V-1."""
    vocab_size = target_probs.shape[-1]
    wrapped = draft_tokens.long() % vocab_size  # -1 -> V-1, as Python/NumPy negative indexing does
    return run(target_probs, draft_probs, wrapped, uniforms_for(uniforms, generator, draft_tokens))


def point_mass_keeps_draft(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """Point-mass drafts (draft_probs=None): after a rejection the correction is drawn from p itself, d included,
    instead of p with d removed."""
    steps = Steps(residual=lambda p_row, q_row, drafted: p_row) if draft_probs is None else core.EXACT
    return run(target_probs, draft_probs, draft_tokens, uniforms_for(uniforms, generator, draft_tokens), steps)


# --- randomness ---


def shared_uniform_positions(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """One uniform feeds every accept test of a row (u_i = u_0)."""
    uniforms = uniforms_for(uniforms, generator, draft_tokens).clone()
    uniforms[:, :-1] = uniforms[:, :1]
    return run(target_probs, draft_probs, draft_tokens, uniforms)


def shared_uniform_rows(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """One row of uniforms is shared by every row of the batch."""
    batch, gamma = draft_tokens.shape
    if uniforms is None:
        uniforms = draw_uniforms(generator, 1, gamma, draft_tokens.device)
    return run(target_probs, draft_probs, draft_tokens, uniforms[:1].expand(batch, -1))


def seed_ignored(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """The caller's generator is ignored: each call seeds a fresh generator from the OS."""
    fresh = torch.Generator(device=draft_tokens.device).manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
    return run(target_probs, draft_probs, draft_tokens, uniforms_for(uniforms, fresh, draft_tokens))


def batch_composition(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """A batch-level flag: if any row is greedy (every target row one-hot), the whole batch is verified greedily."""
    greedy_rows = (target_probs.amax(-1) >= 1).all(-1)  # [B]
    if bool(greedy_rows.any()):
        return greedy_verification(target_probs, draft_probs, draft_tokens, generator, uniforms=uniforms)
    return run(target_probs, draft_probs, draft_tokens, uniforms_for(uniforms, generator, draft_tokens))
