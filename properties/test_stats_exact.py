"""Deterministic tests of specref.stats: merging, power formulas, the error budget and the result records."""

from __future__ import annotations

import json
import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest, chi2, chisquare, ncx2

from specref.stats import (
    CheckResult,
    ErrorBudget,
    assert_binomial_rate,
    assert_chisquare_gof,
    binomial_power,
    binomial_rate,
    binomial_rejection_region,
    chisquare_gof,
    chisquare_strata,
    discrete_law,
    mean_ci,
    merge_bins,
    min_detectable_diff_binomial,
    min_detectable_shift_mean,
    min_detectable_tv_chisquare,
    min_expected_for,
    min_num_samples_binomial,
    min_num_samples_chisquare,
    min_num_samples_mean,
    moments,
    noncentrality_for_power,
    not_tested,
)
from specref.stats.gof import effective_min_expected
from specref.stats.power import rule_critical
from specref.stats.size import MAX_DF, pearson_critical

pytestmark = pytest.mark.exact


def rng_for(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


@st.composite
def laws(draw, max_vocab: int = 60) -> np.ndarray:
    """A probability vector with some zeros, a heavy head and a sparse tail; seeded by the example."""
    vocab = draw(st.integers(1, max_vocab))
    rng = rng_for(draw(st.integers(0, 2**32 - 1)))
    weights = rng.pareto(draw(st.sampled_from([0.5, 1.0, 3.0])), size=vocab) + 1e-12
    weights[rng.random(vocab) < draw(st.sampled_from([0.0, 0.3]))] = 0.0
    if weights.sum() == 0:
        weights[rng.integers(vocab)] = 1.0
    return weights / weights.sum()


# ---- merging ---------------------------------------------------------------------------------------------------


@given(laws(), st.integers(1, 5000), st.sampled_from([20.0, 50.0]))
def test_merge_bins_partitions_possible_tokens_into_bins_of_enough_expected_draws(probs, n, min_expected):
    groups, hidden_mass = merge_bins(probs, n, min_expected)
    tokens = np.concatenate(groups)
    assert sorted(tokens.tolist()) == np.flatnonzero(probs > 0).tolist()  # impossible tokens get no bin
    bin_expected = np.array([n * probs[g].sum() for g in groups])
    if len(groups) > 1:
        assert np.all(bin_expected >= min_expected * (1 - 1e-9))
    assert hidden_mass == pytest.approx(sum(probs[g].sum() for g in groups if g.size > 1), abs=1e-12)
    # only tokens below min_expected are pooled, except when the small ones together cannot fill a bin
    small_total = n * probs[(probs > 0) & (n * probs < min_expected)].sum()
    if small_total >= min_expected:
        for g in groups:
            if g.size > 1:
                assert np.all(n * probs[g] < min_expected)


@given(laws(), st.integers(1, 5000), st.integers(0, 2**32 - 1))
def test_merging_never_depends_on_observed_counts(probs, n, seed):
    """Two samples of the same size get the same bins, and the statistic is Pearson's on exactly merge_bins' groups."""
    rng = rng_for(seed)
    possible = probs > 0
    first = rng.multinomial(n, probs)
    skewed = np.where(possible, rng.random(probs.size), 0.0)
    second = rng.multinomial(n, skewed / skewed.sum())
    groups, hidden_mass = merge_bins(probs, n, 20.0)
    if len(groups) > MAX_DF + 1:  # the bin cap raises the floor
        groups, hidden_mass = merge_bins(probs, n, effective_min_expected(20.0, n))
    for observed in (first, second):
        result = chisquare_gof(observed, probs, alpha=0.01, min_expected=20.0)
        if not result.tested:  # one bin: not a test
            assert len(groups) == 1 and result.status == "not tested"
            continue
        assert result.df == len(groups) - 1 and result.hidden_mass == hidden_mass
        observed_bins = np.array([observed[g].sum() for g in groups], dtype=float)
        expected_bins = np.array([n * probs[g].sum() for g in groups])
        if result.df >= 2:
            assert result.statistic == pytest.approx(((observed_bins - expected_bins) ** 2 / expected_bins).sum())
        elif result.df == 1:  # two bins: the exact binomial test on the rarer bin's count
            rare = int(np.argmin(expected_bins))
            assert result.statistic == observed_bins[rare]
            assert result.p_value == pytest.approx(
                binomtest(int(observed_bins[rare]), n, probs[groups[rare]].sum()).pvalue
            )


@given(laws(), st.integers(1, 3000), st.integers(0, 2**32 - 1))
def test_merging_hides_at_most_hidden_mass_of_tv(probs, n, seed):
    """TV on the merged bins >= TV - hidden_mass, for any alternative (merging.py's bound)."""
    rng = rng_for(seed)
    alternative = rng.dirichlet(np.full(probs.size, 0.5))
    groups, hidden_mass = merge_bins(probs, n, 20.0)
    tv = 0.5 * np.abs(alternative - probs).sum()
    merged_tv = 0.5 * sum(abs(alternative[g].sum() - probs[g].sum()) for g in groups)
    merged_tv += 0.5 * alternative[probs == 0].sum()  # impossible tokens are checked outright
    assert merged_tv >= tv - hidden_mass - 1e-12


def test_merge_bins_small_examples():
    groups, hidden = merge_bins([0.5, 0.3, 0.15, 0.05], 100, 20.0)
    assert [g.tolist() for g in groups] == [[3, 2], [1], [0]] and hidden == pytest.approx(0.2)
    # a leftover tail joins the last pooled bin
    groups, hidden = merge_bins([0.7, 0.1, 0.1, 0.05, 0.05], 100, 20.0)
    assert [g.tolist() for g in groups] == [[3, 4, 1, 2], [0]] and hidden == pytest.approx(0.3)
    # too few draws for two bins: one bin, df = 0
    groups, hidden = merge_bins([0.5, 0.3, 0.2, 0.0], 10, 20.0)
    assert [sorted(g.tolist()) for g in groups] == [[0, 1, 2]] and hidden == pytest.approx(1.0)


def test_chisquare_gof_is_fast_at_qwen_vocab():
    rng = rng_for(3)
    probs = rng.dirichlet(np.full(151936, 0.3))
    observed = rng.multinomial(10**6, probs)
    chisquare_gof(observed, probs, alpha=1e-5)  # warm caches (lambda*)
    start = time.perf_counter()
    result = chisquare_gof(observed, probs, alpha=1e-5)
    elapsed = time.perf_counter() - start
    # the bins are capped at MAX_DF + 1: each holds >= n / (MAX_DF + 1) expected draws
    assert MAX_DF // 2 < result.df <= MAX_DF and result.details["min_bin_expected"] >= 10**6 / (MAX_DF + 1) * (1 - 1e-9)
    assert elapsed < 1.0, f"chisquare_gof took {elapsed:.3f}s at V=151936, N=1e6"


def test_min_expected_defaults_to_the_size_rule():
    probs = np.full(10, 0.1)
    for alpha in (1e-3, 1e-4, 1e-7):
        assert chisquare_gof(np.full(10, 10), probs, alpha=alpha).details["min_expected"] == min_expected_for(alpha, 9)
    with pytest.raises(ValueError, match="min_expected=5"):
        chisquare_gof(np.full(10, 10), probs, alpha=1e-3, min_expected=5)


# ---- impossible tokens and failure details ---------------------------------------------------------------------


@pytest.mark.parametrize("n_possible", [0, 3, 10_000])
def test_an_impossible_token_is_a_certain_failure(n_possible):
    probs = np.array([0.25, 0.0, 0.75, 0.0])
    observed = np.array([n_possible // 4, 0, n_possible - n_possible // 4, 1])
    result = chisquare_gof(observed, probs, alpha=1e-9)
    assert not result.passed and result.p_value == 0.0
    assert result.details["impossible"] == [{"token": 3, "observed": 1}]
    with pytest.raises(AssertionError, match="impossible token 3 observed 1 times"):
        assert_chisquare_gof(observed, probs, alpha=1e-9)


def test_one_bin_is_not_a_test_and_spends_no_alpha():
    result = chisquare_gof([3, 4, 0], [0.5, 0.5, 0.0], alpha=1e-4)
    assert not result.tested and result.status == "not tested" and result.alpha == 0.0
    assert result.df == 0 and result.details["not_tested"] == "not tested (df = 0)"
    point_mass = chisquare_gof([7, 0], [1.0, 0.0], alpha=1e-4)  # only an impossible token could fail it
    assert not point_mass.tested and point_mass.passed and point_mass.status == "not tested"
    strata = chisquare_strata([[3, 4], [0, 9]], [[0.5, 0.5], [0.0, 1.0]], alpha=1e-4)
    assert not strata.tested and strata.details["not_tested"] == "not tested (df = 0)"
    assert "NOT TESTED" in result.summary()
    # an impossible observation in a one-bin law is still a certain failure, and a real test
    failed = chisquare_gof([7, 1], [1.0, 0.0], alpha=1e-4)
    assert failed.tested and not failed.passed and failed.p_value == 0.0


def test_failure_names_the_over_and_under_represented_tokens():
    probs = np.full(20, 0.05)
    observed = np.full(20, 500)
    observed[7] += 400
    observed[12] -= 400
    result = chisquare_gof(observed, probs, alpha=1e-6)
    assert not result.passed
    assert result.details["over"][0]["token"] == 7 and result.details["over"][0]["observed"] == 900
    assert result.details["under"][0]["token"] == 12 and result.details["under"][0]["expected"] == pytest.approx(500)
    message = result.explain()
    assert "over-represented: token 7 observed 900" in message and "under-represented: token 12" in message


# ---- power formulas --------------------------------------------------------------------------------------------


@given(
    st.floats(0.005, 0.5),
    st.sampled_from([1e-2, 1e-4, 1e-6]),
    st.sampled_from([0.1, 1e-3]),
    st.integers(1, MAX_DF),
)
def test_chisquare_sample_size_and_detectable_tv_are_inverse(d, alpha, beta, df):
    n = min_num_samples_chisquare(d, alpha, beta, df)
    assert min_detectable_tv_chisquare(n, alpha, beta, df) <= d * (1 + 1e-9)
    if n > 1:
        assert min_detectable_tv_chisquare(n - 1, alpha, beta, df) > d * (1 - 1e-9)
    # and the design holds: power at the worst-case noncentrality 4 n d^2 is >= 1 - beta
    assert ncx2.sf(rule_critical(alpha, df), df, 4 * n * d * d) >= (1 - beta) * (1 - 1e-9)
    assert min_num_samples_chisquare(min_detectable_tv_chisquare(n, alpha, beta, df), alpha, beta, df) in (n, n + 1)


def test_noncentrality_for_power_solves_the_power_equation():
    lam = noncentrality_for_power(1e-6, 1e-3, 20)
    critical = pearson_critical(1e-6, 20, min_expected_for(1e-6, 20))
    assert critical > chi2.isf(1e-6, 20)  # the far-tail rule's critical value, not chi2's
    assert ncx2.sf(critical, 20, lam) == pytest.approx(0.999, abs=1e-9)


@settings(max_examples=15)  # each example runs a bisection of exact power computations
@given(st.floats(0.01, 0.2), st.sampled_from([0.0, 0.05, 0.3, 0.5, 0.9, 1.0]), st.sampled_from([1e-2, 1e-5]))
def test_binomial_sample_size_and_detectable_diff_are_inverse(d, p0, alpha):
    beta = 1e-3
    if not (0 <= p0 + d <= 1 or 0 <= p0 - d <= 1):
        return
    n = min_num_samples_binomial(d, p0, alpha, beta)
    assert min_detectable_diff_binomial(n, p0, alpha, beta) <= d * (1 + 1e-6)
    for side in (+1, -1):
        if 0 <= p0 + side * d <= 1:
            assert binomial_power(n, p0, p0 + side * d, alpha) >= 1 - beta
    if n > 1:
        assert any(
            binomial_power(n - 1, p0, p0 + side * d, alpha) < 1 - beta for side in (+1, -1) if 0 <= p0 + side * d <= 1
        )


@pytest.mark.parametrize(
    ("n", "p0", "alpha"), [(1000, 0.3, 1e-3), (5000, 0.02, 1e-5), (50, 0.0, 0.01), (80, 1.0, 0.01)]
)
def test_binomial_rejection_region_matches_binomtest(n, p0, alpha):
    k_lo, k_hi = binomial_rejection_region(n, p0, alpha)
    near_edges = set(range(k_lo - 3, k_lo + 4)) | set(range(k_hi - 3, k_hi + 4))
    for k in sorted(near_edges & set(range(n + 1))):
        assert (binomtest(k, n, p0).pvalue <= alpha) == (k <= k_lo or k >= k_hi)


def test_mean_sample_size_and_detectable_shift_are_inverse():
    n = min_num_samples_mean(0.05, 1.3, 1e-5, 1e-3)
    assert min_detectable_shift_mean(n, 1.3, 1e-5, 1e-3) <= 0.05 < min_detectable_shift_mean(n - 1, 1.3, 1e-5, 1e-3)


# ---- rate and mean checks --------------------------------------------------------------------------------------


def test_binomial_rate_uses_the_exact_test():
    result = binomial_rate(380, 1000, 0.3, alpha=1e-4)
    assert result.p_value == binomtest(380, 1000, 0.3).pvalue and not result.passed
    assert result.detectable_tv == min_detectable_diff_binomial(1000, 0.3, 1e-4, 1e-3)
    with pytest.raises(AssertionError, match="FAIL binomial"):
        assert_binomial_rate(380, 1000, 0.3, alpha=1e-4)
    never = binomial_rate(1, 1000, 0.0, alpha=1e-9)  # a rate that must be 0: one success is a certain failure
    assert never.p_value == 0.0 and not never.passed


def test_mean_ci_methods():
    values, probs = np.arange(1, 6), np.array([0.3, 0.21, 0.147, 0.1029, 0.2401])
    mean, variance = moments(values, probs)
    samples = rng_for(11).choice(values, size=4000, p=probs).astype(float)
    z = mean_ci(samples, expected_mean=mean, alpha=1e-4, known_variance=variance)
    assert z.details["method"] == "z"
    assert z.statistic == pytest.approx((samples.mean() - mean) / math.sqrt(variance / 4000))
    t = mean_ci(samples, expected_mean=mean, alpha=1e-4)
    summary = (samples.size, samples.sum(), (samples**2).sum())
    t_from_summary = mean_ci(summary=summary, expected_mean=mean, alpha=1e-4)
    assert t.details["method"] == "t" and t.p_value == pytest.approx(t_from_summary.p_value)
    h = mean_ci(samples, expected_mean=mean, alpha=1e-4, method="hoeffding", bounds=(1, 5))
    assert h.p_value == pytest.approx(min(1.0, 2 * math.exp(-2 * 4000 * (samples.mean() - mean) ** 2 / 16)))
    assert h.details["ci_high"] - h.details["ci_low"] == pytest.approx(2 * 4 * math.sqrt(math.log(2e4) / 8000))
    off = mean_ci(samples, expected_mean=mean + 0.2, alpha=1e-4, known_variance=variance)
    assert not off.passed and z.detectable_tv < 0.2


def test_discrete_law_reports_the_whole_table():
    result = discrete_law([29, 21, 50], [0.3, 0.2, 0.5], alpha=1e-3, values=[0, 1, 2])
    assert result.details["table"][0] == {"value": 0, "observed": 29, "expected": pytest.approx(30.0)}
    assert result.statistic == pytest.approx(chisquare([29, 21, 50], [30, 20, 50]).statistic)


# ---- error budget ----------------------------------------------------------------------------------------------


@given(st.lists(st.floats(0.01, 100.0), min_size=1, max_size=20), st.sampled_from([1e-3, 1e-4]))
def test_budget_split_sums_to_total(weights, total):
    budget = ErrorBudget(total)
    shares = budget.split({f"check{i}": w for i, w in enumerate(weights)})
    assert sum(shares.values()) == pytest.approx(total, rel=1e-12)
    assert budget.split([f"c{i}" for i in range(len(weights))]) == {
        f"c{i}": pytest.approx(total / len(weights)) for i in range(len(weights))
    }
    assert "ErrorBudget(total=" in repr(budget)


def _result(p_value: float, alpha: float) -> CheckResult:
    return CheckResult("c", 0.0, 1, p_value, 10, alpha, 0.1, p_value > alpha)


@given(st.lists(st.floats(0.0, 1.0) | st.sampled_from([1e-6, 1e-5, 1e-4, 5e-4]), min_size=1, max_size=30))
def test_holm_rejects_everything_bonferroni_rejects_and_is_monotone(p_values):
    budget = ErrorBudget(1e-3)
    m = len(p_values)
    bonferroni = [_result(p, 1e-3 / m) for p in p_values]
    holm = budget.holm(bonferroni, family_size=m)
    assert [h.p_value for h in holm] == p_values  # input order kept
    for b, h in zip(bonferroni, holm, strict=True):
        if not b.passed:
            assert not h.passed
    for first in holm:  # a smaller p-value is never accepted while a larger one is rejected
        for second in holm:
            if first.p_value < second.p_value and not second.passed:
                assert not first.passed
    # the step-down rule itself
    ordered = sorted(p_values)
    rejected = 0
    while rejected < m and ordered[rejected] <= 1e-3 / (m - rejected):
        rejected += 1
    assert sum(not h.passed for h in holm) == rejected


def test_holm_family_size_is_the_planned_family_not_the_tested_one():
    """Issue 20 item 8: a planned check that turns untested at run time keeps its slot in m."""
    budget = ErrorBudget(1e-3)
    results = [_result(4e-4, 0.0), _result(0.3, 0.0), not_tested("untested", "not tested (df = 0)")]
    planned = budget.holm(results, family_size=3)
    assert [r.details.get("holm", {}).get("family_size") for r in planned] == [3, 3, None]
    assert planned[0].alpha == pytest.approx(1e-3 / 3) and planned[0].passed  # 4e-4 > 1e-3 / 3: not rejected
    assert planned[2].status == "not tested" and planned[2].alpha == 0.0
    # the data-dependent m of before (only the 2 tested) would have rejected it: 4e-4 <= 1e-3 / 2
    assert not budget.holm(results[:2], family_size=2)[0].passed
    with pytest.raises(ValueError, match="family_size=1"):
        budget.holm(results, family_size=1)
    with pytest.raises(TypeError):
        budget.holm(results)  # m is never inferred from the data


# ---- records and arguments -------------------------------------------------------------------------------------


def test_to_dict_round_trips_through_json():
    probs = np.full(50, 0.02)
    observed = np.full(50, 40)
    observed[3], observed[4] = 140, 0
    for result in (
        chisquare_gof(observed, probs, alpha=1e-5),
        chisquare_gof([5, 0, 1], [0.5, 0.5, 0.0], alpha=1e-3),
        binomial_rate(30, 100, 0.3, alpha=1e-3),
        mean_ci([1.0, 2.0, 3.0], expected_mean=2.0, alpha=0.01),
    ):
        record = result.to_dict()
        assert json.loads(json.dumps(record, allow_nan=False)) == record
        assert CheckResult.from_dict(record).to_dict() == record


def test_to_dict_maps_non_finite_to_none():
    record = CheckResult("x", math.inf, 1, 0.0, 3, 0.01, math.nan, False).to_dict()
    assert record["statistic"] is None and record["detectable_tv"] is None
    json.dumps(record, allow_nan=False)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: chisquare_gof([1, 2], [0.5, 0.5], alpha=0.0), "alpha=0.0"),
        (lambda: chisquare_gof([1, 2], [0.5, 0.5], alpha=1.5), "alpha=1.5"),
        (lambda: chisquare_gof([1, 2], [0.5, 0.5], alpha=0.01, beta=1.0), "beta=1.0"),
        (lambda: chisquare_gof([1, -2], [0.5, 0.5], alpha=0.01), r"observed_counts\[1\]=-2"),
        (lambda: chisquare_gof([1, 2.5], [0.5, 0.5], alpha=0.01), r"observed_counts\[1\]=2.5"),
        (lambda: chisquare_gof([1, 2], [0.5, 0.4], alpha=0.01), "expected_probs sums to"),
        (lambda: chisquare_gof([1, 2], [1.5, -0.5], alpha=0.01), r"expected_probs\[1\]=-0.5"),
        (lambda: chisquare_gof([1, 2, 3], [0.5, 0.5], alpha=0.01), "expected_probs has 2 entries"),
        (lambda: chisquare_gof([0, 0], [0.5, 0.5], alpha=0.01), "no observations"),
        (lambda: chisquare_gof([1, 2], [0.5, 0.5], alpha=0.01, min_expected=0), "min_expected=0"),
        (lambda: merge_bins([0.5, 0.5], 0), "n=0"),
        (lambda: min_num_samples_chisquare(0.0, 0.01, 0.1, 3), "d=0.0"),
        (lambda: min_num_samples_chisquare(0.1, 0.01, 0.1, 0), "df=0"),
        (lambda: min_detectable_tv_chisquare(0, 0.01, 0.1, 3), "n=0"),
        (lambda: binomial_rate(5, 3, 0.5, alpha=0.01), "successes=5"),
        (lambda: binomial_rate(1, 3, 1.2, alpha=0.01), "p0=1.2"),
        (lambda: min_num_samples_binomial(0.1, 0.5, 1.0, 0.1), "alpha=1.0"),
        (lambda: mean_ci([1.0, 2.0], expected_mean=1.0, alpha=0.01, method="z"), "known_variance"),
        (lambda: mean_ci([1.0, 2.0], expected_mean=1.0, alpha=0.01, method="x"), "method='x'"),
        (lambda: ErrorBudget(2.0), "total=2.0"),
        (lambda: ErrorBudget().split({"a": 0}), "weight for 'a'"),
        (lambda: ErrorBudget().split(["a", "a"]), "repeats a name"),
    ],
)
def test_bad_arguments_raise_value_error_naming_them(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_bin_cap_binds_only_past_max_df():
    """Merging to n / (MAX_DF + 1) happens only when more than MAX_DF + 1 bins would remain (power at small V)."""
    probs = np.full(16, 1 / 16)
    result = chisquare_gof(np.full(16, 625), probs, alpha=1e-5)  # n = 10000
    assert result.df == 15 and result.details["pooled_bins"] == 0
    skewed = np.array([0.005] * 15 + [1 - 0.075])  # 50 expected each: a floor of 77.5 would pool them
    result = chisquare_gof(np.rint(skewed * 10_000).astype(int), skewed, alpha=1e-5)
    assert result.df == 15 and result.hidden_mass == 0.0
    strata = chisquare_strata(np.rint(skewed * 10_000).astype(int)[None, :], skewed[None, :], alpha=1e-5)
    assert strata.df == 15 and strata.hidden_mass == 0.0
