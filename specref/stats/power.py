"""Power design in TFP's triple form: min_num_samples, min_detectable_*, and (in the check modules) assert_*.

Chi-square. Under an alternative p the Pearson statistic on k bins is approximately noncentral chi-square with
df = k - 1 and noncentrality lambda = N * sum_x (p(x) - p0(x))^2 / p0(x) (N times the chi-square divergence).
By Cauchy-Schwarz with weights p0 (sum_x p0(x) = 1):
    (sum_x |p - p0|)^2 = (sum_x sqrt(p0) * |p - p0| / sqrt(p0))^2 <= sum_x p0 * sum_x (p - p0)^2 / p0,
so with d = TV(p, p0) = sum_x |p - p0| / 2, lambda >= 4 N d^2, with equality approached by alternatives whose
|p - p0| / p0 is constant. The worst case over all alternatives at TV = d is therefore lambda = 4 N d^2, and the
test (reject when the statistic exceeds its critical value c) has power >= 1 - beta at every such alternative once
4 N d^2 >= lambda*(alpha, beta, df), the noncentrality at which ncx2.sf(c, df, lambda) = 1 - beta, where c is the
test's critical value: for df >= 2 the far-tail rule of size.py (rule_critical), which is a little above
chi2.isf(alpha, df) so that the exact size is <= alpha:
    N = ceil(lambda* / (4 d^2)),   d = sqrt(lambda* / (4 N)).
This holds on the merged bins; merging can hide up to hidden_mass of TV (see merging.py).

Binomial. The exact two-sided test (scipy.stats.binomtest) rejects on two tails k <= k_lo or k >= k_hi; its power at
a true rate p is binom.cdf(k_lo) + binom.sf(k_hi - 1), computed exactly, no normal approximation.

Mean. With known standard deviation sigma, the two-sided z test detects |shift| >= (z_{alpha/2} + z_beta) sigma/sqrt(N).
"""

from __future__ import annotations

import math
from functools import lru_cache

from scipy import optimize
from scipy.stats import binom, chi2, ncx2, norm

from ._args import check_count, check_df, check_level, check_positive, check_rate, check_tv
from .size import binomial_rejection_region, min_expected_for, pearson_critical

# ---- chi-square ------------------------------------------------------------------------------------------------


def rule_critical(alpha: float, df: int, min_expected: float | None = None) -> float:
    """The critical value of specref's chi-square at level alpha (size.py): for df >= 2 the far-tail reference law
    at min_expected (default E_min(alpha, df)); for df = 1, chi2.isf(alpha, 1) (2-bin checks run the exact binomial
    test and state its exact power instead)."""
    if df == 1:
        return float(chi2.isf(alpha, 1))
    e = min_expected_for(alpha, df) if min_expected is None else min_expected
    return pearson_critical(alpha, df, e)


@lru_cache(maxsize=4096)
def _lambda_star(alpha: float, beta: float, df: int, critical: float | None = None) -> float:
    critical = rule_critical(alpha, df) if critical is None else critical

    def shortfall(lam: float) -> float:
        return ncx2.sf(critical, df, lam) - (1.0 - beta)

    if shortfall(0.0) >= 0:  # alpha >= 1 - beta: even the null rejects often enough
        return 0.0
    upper = (math.sqrt(critical) + norm.isf(beta)) ** 2 + 1.0
    while shortfall(upper) < 0:
        upper *= 2.0
    return float(optimize.brentq(shortfall, 0.0, upper, xtol=1e-10, rtol=1e-12))


def noncentrality_for_power(alpha: float, beta: float, df: int, min_expected: float | None = None) -> float:
    """lambda*(alpha, beta, df): the noncentrality at which specref's chi-square test at level alpha (its critical
    value rule_critical(alpha, df, min_expected), not chi2.isf) has power 1 - beta."""
    alpha, beta, df = check_level("alpha", alpha), check_level("beta", beta), check_df(df)
    return _lambda_star(alpha, beta, df, rule_critical(alpha, df, min_expected))


def min_num_samples_chisquare(d: float, alpha: float, beta: float, df: int, min_expected: float | None = None) -> int:
    """Smallest N at which a chi-square test with df degrees of freedom detects every TV >= d with power >= 1 - beta.

    N = ceil(lambda*(alpha, beta, df) / (4 d^2)), from the worst-case noncentrality lambda = 4 N d^2 (module doc).
    """
    d = check_tv("d", d)
    lam = noncentrality_for_power(alpha, beta, df, min_expected)
    n = max(1, math.ceil(lam / (4.0 * d * d)))
    while n > 1 and 4.0 * (n - 1) * d * d >= lam:  # guard against rounding up past the exact boundary
        n -= 1
    return n


def min_detectable_tv_chisquare(n: int, alpha: float, beta: float, df: int, min_expected: float | None = None) -> float:
    """Smallest TV that a chi-square test on n draws with df degrees of freedom detects with power >= 1 - beta.

    d = sqrt(lambda*(alpha, beta, df) / (4 n)). A value above 1 means no alternative is guaranteed to be detected.
    """
    n = check_count("n", n, minimum=1)
    return math.sqrt(noncentrality_for_power(alpha, beta, df, min_expected) / (4.0 * n))


# ---- binomial --------------------------------------------------------------------------------------------------


def binomial_power(n: int, p0: float, p: float, alpha: float) -> float:
    """Exact power of the two-sided binomtest at level alpha when the true rate is p."""
    k_lo, k_hi = binomial_rejection_region(n, p0, alpha)
    return float(binom.cdf(k_lo, n, p) + binom.sf(k_hi - 1, n, p))


def _detectable_one_side(n: int, p0: float, alpha: float, beta: float, sign: int) -> float:
    reach = (1.0 - p0) if sign > 0 else p0
    if reach <= 0:
        return 0.0  # no alternative on this side

    def shortfall(d: float) -> float:
        return binomial_power(n, p0, p0 + sign * d, alpha) - (1.0 - beta)

    if shortfall(0.0) >= 0:  # alpha >= 1 - beta: the null itself is rejected often enough
        return 0.0
    if shortfall(reach) < 0:
        # not even the farthest alternative on this side is detected: only distances beyond the reach are covered
        return math.inf
    # power crosses 1 - beta once on each side (the near tail's rise dominates the far tail's decay there)
    return float(optimize.brentq(shortfall, 0.0, reach, xtol=1e-12))


@lru_cache(maxsize=4096)
def _detectable_diff(n: int, p0: float, alpha: float, beta: float) -> float:
    sides = [(_detectable_one_side(n, p0, alpha, beta, s), (1.0 - p0) if s > 0 else p0) for s in (+1, -1)]
    if all(math.isinf(d) for d, _ in sides):
        return math.inf
    # a side with no power is covered vacuously beyond its reach (no rate lies farther out on that side)
    return max(math.nextafter(reach, math.inf) if math.isinf(d) else d for d, reach in sides)


def min_detectable_diff_binomial(n: int, p0: float, alpha: float, beta: float) -> float:
    """Smallest d such that every true rate p with |p - p0| >= d fails binomtest with power >= 1 - beta (exact).

    If one side of p0 has no power at all at this n, d is just past that side's reach (p0 or 1 - p0), so the
    statement covers the other side only; inf when neither side has the power.
    """
    n = check_count("n", n, minimum=1)
    return _detectable_diff(n, check_rate("p0", p0), check_level("alpha", alpha), check_level("beta", beta))


def min_num_samples_binomial(d: float, p0: float, alpha: float, beta: float) -> int:
    """Smallest n (by bisection on the exact power) at which every rate with |p - p0| >= d is detected w.p. >= 1 - beta.

    Exact binomial power is a slight sawtooth in n; the returned n is verified exactly, n - 1 fails.
    """
    d, p0 = check_tv("d", d), check_rate("p0", p0)
    alpha, beta = check_level("alpha", alpha), check_level("beta", beta)
    sides = [s for s in (+1, -1) if 0 <= p0 + s * d <= 1]
    if not sides:
        raise ValueError(f"d={d!r} leaves [0, 1] on both sides of p0={p0!r}; no alternative at that distance exists")

    def enough(n: int) -> bool:
        return all(binomial_power(n, p0, p0 + s * d, alpha) >= 1.0 - beta for s in sides)

    # normal-approximation start, then exact bracketing (lo fails or is 0, hi is enough) and bisection
    z = norm.isf(alpha / 2) + norm.isf(beta)
    spread = max(math.sqrt(p0 * (1 - p0)), math.sqrt(d * (1 - d)), 1e-3)
    hi = max(1, int((z * spread / d) ** 2))
    while not enough(hi):
        hi *= 2
    lo = hi // 2
    while lo >= 1 and enough(lo):
        hi, lo = lo, lo // 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if enough(mid):
            hi = mid
        else:
            lo = mid
    return hi


# ---- mean (z test with known variance) -------------------------------------------------------------------------


def min_detectable_shift_mean(n: int, sigma: float, alpha: float, beta: float) -> float:
    """Smallest |mean shift| a two-sided z test with known sigma detects w.p. >= 1 - beta: (z_a/2 + z_b) s / sqrt(n).

    (The far tail's contribution to power is ignored, so this is conservative.)
    """
    n = check_count("n", n, minimum=1)
    sigma, alpha, beta = check_positive("sigma", sigma), check_level("alpha", alpha), check_level("beta", beta)
    return float((norm.isf(alpha / 2) + norm.isf(beta)) * sigma / math.sqrt(n))


def min_num_samples_mean(delta: float, sigma: float, alpha: float, beta: float) -> int:
    """Smallest n at which the two-sided z test with known sigma detects |shift| >= delta with power >= 1 - beta."""
    delta, sigma = check_positive("delta", delta), check_positive("sigma", sigma)
    alpha, beta = check_level("alpha", alpha), check_level("beta", beta)
    return max(1, math.ceil(((norm.isf(alpha / 2) + norm.isf(beta)) * sigma / delta) ** 2))


# ---- a count that is a random share of the rows (binomial thinning) ----------------------------------------------


def min_count_thinned(rows: int, fraction: float, z: float) -> float:
    """A lower bound on the draws a check gets from `rows` rows when each row feeds it with probability `fraction`:
    rows f - z sqrt(rows f (1 - f)), the count's mean less z standard deviations (0 when that is negative). The count
    falls below it with probability about norm.sf(z) (z = 5: 3e-7)."""
    rows, f = check_count("rows", rows, minimum=0), check_rate("fraction", fraction)
    return max(0.0, rows * f - z * math.sqrt(rows * f * (1.0 - f)))


def min_num_samples_thinned(draws: float, fraction: float, z: float) -> int:
    """Smallest number of rows whose thinned count (min_count_thinned) reaches `draws`: with x = sqrt(rows),
    f x^2 - z sqrt(f (1 - f)) x >= draws."""
    f = check_rate("fraction", fraction)
    if not f > 0:
        raise ValueError(f"fraction={fraction!r} must be > 0: no number of rows reaches a count of {draws!r}")
    spread = z * math.sqrt(f * (1.0 - f))
    rows = max(0, math.ceil(((spread + math.sqrt(spread * spread + 4.0 * f * draws)) / (2.0 * f)) ** 2))
    while rows > 0 and min_count_thinned(rows - 1, f, z) >= draws:
        rows -= 1
    while min_count_thinned(rows, f, z) < draws:
        rows += 1
    return rows
