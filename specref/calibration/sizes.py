"""The exact-size table: the size of every test family of the checks at the levels a run really uses.

A run splits alpha = 1e-3 over ~70 checks (~1.4e-5 each; ~2e-6 in CI), and Holm's thresholds lie between that and
alpha, so the table spans 1e-4 .. 1e-7. Every entry is computed exactly (by enumeration or an exact lattice law,
specref.stats.size and size_real); nothing is simulated. "ratio" is size / alpha: the design needs <= 1.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import chi2

from ..stats.size import (
    E_LADDER,
    REAL_E_FACTOR,
    min_expected_for,
    pearson_critical,
    size_asymptotic_two_bins,
    size_binomial,
    size_multinomial,
    sizes_by_rare,
)
from ..stats.size_real import reference_tail

ALPHAS = (1e-4, 1e-5, 1e-6, 1e-7)
#: Pearson against chi2(1) with 2 bins (the rule before): (expected in the rare bin, rare-bin probability).
OLD_RULE = ((20, 0.01), (34, 0.01), (100, 0.01), (20, 0.2))
#: The exact binomial test (2-bin laws, reject rate per position): (trials, p0).
BINOMIAL = ((50, 0.5), (400, 0.05), (2048, 0.3), (8192, 0.01), (100_000, 0.2))
#: The far-tail Pearson rule: degrees of freedom (3 bins up to the cap MAX_DF + 1).
DFS = (2, 3, 5, 10, 30, 128)
#: 3-bin multinomials enumerated exactly at finite N, as multiples of E_min: (rare, rare, rest) expected counts.
FINITE = ((1, 1, 1), (1, 1, 4), (1, 3, 3), (1, 1.5, 2))
#: Real (non-integer) expected counts: df = 2 (two bins at E, one infinite bin), E on this grid over each ladder span.
REAL_E_STEP = 0.05


def real_e_rows(alphas=ALPHAS, step: float = REAL_E_STEP) -> list[dict]:
    """Worst size over real E in [e, next ladder step) for every ladder e, df = 2: the rule before (critical value of
    the lattice law at alpha, integer E only) and now (at alpha / REAL_E_FACTOR)."""
    rows = []
    for a in alphas:
        for e in E_LADDER:
            higher = [x for x in E_LADDER if x > e]
            grid = np.arange(e, higher[0] if higher else 2 * e, step).tolist()
            fields = {"e": e}
            for label, critical in (("before", pearson_critical(a * REAL_E_FACTOR, 2, e)),
                                    ("now", pearson_critical(a, 2, e))):  # fmt: skip
                sizes = [reference_tail(x, 2, critical) for x in grid]
                worst = int(np.argmax(sizes))
                fields |= {f"worst_e_{label}": grid[worst], f"ratio_{label}": sizes[worst] / a}
            rows.append(_entry(fields["ratio_now"] * a, a, **fields))
    return rows


def _entry(size: float, alpha: float, **fields) -> dict:
    return {**fields, "alpha": alpha, "size": size, "ratio": size / alpha}


def size_table(alphas=ALPHAS, dfs=DFS) -> dict:
    """Every family at every alpha; "worst" is the largest ratio of the rule's rows (must be <= 1)."""
    old = [_entry(size_asymptotic_two_bins(int(round(e / p)), p, a), a, expected=e, p=p)
           for a in alphas for e, p in OLD_RULE]  # fmt: skip
    binomial = [_entry(size_binomial(n, p0, a), a, trials=n, p0=p0) for a in alphas for n, p0 in BINOMIAL]
    pearson = []
    for a in alphas:
        for df in dfs:
            e = min_expected_for(a, df)
            critical = pearson_critical(a, df, e)
            by_rare = sizes_by_rare(a, df, e, critical)
            worst_m = max(range(df), key=lambda i: by_rare[i]) + 1
            # bins between ladder steps: a larger E than the one the p-value uses (all df bins rare)
            between = max(sizes_by_rare(a, df, e + step, critical)[-1] for step in (1, 2, 3, 5, 7, 11, 13, 29))
            fields = {"df": df, "e_min": e, "critical": critical, "chi2_critical": float(chi2.isf(a, df)),
                      "worst_rare_bins": worst_m, "size_all_rare": by_rare[-1], "size_one_rare": by_rare[0],
                      "size_larger_e": between}  # fmt: skip
            pearson.append(_entry(max(by_rare[-1], by_rare[worst_m - 1], between), a, **fields))
    finite = []
    for a in alphas:
        e = min_expected_for(a, 2)
        for shape in FINITE:
            expected = tuple(float(e * f) for f in shape)
            finite.append(_entry(size_multinomial(a, expected), a, expected=list(expected)))
    real = real_e_rows(alphas)
    rule_rows = binomial + pearson + finite + real
    return {
        "alphas": list(alphas),
        "old_rule_two_bins": old,
        "binomial": binomial,
        "pearson_rule": pearson,
        "pearson_rule_finite": finite,
        "pearson_rule_real_e": real,
        "worst_ratio": max(row["ratio"] for row in rule_rows),
    }
