"""Closed forms for exact speculative sampling (Leviathan et al. 2023, Section 3).

For one position with target p and draft q:
  a = sum_x min(p(x), q(x))        acceptance rate
  Z = sum_x max(0, p(x) - q(x))     = 1 - a, the rejection mass
  p' = max(0, p - q) / Z            residual (correction) law
With i.i.d. acceptance over g drafts, the accepted count A is truncated geometric:
  P(A = k) = a^k (1 - a) for k < g,   P(A = g) = a^g,
and tau = E[A + 1] = (1 - a^(g+1)) / (1 - a)  (= g + 1 at a = 1).
For context-dependent models, P(A >= k) = sum_{x_1..x_k} prod_i min(p_i(x_i), q_i(x_i)).
"""

from __future__ import annotations

from collections.abc import Sequence

from .reference import Model, Row
from .validation import check_distribution, check_gamma


def _pair(target_probs: Row, draft_probs: Row) -> None:
    check_distribution("target_probs", target_probs)
    check_distribution("draft_probs", draft_probs, len(target_probs))


def acceptance_rate(target_probs: Row, draft_probs: Row):
    """a = sum_x min(p(x), q(x))."""
    _pair(target_probs, draft_probs)
    return sum(min(p, q) for p, q in zip(target_probs, draft_probs))


def rejection_mass(target_probs: Row, draft_probs: Row):
    """Z = sum_x max(0, p(x) - q(x)) = 1 - a."""
    _pair(target_probs, draft_probs)
    return sum(max(0, p - q) for p, q in zip(target_probs, draft_probs))


def residual(target_probs: Row, draft_probs: Row) -> list:
    """p' = max(0, p - q) / Z. Undefined when Z = 0 (then p == q and no rejection can happen)."""
    z = rejection_mass(target_probs, draft_probs)
    if z == 0:
        raise ValueError("residual is undefined: target_probs == draft_probs, so Z = 0 and nothing is ever rejected")
    return [max(0, p - q) / z for p, q in zip(target_probs, draft_probs)]


def _check_rate(a) -> None:
    if not 0 <= a <= 1:
        raise ValueError(f"a={a!r}: an acceptance rate must lie in [0, 1]")


def expected_tau(a, gamma: int):
    """tau = (1 - a^(g+1)) / (1 - a), the expected tokens per cycle; g + 1 at a = 1."""
    _check_rate(a)
    check_gamma(gamma)
    if a == 1:
        return gamma + 1
    return (1 - a ** (gamma + 1)) / (1 - a)


def accepted_length_law(a, gamma: int) -> list:
    """[P(A = 0), ..., P(A = g)]: a^k (1 - a) for k < g, and a^g for k = g."""
    _check_rate(a)
    check_gamma(gamma)
    return [a**k * (1 - a) for k in range(gamma)] + [a**gamma]


def accepted_at_least(target: Model, draft: Model, prefix: Sequence[int], gamma: int) -> list:
    """[P(A >= 0), ..., P(A >= g)] for context-dependent models: sum over drafts of prod_i min(p_i, q_i)."""
    check_gamma(gamma)
    out = [1]
    # frontier: draft prefix x_1..x_k -> prod_{i<=k} min(p_i(x_i), q_i(x_i)), over prefixes of nonzero weight
    frontier = {(): 1}
    for _ in range(gamma):
        nxt = {}
        for drafted, weight in frontier.items():
            context = tuple(prefix) + drafted
            p, q = target(context), draft(context)
            for x, (p_x, q_x) in enumerate(zip(p, q)):
                m = min(p_x, q_x)
                if m > 0:
                    nxt[drafted + (x,)] = weight * m
        frontier = nxt
        out.append(sum(frontier.values()))
    return out


def expected_tau_contextual(target: Model, draft: Model, prefix: Sequence[int], gamma: int):
    """E[tau] = sum_{k=0..g} P(A >= k) for context-dependent models."""
    return sum(accepted_at_least(target, draft, prefix, gamma))
