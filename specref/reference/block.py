"""Block verification of a chain (Sun et al., ICLR 2025, arXiv 2403.10444, Alg. 2), written as the math.

Drafts x_1..x_g with x_i ~ q_{i-1}; p_i, q_i are the target and draft laws after x_1..x_i (p_0, q_0 at the
prefix), so in code target_probs[i] = p_i and draft_probs[i] = q_i, 0-indexed like `specref.reference.chain`.

  b_0 = 1,   b_i = min(1, b_{i-1} p_{i-1}(x_i) / q_{i-1}(x_i))
  r_i = sum_x (b_i p_i(x) - q_i(x))_+,   h_i = r_i / (r_i + 1 - b_i) for 0 < i < g,   h_g = b_g,   h_0 = 1
  eta_i ~ U(0, 1) independently,   tau = max{i : eta_i <= h_i}   (it does not stop at a failure)
  emit x_1..x_tau, then Y ~ norm((b_tau p_tau - q_tau)_+) if tau < g, or Y ~ p_g if tau = g.

Lossless (Thm 1) and never worse than token verification; P(tau >= k) = E_{x ~ q}[b_k]. Where r_i = 0 (then
b_i = 1 and p_i = q_i, or b_i p_i <= q_i), h_i = 0: stopping at i would need a draw from an empty residual.

Randomness (coupling convention shared with `specref.batched.tree`): `Injected` with g+1 uniforms; the test of
eta_i (as u < h_i: equal in law) uses u_{i-1}, i = 1..g in order, and u_g feeds the final draw. A numerically
empty final residual falls back to p_tau, as in the chain engine.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..randomness import Randomness
from ..validation import check_gamma
from .chain import Model, Row, _check_step, _point_mass, _row, draw_drafts
from .tree import total


def weights(target_probs, draft_probs, draft_tokens) -> tuple[list, list]:
    """(b_0..b_g, h_0..h_g) of the module docstring."""
    p, q, x = target_probs, draft_probs, draft_tokens
    gamma = len(x)
    b = [1]
    for i in range(1, gamma + 1):
        b.append(min(1, b[i - 1] * p[i - 1][x[i - 1]] / q[i - 1][x[i - 1]]))
    h = [1]
    for i in range(1, gamma):
        r = total([max(0, b[i] * p_y - q_y) for p_y, q_y in zip(p[i], q[i])])
        h.append(r / (r + 1 - b[i]) if r > 0 else 0)
    h.append(b[gamma])
    return b, h


def verify_block(
    target_probs: Sequence[Row],  # [g+1][V]  p_0 .. p_g
    draft_probs: Sequence[Row] | None,  # [g][V]  q_0 .. q_{g-1}; None for point-mass drafts
    draft_tokens: Sequence[int],  # [g]  x_1 .. x_g
    rng: Randomness,
    *,
    validate: bool = True,
) -> list[int]:
    """Verify g drafts as one block; return the 1..g+1 emitted tokens."""
    gamma = len(draft_tokens)
    if draft_probs is None:
        draft_probs = [_point_mass(len(target_probs[0]), x) for x in draft_tokens]
    if validate:
        _check_step(target_probs, draft_probs, draft_tokens)
    b, h = weights(target_probs, draft_probs, draft_tokens)
    passed = [i for i in range(1, gamma + 1) if rng.accept(h[i])]  # eta_i <= h_i
    tau = max(passed, default=0)
    if tau == gamma:
        final = target_probs[gamma]
    else:
        final = [max(0, b[tau] * p_y - q_y) for p_y, q_y in zip(target_probs[tau], draft_probs[tau])]
        if not any(final):  # numerically empty: see module docstring
            final = target_probs[tau]
    return list(draft_tokens[:tau]) + [rng.categorical(final)]


def cycle(target: Model, draft: Model, prefix: Sequence[int], gamma: int, rng: Randomness) -> list[int]:
    """One block cycle: draft g tokens from `draft`, score g+1 target rows, verify as one block."""
    check_gamma(gamma)
    prefix = tuple(prefix)
    tokens, draft_rows = draw_drafts(draft, prefix, gamma, rng)
    target_rows = [_row(target, "target", prefix + tuple(tokens[:i])) for i in range(gamma + 1)]
    return verify_block(target_rows, draft_rows, tokens, rng, validate=False)
