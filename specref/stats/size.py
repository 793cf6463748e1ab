"""Pearson chi-square with a p-value that holds at the far-tail levels a run really uses (1e-4 down to 1e-7).

Why not chi2.sf. A bin with expected count e contributes (o - e)^2 / e, whose upper tail is heavier than chi2(1)'s
(Poisson skew): with 20 expected in the rare bin of a 2-bin test at alpha 1.35e-5 the exact size is 3.9x nominal,
and no minimum expected count fixes it (the excess decays like 1/e, from above: 1.05x at e = 3000, alpha 1e-4).

The reference law used here. A multinomial is independent Poissons conditioned on their total. Let every bin hold
>= E expected draws. Sending all bins but one to expected count E and the last one to infinity, the statistic
converges to
    Q_df / E,   Q_df = sum_{i=1..df} (P_i - E)^2,   P_i ~ Poisson(E) i.i.d.
(the huge bin absorbs the total; its own term vanishes). This law has the largest excess variance
(Var X^2 = 2 df + (sum_i 1/p_i - k^2 - 2k + 2) / N is largest there) and, in every exact computation below, the
heaviest tail: configurations with fewer rare bins (Q_m / E + chi2(df - m), m < df), all bins equal, or finite N
all have a smaller size at its critical values (size.py tables, T1 test properties/test_stats_size.py). The
p-value P(Q_df >= E * X^2) is computed exactly on the integer lattice of Q (E is an integer), by df-fold
convolution of the Poisson term law; mass cut off by truncation is counted as rejection, so p is an upper bound.

The rule (E_min, reference law):
  * bins are merged by expected counts until each holds >= E_min(alpha, df) (merging.py), and at most MAX_DF + 1
    bins remain (beyond that the minimum grows to n / (MAX_DF + 1));
  * E_min(alpha, df) is the smallest count on E_LADDER at which the lattice law's critical value is at most
    chi2.isf(alpha / COST, df), both at alpha / REAL_E_FACTOR (the far-tail correction costs no more than
    dividing alpha by COST = 10), else
    E_LADDER[-1]. A larger E_min buys a smaller critical value but merges more bins (hidden_mass): at the N a
    run affords, merging costs far more power than the critical value, so E_min stays small where it can;
  * the p-value uses the law at the largest ladder value <= the smallest bin's expected count (a larger E has a
    lighter tail, so rounding down is conservative), times REAL_E_FACTOR.
Why the factor. The lattice law exists at integer E only, and a bin's expected count is real: between integers the
lattice of (k - E)^2 moves and the tail at the critical value can be heavier than at every integer E. Exactly
(size_real.py, a 0.01-0.05 grid of real E): 1.07x alpha at 1.4e-5 (E = 30.26, df = 2), 1.11x at 1e-6 (E = 20.55),
1.14x at 1e-7 (E = 20.20), and 1.16x at worst over 25 levels in 1e-7..1e-3. Multiplying the p-value by 1.5 (the
critical value of alpha / 1.5) keeps the size <= alpha at every real E; raising E_min instead cannot do it (the
excess is still 1.01-1.02x at E = 100) and would merge more bins. The cost: lambda* grows by about 2%, the
detectable TV by about 1%.
Two bins (df = 1) never come here: they are an exact binomial test (gof.py).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from scipy.stats import binom, binomtest, chi2, norm, poisson

from .tables import load as load_table
from .tables import save as save_table

#: Integer expected counts the reference law is tabulated at (the lattice of Q needs an integer E).
E_LADDER = (20, 30, 50, 100)
#: E_min is raised until the rule's critical value is at most chi2.isf(alpha / COST, df).
COST = 10.0
#: The most degrees of freedom a chi-square check keeps (bins are merged down to MAX_DF + 1).
MAX_DF = 128
#: The p-value is the lattice law's tail times this: the size stays <= alpha at real (non-integer) expected counts.
REAL_E_FACTOR = 1.5
#: The most k on either side of the mode whose pmf _edge_guesses computes (beyond it, a normal approximation).
GUESS_WINDOW = 1 << 14
#: p-values are resolved down to this level; smaller ones are reported as this upper bound (or the exact tail).
P_FLOOR = 1e-15


def ladder_floor(min_expected: float) -> int:
    """The largest E on E_LADDER that is <= min_expected (E_LADDER[0] if none: merging guarantees >= it)."""
    fitting = [e for e in E_LADDER if e <= min_expected + 1e-9]
    return fitting[-1] if fitting else E_LADDER[0]


def _term_law(e: int, cap: int) -> tuple[np.ndarray, np.ndarray, float]:
    """(values (k - e)^2 below cap, their Poisson(e) probabilities, probability of the values >= cap)."""
    k = np.arange(0, int(e + 14 * math.sqrt(e) + 60))
    weights = poisson.pmf(k, e)
    squares = (k - e) ** 2
    keep = squares < cap
    lost = float(weights[~keep].sum() + poisson.sf(k[-1], e))
    return squares[keep], weights[keep], lost


@lru_cache(maxsize=512)
def _tail(e: int, df: int) -> tuple[np.ndarray, float]:
    """(tail [L]: P(Q_df >= q) for q = 0..L-1 as an upper bound, step 1/e in the statistic; L / e = its reach), as
    _lattice_tail computes it, kept on disk across processes (stats/tables.py: 0.1-1 s a table at df = 128)."""
    stored = load_table("pearson-tail", (e, df))
    if stored is not None:
        return stored[:-1], float(stored[-1])
    tail, escaped = _lattice_tail(e, df)
    save_table("pearson-tail", (e, df), np.append(tail, escaped))
    return tail, escaped


def _lattice_tail(e: int, df: int) -> tuple[np.ndarray, float]:
    """The df-fold convolution of the Poisson term law on the integer lattice of Q_df (module doc)."""
    reach = float(chi2.isf(P_FLOOR, df)) * 1.6 + 40.0  # far past every p-value we resolve
    cap = int(math.ceil(reach * e))
    squares, weights, _ = _term_law(e, cap)
    law = np.zeros(cap)
    law[0] = 1.0
    for _ in range(df):
        new = np.zeros(cap)
        for q, w in zip(squares.tolist(), weights.tolist()):
            new[q:] += w * law[: cap - q]
        law = new
    escaped = max(0.0, 1.0 - float(law.sum()))  # Q >= cap or a truncated Poisson value: counted beyond every q
    tail = np.cumsum(law[::-1])[::-1] + escaped
    return np.minimum(tail, 1.0), escaped


#: Up to this df the lattice of Q_df / E is coarse enough that a bin count between ladder steps can have a slightly
#: heavier tail at the critical value (2% at df = 2); there the p-value is the largest over every integer E from
#: the ladder step up to the next one (to twice the last).
LATTICE_DF = 3


def _span(e: int, df: int) -> range:
    if df > LATTICE_DF:
        return range(e, e + 1)
    higher = [x for x in E_LADDER if x > e]
    return range(e, higher[0] if higher else 2 * e)


def _tail_at(e: int, df: int, statistic: float) -> float:
    tail, escaped = _tail(e, df)
    q = int(math.floor(statistic * e + 1e-9))  # the lattice point at or below: the larger tail (conservative)
    if q <= 0:
        return 1.0
    if q >= tail.size:
        return escaped
    return float(tail[q])


def pearson_p_value(statistic: float, df: int, min_expected: float) -> float:
    """REAL_E_FACTOR * P(Q_df / E >= statistic), E = ladder_floor(min_expected) (the largest tail over E's span for
    df <= LATTICE_DF), capped at 1."""
    if df < 1:
        raise ValueError(f"df={df!r} must be >= 1")
    return min(1.0, REAL_E_FACTOR * _lattice_p_value(statistic, df, ladder_floor(min_expected)))


def _lattice_p_value(statistic: float, df: int, e: int) -> float:
    return max(_tail_at(x, df, statistic) for x in _span(e, df))


@lru_cache(maxsize=4096)
def pearson_critical(alpha: float, df: int, min_expected: float) -> float:
    """Smallest statistic value whose rule p-value is <= alpha (the test rejects at and above it): the lattice law's
    critical value at alpha / REAL_E_FACTOR."""
    e = ladder_floor(min_expected)
    level = alpha / REAL_E_FACTOR
    tail, _ = _tail(e, df)
    below = np.flatnonzero(tail <= level)
    if below.size == 0:
        raise ValueError(f"alpha={alpha!r} is below the resolved range of the reference law (P_FLOOR={P_FLOOR})")
    critical = float(below[0]) / e
    if df > LATTICE_DF:
        return critical
    # the max over the span: the smallest x with every E's tail <= alpha (each tail is a step function of x)
    candidates = sorted({math.ceil((x * critical) - 1e-9) / x for x in _span(e, df)} | {critical})
    # every lattice point q / x of the span (q / x with q, x < 2^53: correctly rounded, as Python's int division)
    points = np.unique(np.concatenate([np.arange(int(critical * x), int(critical * x * 1.5) + 2) / x
                                       for x in _span(e, df)]))  # fmt: skip
    # the p-value only falls as the point grows (each tail falls, each lattice index grows): the first point at or
    # above the smallest candidate whose p-value is <= level, by bisection
    lo, hi = int(np.searchsorted(points, candidates[0], side="left")), points.size
    if lo == hi or _lattice_p_value(float(points[-1]), df, e) > level:
        raise AssertionError(f"no critical value found for alpha={alpha}, df={df}, e={e}")
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if _lattice_p_value(float(points[mid]), df, e) <= level else (mid + 1, hi)
    return float(points[lo])


@lru_cache(maxsize=4096)
def min_expected_for(alpha: float, df: int) -> int:
    """E_min(alpha, df): the smallest ladder count whose critical value is <= chi2.isf(alpha / COST, df), both at
    alpha / REAL_E_FACTOR (the factor corrects the size between integers; it is no reason to merge more bins)."""
    target = float(chi2.isf(alpha / (COST * REAL_E_FACTOR), max(df, 1)))
    for e in E_LADDER:
        if pearson_critical(alpha, max(df, 1), e) <= target:
            return e
    return E_LADDER[-1]


# ---- exact sizes (the calibration table and the T1 test) --------------------------------------------------------


def _first_rejected(n: int, p0: float, alpha: float, lo: int, hi: int, guess: int | None) -> int | None:
    """The tail's edge between lo (the mode) and hi (0 or n), each step decided by binomtest itself: its two-sided
    p-value only falls moving away from the mode. Returns the rejected k nearest the mode, or None when the tail is
    empty. `guess` (an estimate of the edge) only narrows the bracket: from it the search gallops towards the edge,
    so an exact guess costs two more binomtests instead of a bisection over the whole tail.
    """

    def rejected(k: int) -> bool:
        return binomtest(k, n, p0).pvalue <= alpha

    if not rejected(hi):
        return None
    if rejected(lo):
        return lo
    # invariant: lo not rejected, hi rejected
    outward = 1 if hi > lo else -1

    def inside(k: int) -> bool:
        return min(lo, hi) < k < max(lo, hi)

    if guess is not None and inside(guess):  # gallop from the guess towards the edge, keeping the invariant
        step = 1
        if rejected(guess):
            hi, probe = guess, guess - outward
            while inside(probe) and rejected(probe):
                hi, step = probe, 2 * step
                probe = hi - outward * step
            lo = probe if inside(probe) else lo
        else:
            lo, probe = guess, guess + outward
            while inside(probe) and not rejected(probe):
                lo, step = probe, 2 * step
                probe = lo + outward * step
            hi = probe if inside(probe) else hi
    while abs(hi - lo) > 1:
        mid = (lo + hi) // 2
        if rejected(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _edge_guesses(n: int, p0: float, alpha: float, mode: int) -> tuple[int | None, int | None]:
    """Estimates of the region's edges, from the p-value's definition (the mass of every k no likelier than the
    observed one) on a window of pmf values around the mode, the mass outside it counted in full."""
    sd = math.sqrt(n * p0 * (1.0 - p0))
    spread = 8.0 + math.sqrt(2.0 * math.log(1.0 / alpha))  # standard deviations: the edges lie well inside
    half = int(spread * sd) + 8
    if half > GUESS_WINDOW:  # a wide law is nearly normal: its edges are about z standard deviations out
        z = float(norm.isf(alpha / 2))
        return math.floor(n * p0 - z * sd), math.ceil(n * p0 + z * sd)
    ks = np.arange(max(0, mode - half), min(n, mode + half) + 1)
    pmf = binom.pmf(ks, n, p0)
    outside = max(0.0, 1.0 - float(pmf.sum()))
    order = np.sort(pmf)
    pvalue = outside + np.cumsum(order)[np.searchsorted(order, pmf * (1 + 1e-7), side="right") - 1]
    upper = ks[(ks >= mode) & (pvalue <= alpha)]
    lower = ks[(ks <= mode) & (pvalue <= alpha)]
    return (int(lower[-1]) if lower.size else None), (int(upper[0]) if upper.size else None)


@lru_cache(maxsize=4096)
def binomial_rejection_region(n: int, p0: float, alpha: float) -> tuple[int, int]:
    """(k_lo, k_hi) with binomtest(k, n, p0).pvalue <= alpha iff k <= k_lo or k >= k_hi (-1 / n + 1 when empty)."""
    mode = min(n, int(math.floor((n + 1) * p0)))
    guess_lo, guess_hi = _edge_guesses(n, p0, alpha, mode)
    k_hi = _first_rejected(n, p0, alpha, mode, n, guess_hi)
    k_lo = _first_rejected(n, p0, alpha, mode, 0, guess_lo)
    return (-1 if k_lo is None else k_lo), (n + 1 if k_hi is None else k_hi)


def size_asymptotic_two_bins(n: int, p: float, alpha: float) -> float:
    """Exact size of Pearson chi-square against chi2(1) with 2 bins (rare bin probability p), by enumeration."""
    k = np.arange(n + 1)
    statistic = (k - n * p) ** 2 / (n * p * (1 - p))
    rejected = chi2.sf(statistic, 1) <= alpha
    return float(binom.pmf(k[rejected], n, p).sum())


def size_binomial(n: int, p0: float, alpha: float) -> float:
    """Exact size of the two-sided exact binomial test (scipy.stats.binomtest), by its rejection region."""
    k_lo, k_hi = binomial_rejection_region(n, p0, alpha)
    return float(binom.cdf(k_lo, n, p0) + binom.sf(k_hi - 1, n, p0))


def size_rare_limit(alpha: float, df: int, e: int, rare: int, critical: float | None = None) -> float:
    """Exact size at `critical` (default: the rule's) when `rare` bins hold e expected and one bin is infinite.

    The statistic's law is Q_rare / e + chi2(df - rare) (independent); rare = df is the reference law itself.
    Truncated Poisson mass counts as rejection (upper bound).
    """
    if not 1 <= rare <= df:
        raise ValueError(f"rare={rare!r} must lie in 1..df={df}")
    c = pearson_critical(alpha, df, e) if critical is None else critical
    cap = int(math.ceil(c * e)) + 1
    squares, weights, lost = _term_law(e, cap)
    law = np.zeros(cap)
    law[0] = 1.0
    for _ in range(rare):
        new = np.zeros(cap)
        for q, w in zip(squares.tolist(), weights.tolist()):
            new[q:] += w * law[: cap - q]
        law = new
    beyond = max(0.0, 1.0 - law.sum())  # Q_rare / e >= cap / e > c: rejected whatever the chi2 part
    q = np.arange(cap)
    if rare == df:
        return float(law[q / e >= c - 1e-12].sum() + beyond)
    return float((law * chi2.sf(np.maximum(c - q / e, 0.0), df - rare)).sum() + beyond)


def sizes_by_rare(alpha: float, df: int, e: int, critical: float | None = None) -> list[float]:
    """[size_rare_limit(alpha, df, e, m) for m = 1..df] in one pass of convolutions (the T1 table's workhorse)."""
    c = pearson_critical(alpha, df, e) if critical is None else critical
    cap = int(math.ceil(c * e)) + 1
    squares, weights, _ = _term_law(e, cap)
    law = np.zeros(cap)
    law[0] = 1.0
    q = np.arange(cap) / e
    out = []
    for m in range(1, df + 1):
        new = np.zeros(cap)
        for square, w in zip(squares.tolist(), weights.tolist()):
            new[square:] += w * law[: cap - square]
        law = new
        beyond = max(0.0, 1.0 - float(law.sum()))
        if m == df:
            out.append(float(law[q >= c - 1e-12].sum() + beyond))
        else:
            out.append(float((law * chi2.sf(np.maximum(c - q, 0.0), df - m)).sum() + beyond))
    return out


def size_multinomial(alpha: float, expected: tuple[float, ...], critical: float | None = None) -> float:
    """Exact size of the rule's test on a 3-bin multinomial with these expected counts (df = 2), by enumeration.

    expected must sum to an integer n; the rule's critical value at min(expected) is used unless given.
    """
    if len(expected) != 3:
        raise ValueError(f"expected={expected!r}: this enumeration is for 3 bins (df = 2)")
    n = int(round(sum(expected)))
    probs = np.asarray(expected, dtype=np.float64) / n
    c = pearson_critical(alpha, 2, min(expected)) if critical is None else critical
    o1 = np.arange(n + 1)[:, None]
    o2 = np.arange(n + 1)[None, :]
    o3 = n - o1 - o2
    valid = o3 >= 0
    e1, e2, e3 = (float(x) for x in expected)
    with np.errstate(invalid="ignore"):
        statistic = (o1 - e1) ** 2 / e1 + (o2 - e2) ** 2 / e2 + (o3 - e3) ** 2 / e3
    # multinomial pmf: binom(o1; n, p1) * binom(o2; n - o1, p2 / (1 - p1))
    first = binom.pmf(o1, n, probs[0])
    second = binom.pmf(o2, n - o1, probs[1] / (1 - probs[0]))
    pmf = np.where(valid, first * second, 0.0)
    return float(pmf[valid & (statistic >= c - 1e-9)].sum())


__all__ = [
    "E_LADDER",
    "MAX_DF",
    "REAL_E_FACTOR",
    "ladder_floor",
    "min_expected_for",
    "pearson_critical",
    "pearson_p_value",
    "size_asymptotic_two_bins",
    "size_binomial",
    "size_multinomial",
    "size_rare_limit",
    "sizes_by_rare",
]
