"""Exact sizes of the Pearson rule at real (non-integer) expected counts, by enumeration on sorted sums.

size.py tabulates the reference law Q_df / E on the integer lattice of Q, so at integer E only. A bin's expected
count n * p is real, and between integers the lattice of (k - E)^2 moves: the tail at the rule's critical value can
be heavier than at every integer E. This module computes that tail exactly at any real E, for the reference
configuration (df bins at E, one infinite bin: Q_df / E with Q_df = sum_i (P_i - E)^2, P_i ~ Poisson(E) i.i.d.):
sums of up to two terms are enumerated and sorted, larger sums are reached by one pass of searchsorted over a
sorted half. Poisson mass beyond the enumerated range counts as rejection, so every value is an upper bound.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.stats import poisson

#: The most degrees of freedom enumerated exactly (df = 5 pairs sums of two with sums of three terms).
MAX_EXACT_DF = 5


def _terms(e: float) -> tuple[np.ndarray, np.ndarray, float]:
    """((k - e)^2 for k = 0..K, their Poisson(e) probabilities, the Poisson mass beyond K)."""
    k = np.arange(0, int(e + 14 * math.sqrt(e) + 60))
    return (k - e) ** 2, poisson.pmf(k, e), float(poisson.sf(k[-1], e))


class _Sorted:
    """A finite law as sorted values with suffix sums of weights: tail(t) = P(value >= t), vectorised in t."""

    def __init__(self, values: np.ndarray, weights: np.ndarray):
        order = np.argsort(values, kind="stable")
        self.values = values[order]
        self.suffix = np.append(np.cumsum(weights[order][::-1])[::-1], 0.0)

    def tail(self, thresholds: np.ndarray) -> np.ndarray:
        return self.suffix[np.searchsorted(self.values, thresholds, side="left")]


@lru_cache(maxsize=1024)
def _single(e: float) -> tuple[_Sorted, np.ndarray, np.ndarray, float]:
    squares, weights, lost = _terms(e)
    return _Sorted(squares, weights), squares, weights, lost


@lru_cache(maxsize=16)
def _pair(e: float) -> _Sorted:
    squares, weights, _ = _terms(e)
    return _Sorted(np.add.outer(squares, squares).ravel(), np.multiply.outer(weights, weights).ravel())


def reference_tail(e: float, df: int, critical: float) -> float:
    """P(Q_df / e >= critical) exactly (up to float rounding), for real e > 0 and 1 <= df <= MAX_EXACT_DF."""
    if not 1 <= df <= MAX_EXACT_DF:
        raise ValueError(f"df={df!r} must lie in 1..{MAX_EXACT_DF}")
    single, squares, weights, lost = _single(float(e))
    threshold = critical * e - 1e-9 * max(1.0, critical * e)  # the statistic is a float: ties count as rejection
    if df == 1:
        tail = float(single.tail(np.array([threshold]))[0])
    elif df == 2:
        tail = float(weights @ single.tail(threshold - squares))
    elif df == 3:
        tail = float(weights @ _pair(float(e)).tail(threshold - squares))
    elif df == 4:
        tail = _pair_pair(_pair(float(e)), threshold)
    else:
        pair = _pair(float(e))
        tail = float(sum(w * _pair_pair(pair, threshold - s) for s, w in zip(squares.tolist(), weights.tolist())))
    escaped = 1.0 - (1.0 - lost) ** df  # some term beyond the enumerated range: counted as rejection
    return min(1.0, tail + escaped)


def _pair_pair(pair: _Sorted, threshold: float) -> float:
    """P(S + S' >= threshold) for two independent copies of the pair law."""
    masses = np.diff(-pair.suffix)  # weights in sorted order
    return float(masses @ pair.tail(threshold - pair.values))
