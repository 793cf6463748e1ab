"""T1: exact sizes of every test family at the levels a run really uses (1e-4 .. 1e-7). Nothing is simulated.

Each size is computed exactly (enumeration, or the exact lattice law of specref.stats.size) and asserted <= alpha;
the rule before (Pearson against chi2 with 20 expected per bin) is computed the same way and shown to fail.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.stats import binom, binomtest, chi2, multinomial

from specref.conformance.chain import tally as checks
from specref.conformance.chain.scenarios import SCENARIOS
from specref.stats import binomial_positions, chisquare_gof, min_expected_for, pearson_critical, pearson_p_value
from specref.stats.size import (
    E_LADDER,
    REAL_E_FACTOR,
    size_asymptotic_two_bins,
    size_binomial,
    size_multinomial,
    size_rare_limit,
    sizes_by_rare,
)
from specref.stats.size_real import reference_tail

pytestmark = pytest.mark.exact

ALPHAS = (1e-4, 1e-5, 1e-6, 1e-7)


@pytest.mark.parametrize(("expected", "ratio"), [(20, 3.9), (34, 2.6), (100, 1.6)])
def test_the_rule_before_was_anti_conservative_far_out(expected, ratio):
    """Pearson vs chi2(1), 2 bins, at 1.35e-5: the issue's 3.9x, 2.6x and 1.6x (rare bin p = 0.01)."""
    size = size_asymptotic_two_bins(int(expected / 0.01), 0.01, 1.35e-5)
    assert size / 1.35e-5 == pytest.approx(ratio, rel=0.1)


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize(("trials", "p0"), [(50, 0.5), (400, 0.05), (2048, 0.3), (8192, 0.01), (30_000, 0.2)])
def test_exact_binomial_size_is_at_most_alpha(alpha, trials, p0):
    size = size_binomial(trials, p0, alpha)
    assert size <= alpha
    # and the rejection region is binomtest's own
    k = np.arange(trials + 1)
    p_values = np.array([binomtest(int(x), trials, p0).pvalue for x in k[:: max(1, trials // 200)]])
    assert (p_values <= alpha).sum() <= k.size


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("df", [2, 3, 5, 10, 30])
def test_pearson_rule_size_over_every_number_of_rare_bins(alpha, df):
    """m bins at E_min and one infinite bin, m = 1..df: size at the rule's critical value <= alpha."""
    e = min_expected_for(alpha, df)
    sizes = sizes_by_rare(alpha, df, e)
    assert max(sizes) <= alpha, (e, [s / alpha for s in sizes])
    assert sizes[-1] == max(sizes)  # all df bins rare is the worst case, as size.py states
    assert size_rare_limit(alpha, df, e, 1) == pytest.approx(sizes[0], rel=1e-9)


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("df", [2, 3, 5])
def test_pearson_rule_size_for_bins_between_ladder_steps(alpha, df):
    e = min_expected_for(alpha, df)
    critical = pearson_critical(alpha, df, e)
    for larger in (e + 1, e + 2, e + 3, e + 7, e + 13, e + 29):
        assert sizes_by_rare(alpha, df, larger, critical)[-1] <= alpha, larger


def test_pearson_rule_at_the_bin_cap():
    for alpha in (1e-5, 1e-7):
        e = min_expected_for(alpha, 128)
        assert max(sizes_by_rare(alpha, 128, e)) <= alpha


@pytest.mark.parametrize("alpha", ALPHAS)
@pytest.mark.parametrize("shape", [(1, 1, 1), (1, 1, 4), (1, 3, 3), (1, 1.5, 2)])
def test_pearson_rule_size_on_finite_three_bin_multinomials(alpha, shape):
    e = min_expected_for(alpha, 2)
    assert size_multinomial(alpha, tuple(e * f for f in shape)) <= alpha


def test_chisquare_gof_itself_has_exact_size_at_most_alpha():
    """Enumerate every outcome of a 3-bin law through chisquare_gof (N = 120, bins of 20, 40, 60 expected)."""
    alpha, n = 1e-4, 120
    probs = np.array([20, 40, 60]) / n
    size = 0.0
    for o1, o2 in itertools.product(range(n + 1), repeat=2):
        if o1 + o2 > n:
            continue
        counts = [o1, o2, n - o1 - o2]
        result = chisquare_gof(counts, probs, alpha=alpha, min_expected=20)
        if not result.passed:
            size += multinomial.pmf(counts, n, probs)
    assert size <= alpha
    old = 0.0  # the same enumeration against chi2(2): the rule before
    for o1, o2 in itertools.product(range(n + 1), repeat=2):
        if o1 + o2 <= n:
            counts = np.array([o1, o2, n - o1 - o2])
            if chi2.sf(((counts - probs * n) ** 2 / (probs * n)).sum(), 2) <= alpha:
                old += multinomial.pmf(counts, n, probs)
    assert old > size


def test_two_bin_law_is_the_exact_binomial():
    """Before: 2-bin laws ran Pearson vs chi2(1), whose size at 1e-6 with 20 expected is 11x nominal."""
    alpha, n, p = 1e-6, 2000, 0.01
    k = np.arange(n + 1)
    rejected = np.array([not chisquare_gof([x, n - x], [p, 1 - p], alpha=alpha, min_expected=20).passed for x in k])
    assert binom.pmf(k[rejected], n, p).sum() <= alpha
    assert size_asymptotic_two_bins(n, p, alpha) > 5 * alpha


def test_reject_rate_is_exact_binomial_per_position_with_bonferroni():
    z = 0.3
    result = binomial_positions([30, 21, 0], [100, 70, 0], z, alpha=1e-5, name="reject_rate")
    exact = [binomtest(30, 100, z).pvalue, binomtest(21, 70, z).pvalue]
    assert result.tested and result.df == 2 and result.p_value == pytest.approx(min(1.0, 2 * min(exact)))
    # rates of 0 or 1 (disjoint supports: every draft rejected) are implied by T0, not tested
    certain = binomial_positions([50, 0], [50, 0], 1.0, alpha=1e-5)
    assert not certain.tested and certain.status == "not tested" and "implied by T0" in certain.details["not_tested"]
    broken = binomial_positions([49, 0], [50, 0], 1.0, alpha=1e-5)
    assert broken.tested and not broken.passed and broken.p_value == 0.0


def test_reject_rate_check_uses_the_per_position_binomial():
    sc = SCENARIOS["cf_dense_g4"]
    tally = checks.Tally(sc)
    tally.rejected[:] = [10, 5, 3, 1]
    tally.reached[:] = [40, 30, 25, 20]
    result = tally._t2("reject_rate", 1e-5)
    assert result.details["test"].startswith("exact binomial test per position")
    assert result.df == 4


def test_p_value_is_monotone_and_at_least_chi2():
    for df in (2, 3, 10):
        xs = np.linspace(0.5, 3 * chi2.isf(1e-7, df), 60)
        p = np.array([pearson_p_value(x, df, 20) for x in xs])
        assert (np.diff(p) <= 1e-15).all()
        assert (p >= chi2.sf(xs + 1.0 / 20, df) - 1e-12).all()


@pytest.mark.exact
@pytest.mark.parametrize("alpha", [1e-4, 1e-5, 1e-6])
def test_mean_tau_bennett_holds_its_size_where_the_normal_interval_does_not(alpha):
    """tau on cf_near_equal-like laws: g + 1 = 5 but for rare rejections (tau = 4 w.p. eps). The exact size (the
    binomial law of the number of short rows) of the z interval is far above alpha; Bennett's is below it."""
    from specref.stats import mean_ci

    n, eps = 2048, 0.002
    mu, variance = 5 - eps, eps * (1 - eps)
    shorts = np.arange(n + 1)
    law = binom.pmf(shorts, n, eps)
    sizes = {}
    for method, extra in (("z", {}), ("bennett", {"bounds": (1, 5)})):
        rejects = [
            mean_ci(summary=(n, 5.0 * n - k, 25.0 * (n - k) + 16.0 * k), expected_mean=mu, alpha=alpha,
                    known_variance=variance, method=method, **extra).p_value <= alpha
            for k in shorts[:60]
        ]  # fmt: skip
        sizes[method] = float(law[:60][rejects].sum() + law[60:].sum())
    assert sizes["bennett"] <= alpha, sizes
    assert sizes["z"] > 3 * alpha, sizes  # the defect the calibration measured (mean_tau, 4.7x at the run level)


# ---- real (non-integer) expected counts: issue 20 item 7 ---------------------------------------------------------


def _span_grid(e: int, step: float) -> np.ndarray:
    higher = [x for x in E_LADDER if x > e]
    return np.arange(e, higher[0] if higher else 2 * e, step)


@pytest.mark.parametrize(("alpha", "e", "real_e", "ratio_before"), [
    (1.4e-5, 30, 30.26, 1.071),  # two bins at E and one large bin, the case
    (1e-6, 20, 20.55, 1.107),
    (1e-7, 20, 20.20, 1.137),
])  # fmt: skip
def test_pearson_size_between_integer_counts_before_and_after(alpha, e, real_e, ratio_before):
    """The rule before maximised over integer E only: its size at these real E was above alpha. The old critical
    value is the lattice law's at alpha (the new one's at alpha * REAL_E_FACTOR, as p_new = REAL_E_FACTOR * p_old)."""
    old = pearson_critical(alpha * REAL_E_FACTOR, 2, e)
    assert pearson_p_value(old, 2, e) <= alpha * REAL_E_FACTOR
    assert reference_tail(real_e, 2, old) / alpha == pytest.approx(ratio_before, abs=5e-4)
    new = pearson_critical(alpha, 2, e)
    assert new > old and reference_tail(real_e, 2, new) <= alpha
    # the enumeration agrees with the lattice law at integer E
    assert reference_tail(e, 2, new) == pytest.approx(size_rare_limit(alpha, 2, e, 2, new), rel=1e-6)


@pytest.mark.parametrize("alpha", [1e-4, 1.4e-5, 1e-6, 1e-7])
def test_pearson_size_over_a_dense_grid_of_real_expected_counts(alpha):
    """df = 2 (the coarsest lattice): every ladder step's span of real E, step 0.05, plus the issue's points."""
    worst = 0.0
    for e in E_LADDER:
        critical = pearson_critical(alpha, 2, e)
        span = _span_grid(e, 0.05)
        grid = [*span.tolist(), *(x for x in (30.26, 20.55, 20.20) if e <= x < span[-1])]
        worst = max(worst, max(reference_tail(x, 2, critical) for x in grid) / alpha)
    assert worst <= 1.0, worst


def test_pearson_p_value_is_valid_at_every_level_between_integer_counts():
    """The worst span (E in [20, 30), df = 2) at 25 levels from 1e-7 to 1e-3: the size of "p <= a" is <= a."""
    grid = _span_grid(20, 0.05).tolist()
    for alpha in np.geomspace(1e-7, 1e-3, 25).tolist():
        critical = pearson_critical(alpha, 2, 20)
        assert max(reference_tail(x, 2, critical) for x in grid) <= alpha, alpha


@pytest.mark.parametrize("alpha", [1e-4, 1.4e-5, 1e-7])
def test_pearson_size_at_real_counts_with_three_rare_bins(alpha):
    for e in (20, 30):
        critical = pearson_critical(alpha, 3, e)
        assert max(reference_tail(x, 3, critical) for x in _span_grid(e, 0.25).tolist()) <= alpha
