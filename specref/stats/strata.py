"""Pearson chi-square over independent strata, each with its own expected law.

A check often conditions on something observed: the state a correction was drawn in, the start state of a
cycle. Given the stratum sizes n_s, the counts within stratum s are multinomial(n_s, p0_s), so the sum of the
per-stratum Pearson statistics has sum_s (bins_s - 1) degrees of freedom; its p-value is the far-tail law of
size.py at the smallest bin's expected count (each stratum's largest bin plays the infinite bin of that law).
When only one stratum has a test and it has 2 bins (df = 1), the check is the exact binomial test instead. Bins
are merged within each stratum by its expected counts n_s * p0_s only. df = 0 (no stratum with two bins) is not
a test: tested=False, "not tested (df = 0)", unless an impossible outcome was observed.

Power: if the law in stratum s is off by TV d_s, the noncentrality is >= sum_s 4 n_s d_s^2 >= 4 N dbar^2 (Jensen),
where dbar = sum_s (n_s / N) d_s is the stratum-weighted mean TV; detectable_tv is stated for dbar.
"""

from __future__ import annotations

import numpy as np

from ._args import check_counts, check_level
from .gof import _extremes, binned_test, check_min_expected, default_min_expected, effective_min_expected
from .merging import bins_for
from .power import min_detectable_diff_binomial, min_detectable_tv_chisquare
from .record import CheckResult, not_tested
from .size import MAX_DF, ladder_floor, pearson_p_value


def _strata_bins(observed, expected, labels, floor):
    """Per-stratum merging at floor: (statistic, df, hidden mass * n, impossible, tested, smallest, binned)."""
    statistic, df, hidden, impossible, tested = 0.0, 0, 0.0, [], []
    smallest, binned = float("inf"), []
    for s in np.flatnonzero(observed.sum(1)):
        counts, row = observed[s], expected[s]
        total = row.sum()
        if total <= 0:
            impossible.append({"stratum": labels[s], "token": None, "observed": int(counts.sum())})
            continue
        row = row / total
        bad = np.flatnonzero((row == 0) & (counts > 0))
        impossible += [{"stratum": labels[s], "token": int(t), "observed": int(counts[t])} for t in bad]
        n_s = int(counts[row > 0].sum())
        if n_s == 0:
            continue
        bins = bins_for(row, n_s, floor)
        o = bins.sum(counts).astype(np.float64)
        e = bins.sum(row) * n_s
        e *= o.sum() / e.sum()
        hidden += bins.hidden_mass * n_s
        if o.size > 1:
            statistic += float(((o - e) ** 2 / e).sum())
            df += o.size - 1
            smallest = min(smallest, float(e.min()))
            tested.append((s, row, n_s))
            binned.append((o, e))

    return statistic, df, hidden, impossible, tested, smallest, binned


def chisquare_strata(
    observed_counts,
    expected_probs,
    *,
    alpha: float,
    name: str = "chisquare_strata",
    min_expected: float | None = None,
    beta: float = 1e-3,
    labels=None,
) -> CheckResult:
    """observed_counts [S, V] against expected_probs [S, V] (rows of strata with no observations are ignored).

    An observation on an outcome of expected probability 0, or in a stratum whose expected row is all zero, is a
    certain failure (p_value 0). labels [S] names the strata in failure details.
    """
    shape = np.shape(observed_counts)
    observed = check_counts("observed_counts", np.ravel(observed_counts)).reshape(shape)
    expected = np.asarray(expected_probs, dtype=np.float64)
    if observed.ndim != 2 or observed.shape != expected.shape:
        raise ValueError(
            f"observed_counts has shape {observed.shape} and expected_probs {expected.shape}; expected equal [S, V]"
        )
    if not (np.isfinite(expected).all() and (expected >= 0).all()):
        raise ValueError("expected_probs has a negative or non-finite entry")
    alpha, beta = check_level("alpha", alpha), check_level("beta", beta)
    if min_expected is None:
        possible = int(np.count_nonzero(expected[observed.sum(1) > 0] > 0))
        min_expected = default_min_expected(alpha, possible - 1)
    else:
        min_expected = check_min_expected(min_expected)
    labels = list(range(observed.shape[0])) if labels is None else list(labels)

    n = int(observed.sum())
    for floor in (min_expected, effective_min_expected(min_expected, n)):
        # the cap of MAX_DF over all strata together: when merging at min_expected leaves more, every stratum
        # merges again to >= n / (MAX_DF + 1)
        statistic, df, hidden, impossible, tested, smallest, binned = _strata_bins(observed, expected, labels, floor)
        if df <= MAX_DF:
            break

    p_value, used, detectable = 1.0, {}, float("nan")
    if df == 1:  # one stratum with two bins: the exact binomial test
        statistic, p_value, used = binned_test(*binned[0])
        detectable = min_detectable_diff_binomial(int(round(binned[0][0].sum())), used["p0"], alpha, beta)
    elif df >= 2:
        p_value = pearson_p_value(statistic, df, smallest)
        used = {"test_used": "Pearson chi-square summed over strata, far-tail reference law (size.py)",
                "reference_e": ladder_floor(smallest), "min_bin_expected": smallest}  # fmt: skip
        detectable = min_detectable_tv_chisquare(n, alpha, beta, df, used["reference_e"])
    if impossible:
        p_value = 0.0
    details: dict = {
        "test": "Pearson chi-square summed over strata, bins merged by expected counts within each stratum",
        "distance": "stratum-weighted mean TV",
        "beta": beta,
        "strata": int(np.count_nonzero(observed.sum(1))),
        "min_expected": min_expected,
        **used,
    }
    if impossible:
        details["impossible"] = impossible[:5]
    passed = p_value > alpha
    extremes = []
    for s, row, n_s in [] if passed else tested:  # failure details only: most checks pass
        tokens = np.flatnonzero(row > 0)
        for side in _extremes(observed[s][tokens], row[tokens] * n_s, tokens, min_expected).values():
            extremes += [{**entry, "stratum": labels[s]} for entry in side]
    if extremes:
        extremes.sort(key=lambda entry: -abs(entry["residual"]))
        details["over"] = [e for e in extremes if e["residual"] > 0][:5]
        details["under"] = [e for e in extremes if e["residual"] < 0][:5]
    if df == 0 and not impossible:
        details["note"] = "no stratum had two bins: nothing to test"
        return not_tested(name, "not tested (df = 0)", n, details)
    return CheckResult(name, statistic, df, p_value, n, alpha, detectable, passed, hidden / max(n, 1), details)
