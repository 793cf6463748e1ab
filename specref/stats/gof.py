"""Goodness of fit of observed token counts to an expected law: Pearson chi-square on bins merged by expected counts.

Tokens with expected probability 0 are impossible: any observation there is a certain failure (p_value 0), listed
in details["impossible"]. Power: see power.py (worst case lambda = 4 N d^2) and merging.py (hidden_mass).
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy.stats import chisquare

from ._args import check_counts, check_level, check_positive, check_probs
from .merging import bins_for
from .power import min_detectable_tv_chisquare
from .record import CheckResult, require

#: How many tokens failure details list on each side.
TOP_TOKENS = 5


def default_min_expected(alpha: float) -> float:
    """At least 20 expected draws per bin for alpha <= 1e-4 (the far tail needs it), else Cochran's 5."""
    return 20.0 if alpha <= 1e-4 else 5.0


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
    """Pearson chi-square (scipy.stats.chisquare) of observed counts [V] against expected_probs [V].

    Bins are merged by the expected counts only (merging.py); min_expected defaults to 20 when alpha <= 1e-4, else 5.
    df = bins - 1. With one bin (df = 0) the chi-square has nothing to test: the check passes unless an impossible
    token was observed, and details["note"] records it. The record's detectable_tv is the TV on the merged bins that
    is detected with power 1 - beta; hidden_mass bounds what merging can hide on top.
    """
    observed = check_counts("observed_counts", observed_counts)  # [V]
    probs = check_probs("expected_probs", expected_probs, observed.size, "observed_counts")  # [V]
    alpha, beta = check_level("alpha", alpha), check_level("beta", beta)
    min_expected = default_min_expected(alpha) if min_expected is None else check_positive("min_expected", min_expected)
    n = int(observed.sum())
    if n == 0:
        raise ValueError("observed_counts has no observations; a check needs n >= 1")

    impossible = probs == 0
    n_impossible = int(observed[impossible].sum())
    n_possible = n - n_impossible  # the chi-square runs on the possible tokens; impossible ones fail outright
    details: dict = {
        "test": "Pearson chi-square (scipy.stats.chisquare) on bins merged by expected counts",
        "distance": "TV",
        "beta": beta,
        "min_expected": min_expected,
        "impossible_observed": n_impossible,
    }
    statistic, p_value, df, hidden_mass = 0.0, 1.0, 0, 0.0
    if n_possible > 0:
        bins = bins_for(probs, n_possible, min_expected)
        observed_bins = bins.sum(observed).astype(np.float64)  # [B]
        expected_bins = bins.sum(probs) * n_possible  # [B]
        expected_bins *= observed_bins.sum() / expected_bins.sum()  # equal totals, as scipy requires
        df, hidden_mass = int(observed_bins.size - 1), bins.hidden_mass
        details.update(
            bins=int(observed_bins.size),
            pooled_bins=int(np.count_nonzero(bins.sizes > 1)),
            min_bin_expected=float(expected_bins.min()),
        )
        if df >= 1:
            statistic, p_value = (float(x) for x in chisquare(observed_bins, expected_bins))
        else:
            details["note"] = "one bin (df = 0): the chi-square has no power; only impossible tokens can fail"

    if df >= 1:
        detectable = min_detectable_tv_chisquare(n, alpha, beta, df)
    elif hidden_mass > 0:
        detectable = 1.0  # everything is pooled in one bin: no TV is guaranteed to show
    elif impossible.any():
        detectable = 1.0 - beta ** (1.0 / n)  # all alternatives move mass d onto impossible tokens: 1-(1-d)^n >= 1-b
    else:
        detectable = 0.0  # a one-token vocabulary has no alternative law

    if n_impossible > 0:
        p_value = 0.0
        seen = np.flatnonzero(impossible & (observed > 0))
        seen = seen[np.argsort(-observed[seen], kind="stable")][:TOP_TOKENS]
        details["impossible"] = [{"token": int(t), "observed": int(observed[t])} for t in seen]
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
