"""Simulation meta-tests of specref.stats: predicted power matches simulated power, sparse cases stay calibrated.

Each meta-test simulates R replicates of a check at a moderate alpha_sim, counts the replicates that reject, and
compares that count with the prediction by a binomial test at alpha_meta. A meta-test is itself a statistical test:
with a correct stats module it fails with probability <= alpha_meta (the prediction's tolerance, where there is one,
covers the asymptotic approximation, not sampling noise). META_CHECKS lists every such comparison in this file;
alpha_meta = budget.alpha_for("stats", len(META_CHECKS)) (Bonferroni), so the file's family-wise false-alarm
probability is <= the "stats" share of the CI budget. Each meta-test also asserts that its R gives it power
0.999 against the miscalibration it is meant to catch.
"""

from __future__ import annotations

import numpy as np
import pytest
from budget import alpha_for
from scipy.stats import binomtest, ncx2

from specref.stats import (
    binomial_power,
    binomial_rate,
    chisquare_gof,
    mean_ci,
    min_detectable_diff_binomial,
    min_num_samples_binomial,
    min_num_samples_chisquare,
    min_num_samples_mean,
    moments,
)
from specref.stats.merging import bins_for
from specref.stats.power import rule_critical
from specref.stats.size import ladder_floor

pytestmark = pytest.mark.statistical

META_CHECKS = (
    "chisquare worst-case power at min_num_samples: not below prediction - tol",
    "chisquare worst-case power at min_num_samples: not above prediction + tol",
    "chisquare merged sparse power: not below ncx2 prediction - tol",
    "chisquare merged sparse power: not above ncx2 prediction + tol",
    "chisquare sparse calibration, min_expected 20",
    "chisquare sparse calibration with impossible tokens, min_expected 20",
    "binomial power at min_num_samples equals the exact power (above p0)",
    "binomial power at min_num_samples equals the exact power (below p0)",
    "binomial calibration",
    "mean z calibration",
    "mean z power at min_num_samples_mean",
)
ALPHA_META = alpha_for("stats", len(META_CHECKS))
BETA_META = 1e-3  # each meta-test's own power target

#: Tolerances for predictions that rest on asymptotics (noncentral chi-square, CLT), not on sampling noise.
POWER_TOLERANCE = 0.05
CALIBRATION_FACTOR = 1.25  # chi-square / z false-alarm rate at alpha_sim may run up to 25% over nominal


def rng_for(name: str) -> np.random.Generator:
    import zlib

    return np.random.Generator(np.random.PCG64(zlib.crc32(name.encode())))


def zipf(vocab: int, exponent: float = 1.1) -> np.ndarray:
    weights = 1.0 / np.arange(1, vocab + 1) ** exponent
    return weights / weights.sum()


def assert_count_not_below(rejections: int, replicates: int, rate: float, what: str) -> None:
    p_value = binomtest(rejections, replicates, rate, alternative="less").pvalue
    assert p_value > ALPHA_META, f"{what}: {rejections}/{replicates} is below rate {rate:.4f} (p={p_value:.2g})"


def assert_count_not_above(rejections: int, replicates: int, rate: float, what: str) -> None:
    p_value = binomtest(rejections, replicates, rate, alternative="greater").pvalue
    assert p_value > ALPHA_META, f"{what}: {rejections}/{replicates} is above rate {rate:.4f} (p={p_value:.2g})"


def assert_replicates_suffice(replicates: int, rate: float, gap: float) -> None:
    """R detects a true rejection rate gap away from rate with power 1 - BETA_META (two-sided, so conservative)."""
    needed = min_num_samples_binomial(gap, rate, ALPHA_META, BETA_META)
    assert replicates >= needed, f"R={replicates} < {needed} replicates needed to see a gap of {gap}"


def test_meta_checks_fit_the_stats_share():
    assert ALPHA_META * len(META_CHECKS) <= alpha_for("stats", 1) * (1 + 1e-12)


def rejections_chisquare(target_probs, expected_probs, n, replicates, rng, alpha, min_expected) -> int:
    observed = rng.multinomial(n, target_probs, size=replicates)  # [R, V]
    return sum(
        not chisquare_gof(row, expected_probs, alpha=alpha, min_expected=min_expected).passed for row in observed
    )


def test_chisquare_power_at_min_num_samples_matches_the_worst_case_design():
    """The least favourable alternative at TV d (|p - p0| / p0 constant) is rejected w.p. ~ 1 - beta at N(d)."""
    alpha_sim, beta_sim, d, replicates = 0.01, 0.1, 0.05, 1500
    expected_probs = np.array([0.3, 0.3, 0.1, 0.1, 0.05, 0.05, 0.04, 0.04, 0.01, 0.01])
    signs = np.array([1, -1] * 5)  # equal p0 mass up and down, so TV = d and sum (p - p0)^2 / p0 = 4 d^2
    target_probs = expected_probs * (1 + 2 * d * signs)
    assert 0.5 * np.abs(target_probs - expected_probs).sum() == pytest.approx(d)
    df = expected_probs.size - 1
    n = min_num_samples_chisquare(d, alpha_sim, beta_sim, df)
    # every bin keeps >= 20 expected draws at this n, so merging does not change df
    assert (n * expected_probs).min() >= 20
    critical = rule_critical(alpha_sim, df, ladder_floor((n * expected_probs).min()))  # the far-tail rule's
    predicted = ncx2.sf(critical, df, 4 * n * d * d)
    assert predicted >= 1 - beta_sim
    assert_replicates_suffice(replicates, predicted - POWER_TOLERANCE, 0.1)
    rejections = rejections_chisquare(target_probs, expected_probs, n, replicates, rng_for("worst"), alpha_sim, 20.0)
    assert_count_not_below(rejections, replicates, predicted - POWER_TOLERANCE, f"power at N={n}")
    assert_count_not_above(rejections, replicates, min(1.0, predicted + POWER_TOLERANCE), f"power at N={n}")


def test_chisquare_power_on_merged_sparse_law_matches_ncx2_prediction():
    """A Zipf law over 500 tokens, N = 2000 (most tokens pooled): power = ncx2 with the merged-bin noncentrality."""
    alpha_sim, n, replicates, shift = 0.01, 2000, 1500, 0.03
    expected_probs = zipf(500)
    target_probs = expected_probs.copy()
    target_probs[0] += shift
    target_probs[1] -= shift
    bins = bins_for(expected_probs, n, 20.0)
    merged_p0, merged_p = bins.sum(expected_probs), bins.sum(target_probs)
    df = merged_p0.size - 1
    noncentrality = n * ((merged_p - merged_p0) ** 2 / merged_p0).sum()
    predicted = ncx2.sf(rule_critical(alpha_sim, df, ladder_floor(n * merged_p0.min())), df, noncentrality)
    assert 0.3 < predicted < 0.9 and bins.hidden_mass > 0.1  # a mid-power prediction on a heavily merged law
    assert_replicates_suffice(replicates, predicted, POWER_TOLERANCE + 0.1)
    rejections = rejections_chisquare(target_probs, expected_probs, n, replicates, rng_for("sparse"), alpha_sim, 20.0)
    assert_count_not_below(rejections, replicates, predicted - POWER_TOLERANCE, f"power, df={df}")
    assert_count_not_above(rejections, replicates, predicted + POWER_TOLERANCE, f"power, df={df}")


@pytest.mark.parametrize(
    ("case", "vocab", "n", "min_expected", "zero_fraction"),
    [("min_expected 20", 2000, 1000, 20.0, 0.0), ("impossible tokens, min_expected 20", 3000, 1500, 20.0, 0.3)],
)
def test_chisquare_stays_calibrated_on_sparse_laws(case, vocab, n, min_expected, zero_fraction):
    """Most tokens have expected count << 1; the false-alarm rate at alpha_sim stays near alpha_sim."""
    alpha_sim, replicates = 0.05, 2000
    rng = rng_for(case)
    expected_probs = zipf(vocab)
    expected_probs[rng.random(vocab) < zero_fraction] = 0.0
    expected_probs /= expected_probs.sum()
    bins = bins_for(expected_probs, n, min_expected)
    assert bins.hidden_mass > 0.2 and bins.impossible.size == int(np.count_nonzero(expected_probs == 0))
    bound = CALIBRATION_FACTOR * alpha_sim
    assert_replicates_suffice(replicates, bound, 0.05)  # catches a false-alarm rate of 0.11 or more
    false_alarms = rejections_chisquare(expected_probs, expected_probs, n, replicates, rng, alpha_sim, min_expected)
    assert_count_not_above(false_alarms, replicates, bound, f"false alarms ({case})")


@pytest.mark.parametrize("side", [+1, -1])
def test_binomial_power_at_min_num_samples_equals_exact_power(side):
    """The exact power the design computes is the rejection rate the simulation sees (no approximation: two-sided)."""
    alpha_sim, beta_sim, p0, d, replicates = 0.01, 0.1, 0.3, 0.03, 1500
    n = min_num_samples_binomial(d, p0, alpha_sim, beta_sim)
    predicted = binomial_power(n, p0, p0 + side * d, alpha_sim)
    assert predicted >= 1 - beta_sim
    assert min_detectable_diff_binomial(replicates, predicted, ALPHA_META, BETA_META) < 0.07
    successes = rng_for(f"binomial{side}").binomial(n, p0 + side * d, size=replicates)
    rejections = sum(not binomial_rate(int(k), n, p0, alpha=alpha_sim).passed for k in successes)
    p_value = binomtest(rejections, replicates, predicted).pvalue
    assert p_value > ALPHA_META, (
        f"{rejections}/{replicates} rejections vs exact power {predicted:.4f} (p={p_value:.2g})"
    )


def test_binomial_test_is_calibrated():
    alpha_sim, p0, n, replicates = 0.05, 0.3, 500, 2000
    size = binomial_power(n, p0, p0, alpha_sim)  # exact false-alarm probability of the exact test
    assert size <= alpha_sim
    assert_replicates_suffice(replicates, alpha_sim, 0.05)
    successes = rng_for("binomial null").binomial(n, p0, size=replicates)
    false_alarms = sum(not binomial_rate(int(k), n, p0, alpha=alpha_sim).passed for k in successes)
    assert_count_not_above(false_alarms, replicates, alpha_sim, "binomial false alarms")


def tau_law(a: float, gamma: int) -> tuple[np.ndarray, np.ndarray]:
    """tau = A + 1 with A truncated geometric: P(A = k) = a^k (1 - a) for k < g, P(A = g) = a^g."""
    probs = np.array([a**k * (1 - a) for k in range(gamma)] + [a**gamma])
    return np.arange(1, gamma + 2, dtype=np.float64), probs


def test_mean_z_test_is_calibrated():
    alpha_sim, cycles, replicates = 0.05, 300, 2000
    values, probs = tau_law(0.7, 4)
    mean, variance = moments(values, probs)
    samples = rng_for("tau null").choice(values, size=(replicates, cycles), p=probs)  # [R, cycles]
    bound = CALIBRATION_FACTOR * alpha_sim
    assert_replicates_suffice(replicates, bound, 0.05)
    false_alarms = sum(
        not mean_ci(row, expected_mean=mean, alpha=alpha_sim, known_variance=variance).passed for row in samples
    )
    assert_count_not_above(false_alarms, replicates, bound, "mean z false alarms")


def test_mean_z_power_at_min_num_samples():
    alpha_sim, beta_sim, replicates = 0.01, 0.1, 1500
    values, null_probs = tau_law(0.7, 4)
    mean, variance = moments(values, null_probs)
    _, true_probs = tau_law(0.75, 4)
    shift = moments(values, true_probs)[0] - mean
    cycles = min_num_samples_mean(abs(shift), np.sqrt(variance), alpha_sim, beta_sim)
    samples = rng_for("tau shifted").choice(values, size=(replicates, cycles), p=true_probs)  # [R, cycles]
    assert_replicates_suffice(replicates, 1 - beta_sim - POWER_TOLERANCE, 0.1)
    rejections = sum(
        not mean_ci(row, expected_mean=mean, alpha=alpha_sim, known_variance=variance).passed for row in samples
    )
    assert_count_not_below(rejections, replicates, 1 - beta_sim - POWER_TOLERANCE, f"mean power at n={cycles}")
