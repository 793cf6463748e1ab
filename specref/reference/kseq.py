"""SpecTr's K-SEQ at one node (Sun et al., "SpecTr: Fast Speculative Decoding via Optimal Transport", NeurIPS 2023,
Alg. 2): K children drawn i.i.d. from one draft row q, verified against the target row p.

With a threshold rho in [1, K] and beta(rho) = sum_x min(q(x), p(x) / rho):
  * for k = 1..K, accept child x_k with probability min(1, p(x_k) / (rho q(x_k))) and stop;
  * if all are rejected, emit from p_res(x) proportional to p(x) - min(q(x), p(x) / rho) c(rho), where
    c(rho) = (1 - (1 - beta)^K) / beta is what the K tests put on x, divided by min(q(x), p(x)/rho).
p_res is a law (every weight >= 0) exactly when c(rho) <= rho; then K-SEQ is lossless. SpecTr takes rho* with
c(rho*) = rho*, the most accepting valid threshold; `threshold` finds it by bisection on the predicate
c(rho) <= rho, in the arithmetic of its arguments (Fractions stay exact), and returns the upper end of the last
bracket, which satisfies it: a valid threshold within (K - 1) 2^-STEPS of rho*. K = 1 gives rho = 1, exact
speculative sampling.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

#: Bisection steps for rho*: the bracket [1, K] shrinks to (K - 1) 2^-STEPS.
STEPS = 40


def beta(p: Sequence, q: Sequence, rho) -> object:
    """sum_x min(q(x), p(x) / rho)."""
    return sum((min(q_x, p_x / rho) for p_x, q_x in zip(p, q)), 0 * rho)


def covered(p: Sequence, q: Sequence, k: int, rho) -> bool:
    """c(rho) <= rho: the K tests at threshold rho put no token above p (module docstring)."""
    b = beta(p, q, rho)
    if b == 0:
        return True  # disjoint supports: nothing is ever accepted
    return 1 - (1 - b) ** k <= rho * b


def threshold(p: Sequence, q: Sequence, k: int):
    """rho*, from above (module docstring); 1 where K = 1 or where rho = 1 is already valid."""
    return _threshold(tuple(p), tuple(q), k)


@lru_cache(maxsize=1 << 12)  # an exact enumeration meets the same rows at every node of every path
def _threshold(p: tuple, q: tuple, k: int):
    one = p[0] * 0 + 1  # 1 in the rows' arithmetic
    if k <= 1 or covered(p, q, k, one):
        return one
    low, high = one, one * k
    for _ in range(STEPS):
        mid = (low + high) / 2
        if covered(p, q, k, mid):
            high = mid
        else:
            low = mid
    return high


def residual_weights(p: Sequence, q: Sequence, k: int, rho) -> list:
    """The unnormalised law emitted after K rejections: p - min(q, p / rho) c(rho), clipped at 0 (rounding)."""
    b = beta(p, q, rho)
    if b == 0:
        return list(p)
    c = (1 - (1 - b) ** k) / b
    return [max(0 * rho, p_x - min(q_x, p_x / rho) * c) for p_x, q_x in zip(p, q)]
