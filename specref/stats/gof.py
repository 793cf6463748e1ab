"""Goodness of fit of observed token counts to an expected law, on bins merged by expected counts only.

Two bins (df = 1) are an exact binomial test (scipy.stats.binomtest) of the rarer bin's count: exact size <= alpha.
Three or more bins are Pearson chi-square with the far-tail p-value of size.py (exact size <= alpha at the levels a
run uses; chi2.sf is in details["p_asymptotic"] for reference). One bin (df = 0) is not a test: the result has
tested=False ("not tested (df = 0)"), unless an impossible token was observed.

Tokens with expected probability 0 are impossible: any observation there is a certain failure (p_value 0), listed
in details["impossible"]. Power: see power.py (worst case lambda = 4 N d^2 at the rule's critical value; exact
binomial power for 2 bins) and merging.py (hidden_mass).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.stats import binomtest, chi2

from ._args import check_counts, check_level, check_positive, check_probs
from .merging import bins_for
from .power import min_detectable_diff_binomial, min_detectable_tv_chisquare
from .record import CheckResult, not_tested, require
from .size import E_LADDER, MAX_DF, ladder_floor, min_expected_for, pearson_p_value

#: How many tokens failure details list on each side.
TOP_TOKENS = 5


def default_min_expected(alpha: float, df: int = 1) -> float:
    """E_min(alpha, df) of size.py (20 to 100 expected draws per bin), df being the unmerged bins less one."""
    return float(min_expected_for(alpha, max(1, min(df, MAX_DF))))


def check_min_expected(min_expected: object) -> float:
    """A caller's min_expected: at least E_LADDER[0], the smallest count the far-tail reference law covers."""
    value = check_positive("min_expected", min_expected)
    if value < E_LADDER[0]:
        raise ValueError(f"min_expected={min_expected!r} is below {E_LADDER[0]}, the smallest count size.py covers")
    return value


def effective_min_expected(min_expected: float, n: int) -> float:
    """The floor a second merge uses when merging at min_expected leaves more than MAX_DF + 1 bins: n / (MAX_DF + 1)
    (the reference law is tabulated up to MAX_DF)."""
    return max(min_expected, n / (MAX_DF + 1))


def binned_test(observed_bins: np.ndarray, expected_bins: np.ndarray) -> tuple[float, float, dict]:
    """(statistic, p_value, details) for bins [B >= 2] with equal totals: exact binomial for 2, else Pearson."""
    n = int(round(observed_bins.sum()))
    if observed_bins.size == 2:
        rare = int(np.argmin(expected_bins))
        p0 = float(expected_bins[rare] / expected_bins.sum())
        k = int(round(observed_bins[rare]))
        p_value = float(binomtest(k, n, p0).pvalue)
        return float(k), p_value, {"test_used": "exact binomial (2 bins)", "p0": p0}
    statistic = float(((observed_bins - expected_bins) ** 2 / expected_bins).sum())
    df = observed_bins.size - 1
    smallest = float(expected_bins.min())
    details = {
        "test_used": "Pearson chi-square, far-tail reference law (size.py)",
        "reference_e": ladder_floor(smallest),
        "p_asymptotic": float(chi2.sf(statistic, df)),
    }
    return statistic, pearson_p_value(statistic, df, smallest), details


def _extremes(observed: np.ndarray, expected: np.ndarray, tokens: np.ndarray, floor: float) -> dict:
    """The TOP_TOKENS tokens with the largest and the most negative residual (o - e) / sqrt(max(e, floor)).

    The floor (min_expected) keeps single draws of very rare tokens from crowding out the real deviations.
    """
    residual = (observed - expected) / np.sqrt(np.maximum(expected, floor))  # [K]
    k = min(TOP_TOKENS, residual.size)
    over = np.argpartition(-residual, k - 1)[:k]
    under = np.argpartition(residual, k - 1)[:k]

    def rows(picked: np.ndarray, sign: int) -> list[dict]:
        picked = picked[np.argsort(-sign * residual[picked], kind="stable")]
        picked = picked[sign * residual[picked] > 0]
        return [
            {
                "token": int(tokens[i]),
                "observed": int(observed[i]),
                "expected": float(expected[i]),
                "residual": float(residual[i]),
            }
            for i in picked
        ]

    return {"over": rows(over, +1), "under": rows(under, -1)}


def chisquare_gof(
    observed_counts,
    expected_probs,
    *,
    alpha: float,
    name: str = "chisquare",
    min_expected: float | None = None,
    beta: float = 1e-3,
) -> CheckResult:
    """Goodness of fit of observed counts [V] to expected_probs [V] (see the module docstring for the tests).

    Bins are merged by the expected counts only (merging.py) to >= min_expected (default E_min(alpha, df) of
    size.py), and to at most MAX_DF + 1 bins. df = bins - 1. The record's detectable_tv is the TV on the merged
    bins detected with power 1 - beta; hidden_mass bounds what merging can hide on top.
    """
    observed = check_counts("observed_counts", observed_counts)  # [V]
    probs = check_probs("expected_probs", expected_probs, observed.size, "observed_counts")  # [V]
    alpha, beta = check_level("alpha", alpha), check_level("beta", beta)
    impossible = probs == 0
    if min_expected is None:
        min_expected = default_min_expected(alpha, int((~impossible).sum()) - 1)
    else:
        min_expected = check_min_expected(min_expected)
    n = int(observed.sum())
    if n == 0:
        raise ValueError("observed_counts has no observations; a check needs n >= 1")

    n_impossible = int(observed[impossible].sum())
    n_possible = n - n_impossible  # the test runs on the possible tokens; impossible ones fail outright
    details: dict = {
        "test": "exact binomial (2 bins) or Pearson chi-square with a far-tail p-value, bins merged by expected counts",
        "distance": "TV",
        "beta": beta,
        "min_expected": min_expected,
        "impossible_observed": n_impossible,
    }
    statistic, p_value, df, hidden_mass = 0.0, 1.0, 0, 0.0
    detectable = float("nan")
    if n_possible > 0:
        bins = bins_for(probs, n_possible, min_expected)
        if bins.starts.size > MAX_DF + 1:  # the cap: merge again to >= n / (MAX_DF + 1)
            bins = bins_for(probs, n_possible, effective_min_expected(min_expected, n_possible))
        observed_bins = bins.sum(observed).astype(np.float64)  # [B]
        expected_bins = bins.sum(probs) * n_possible  # [B]
        expected_bins *= observed_bins.sum() / expected_bins.sum()  # equal totals
        df, hidden_mass = int(observed_bins.size - 1), bins.hidden_mass
        details.update(
            bins=int(observed_bins.size),
            pooled_bins=int(np.count_nonzero(bins.sizes > 1)),
            min_bin_expected=float(expected_bins.min()),
        )
        if df >= 1:
            statistic, p_value, used = binned_test(observed_bins, expected_bins)
            details.update(used)
        if df == 1:  # exact binomial power on the rarer bin's rate; on 2 bins TV = |p - p0|
            detectable = min_detectable_diff_binomial(n_possible, details["p0"], alpha, beta)
        elif df >= 2:
            detectable = min_detectable_tv_chisquare(n_possible, alpha, beta, df, details["reference_e"])

    if n_impossible > 0:
        p_value = 0.0
        seen = np.flatnonzero(impossible & (observed > 0))
        seen = seen[np.argsort(-observed[seen], kind="stable")][:TOP_TOKENS]
        details["impossible"] = [{"token": int(t), "observed": int(observed[t])} for t in seen]
    elif df == 0:
        reason = "not tested (df = 0)"
        details["note"] = "one bin (df = 0): nothing to test; only an impossible token could fail"
        return not_tested(name, reason, n, details)
    passed = p_value > alpha
    if not passed and n_possible > 0:
        tokens = np.flatnonzero(~impossible)
        details.update(_extremes(observed[tokens], probs[tokens] * n_possible, tokens, min_expected))
    return CheckResult(name, statistic, df, p_value, n, alpha, detectable, passed, hidden_mass, details)


def assert_chisquare_gof(observed_counts, expected_probs, *, alpha: float, **kwargs) -> CheckResult:
    """chisquare_gof, raising AssertionError with a readable explanation when the check fails."""
    return require(chisquare_gof(observed_counts, expected_probs, alpha=alpha, **kwargs))


def discrete_law(
    observed_counts,
    expected_probs,
    *,
    alpha: float,
    name: str = "discrete_law",
    min_expected: float | None = None,
    beta: float = 1e-3,
    values=None,
) -> CheckResult:
    """chisquare_gof for a law on a small support (such as the accepted length 0..g), with the full table in details.

    values names the outcomes (default 0..len-1); details["table"] lists value, observed and expected count.
    """
    result = chisquare_gof(
        observed_counts, expected_probs, alpha=alpha, name=name, min_expected=min_expected, beta=beta
    )
    observed = np.asarray(observed_counts)
    probs = np.asarray(expected_probs, dtype=np.float64)
    values = list(range(observed.size)) if values is None else list(values)
    if len(values) != observed.size:
        raise ValueError(f"values has {len(values)} entries but observed_counts has {observed.size}")
    table = [
        {"value": value, "observed": int(o), "expected": float(p * result.n)}
        for value, o, p in zip(values, observed, probs / probs.sum(), strict=True)
    ]
    return dataclasses.replace(result, details={**result.details, "table": table})


def assert_discrete_law(observed_counts, expected_probs, *, alpha: float, **kwargs) -> CheckResult:
    return require(discrete_law(observed_counts, expected_probs, alpha=alpha, **kwargs))
