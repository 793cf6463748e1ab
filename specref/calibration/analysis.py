"""What the sweeps measure: false-alarm rates and p-value uniformity on correct engines, power on biased ones.

False alarms. For each check kind, every (seed, scenario) p-value is one draw from the check's null law: the
false-alarm rate at a level a is the fraction with p <= a, given with its Clopper-Pearson 95% interval. The run's
family-wise verdict (Holm at the run's alpha over its T2 family, plus the T0 invariants) is one Bernoulli per seed.

Uniformity. scipy.stats.kstest of each kind's p-values against U(0, 1). The checks' p-values come from asymptotic
laws (chi-square, normal) of discrete statistics, so they are only approximately uniform: a discrete statistic
puts atoms in the p-value law. At the sample sizes used here a chi-square statistic takes far more distinct values
than the KS test can resolve (the report lists the fraction of distinct p-values; the KS resolution is about
1.36 / sqrt(n)), so a KS rejection would point at the asymptotic approximation or at a real miscalibration, not
at the atoms. Kinds whose p-value is by construction not uniform (a minimum of several) are reported as measured.

Power. For a biased engine, the fraction of seeds its run is flagged, and per designed catching check the fraction
of seeds that check alone fails at its Bonferroni alpha, compared with the design: the mutant's distance from the
expected law, estimated from counts pooled over all its seeds, gives the worst-case noncentrality
lambda = 4 n (TV - hidden_mass)^2 and so a lower bound on the check's power (stats/power.py).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import binomtest, chi2, kstest, ncx2, norm

from ..conformance import laws
from ..conformance.report import kind_of
from ..conformance.scenarios import Scenario
from ..stats import ErrorBudget
from .sweep import Sweep, untested

LEVELS = (0.05, 0.01, 0.001)
#: A kind's p-values are called non-uniform in the findings when the KS test rejects at this level.
KS_FLAG = 1e-3
FAMILY_LEVELS = (1e-3, 0.05)
CONFIDENCE = 0.95


def clopper_pearson(successes: int, trials: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    if trials == 0:
        return (0.0, 1.0)
    ci = binomtest(successes, trials).proportion_ci(confidence_level=confidence, method="exact")
    return float(ci.low), float(ci.high)


def rate(successes: int, trials: int) -> dict:
    low, high = clopper_pearson(successes, trials)
    return {
        "count": successes,
        "trials": trials,
        "rate": successes / trials if trials else math.nan,
        "ci_low": low,
        "ci_high": high,
    }


def family_wise(sw: Sweep, level: float) -> dict:
    """Seeds whose run is flagged at family-wise level `level` (Holm over the T2 family; T0 and failures always)."""
    flagged = 0
    for run in sw.runs:
        holm = ErrorBudget(level).holm(run.t2) if run.t2 else []
        flagged += bool(run.failures or run.t0_violations or not all(r.passed for r in holm))
    return {"alpha": level, **rate(flagged, len(sw.runs))}


def p_values_by_kind(sw: Sweep) -> dict[str, list[float]]:
    """check kind -> the tested p-values of every (scenario, seed) that runs it."""
    out: dict[str, list[float]] = {kind_of(name): [] for name in sw.plan.t2_names}
    for name, values in sw.p_values().items():
        out[kind_of(name)] += values[np.isfinite(values)].tolist()
    return out


def false_alarms(sw: Sweep) -> dict:
    """Per check kind: p-value counts at each level with CIs, KS against U(0, 1), and the distinct fraction."""
    by_kind = p_values_by_kind(sw)
    skipped: dict[str, int] = {}
    for run in sw.runs:
        for r in run.t2:
            skipped[kind_of(r.name)] = skipped.get(kind_of(r.name), 0) + untested(r)
    out = {}
    for kind, values in by_kind.items():
        p = np.asarray(values)
        if p.size == 0:
            out[kind] = {"n": 0, "untested": skipped.get(kind, 0)}
            continue
        ks = kstest(p, "uniform")
        out[kind] = {
            "n": int(p.size),
            "untested": skipped.get(kind, 0),
            "levels": {str(a): rate(int((p <= a).sum()), int(p.size)) for a in LEVELS},
            "ks_statistic": float(ks.statistic),
            "ks_p_value": float(ks.pvalue),
            "distinct_fraction": float(np.unique(p).size / p.size),
            "mean": float(p.mean()),
        }
    return out


def pooled_kinds(p_values: dict[str, list[float]]) -> dict:
    """All kinds' p-values of one engine together: the count at each level (is the far tail heavier?) and KS."""
    p = np.asarray([v for values in p_values.values() for v in values], dtype=float)
    if p.size == 0:
        return {"n": 0}
    ks = kstest(p, "uniform")
    return {
        "n": int(p.size),
        "levels": {str(a): rate(int((p <= a).sum()), int(p.size)) for a in (*LEVELS, 1e-4)},
        "ks_statistic": float(ks.statistic),
        "ks_p_value": float(ks.pvalue),
    }


def _plan_fields(plan) -> dict:
    """What a summary says about the plan behind a sweep."""
    return {
        "seeds": plan.seeds,
        "rows_per_scenario": plan.rows,
        "scenarios": [s.name for s in plan.scenarios],
        "skipped": plan.skipped,
        "family_size": len(plan.t2_names),
        "bonferroni_alpha": plan.bonferroni_alpha,
    }


def null_summary(sw: Sweep) -> dict:
    plan = sw.plan
    t0 = sum(sum(run.t0_violations.values()) for run in sw.runs)
    return {
        "engine": plan.engine,
        **_plan_fields(plan),
        "run_alpha": plan.alpha,
        "family_wise": [family_wise(sw, level) for level in FAMILY_LEVELS],
        "t0_violations": t0,
        "adapter_failures": sum(len(run.failures) for run in sw.runs),
        "kinds": false_alarms(sw),
        "seconds": sw.seconds,
    }


# ---- power -----------------------------------------------------------------------------------------------------


def _weighted_tv(observed: np.ndarray, expected: np.ndarray) -> float:
    """Stratum-weighted mean TV between observed frequencies [S, K] and expected laws [S, K] (as chisquare_strata)."""
    n = observed.sum(1)
    used = (n > 0) & (expected.sum(1) > 0)
    if not used.any():
        return math.nan
    freq = observed[used] / n[used, None]
    law = expected[used] / expected[used].sum(1, keepdims=True)
    tv = 0.5 * np.abs(freq - law).sum(1)
    return float((tv * n[used]).sum() / n[used].sum())


def pooled_distance(s: Scenario, kind: str, pooled: dict[str, np.ndarray]) -> float:
    """The distance a check measures (stratum-weighted TV, or |mean shift| for mean_tau), from pooled counts."""
    if kind in ("first_token_law", "batch_composition"):
        return _weighted_tv(pooled["first"], s.target)
    if kind == "point_mass_law":
        return _weighted_tv(pooled["first"], s.target)
    if kind == "correction_law":
        residual = laws.point_mass_residuals(s) if s.point_mass else laws.residuals(s)
        return _weighted_tv(pooled["correction"], residual)
    if kind == "bonus_law":
        return _weighted_tv(pooled["bonus"], s.target)
    if kind == "reject_rate":
        z = float(laws.rejection_mass(s)[0])
        observed = np.stack([pooled["rejected"], pooled["reached"] - pooled["rejected"]], 1)
        return _weighted_tv(observed, np.tile([z, 1 - z], (s.gamma, 1)))
    length = pooled["length"]  # [start state, num_draft, accepted]
    if kind in ("accepted_length_law", "ragged_law"):
        expected = [laws.length_law(s, st, nd) for st in range(length.shape[0]) for nd in range(s.gamma + 1)]
        return _weighted_tv(length.reshape(-1, s.gamma + 1), np.stack(expected))
    if kind == "mean_tau":
        counts = length[:, s.gamma, :]  # full-draft rows
        tau = np.arange(1, s.gamma + 2)
        n = counts.sum()
        expected = sum(counts[st].sum() * float(laws.length_law(s, st, s.gamma) @ tau) for st in range(len(counts)))
        return float(abs((counts.sum(0) @ tau - expected) / n)) if n else math.nan
    return math.nan  # row_independence, point_mass_law, joint_law: not pooled across seeds


def designed_power(records: list, distance: float) -> float:
    """Lower bound on one seed's power at the median n, df, hidden mass and alpha of the check's records."""
    if not records or not math.isfinite(distance):
        return math.nan
    n = float(np.median([r.n for r in records]))
    alpha = float(np.median([r.alpha for r in records]))
    if records[0].name.startswith("mean_tau"):
        beta = records[0].details.get("beta", 1e-3)
        detectable = float(np.median([r.detectable_tv for r in records]))
        standard_error = detectable / (norm.isf(alpha / 2) + norm.isf(beta))
        return float(norm.sf(norm.isf(alpha / 2) - distance / standard_error))
    df = int(np.median([r.df for r in records]))
    hidden = float(np.median([r.hidden_mass for r in records]))
    if df < 1:
        return math.nan
    return float(ncx2.sf(chi2.isf(alpha, df), df, 4.0 * n * max(0.0, distance - hidden) ** 2))


def power_summary(sw: Sweep, null: Sweep | None, caught_by: list[str], lossy: bool) -> dict:
    """Run-level power, T0 power, and per designed catching check the measured rate against the design."""
    plan = sw.plan
    runs = sw.runs
    t0_flagged = sum(bool(run.t0_violations or run.failures) for run in runs)
    t2_flagged = sum(not all(r.passed for r in ErrorBudget(plan.alpha).holm(run.t2)) for run in runs if run.t2)
    checks = []
    for s in plan.scenarios:
        for name in plan.t2_names:
            kind = kind_of(name)
            if not name.endswith(f"[{s.name}]") or kind not in caught_by:
                continue
            records = [r for run in runs for r in run.t2 if r.name == name]
            failed = sum(not r.passed for r in records)
            distance = pooled_distance(s, kind, sw.pooled.get(s.name, {})) if s.name in sw.pooled else math.nan
            floor = math.nan
            if null is not None and s.name in null.pooled:
                floor = pooled_distance(s, kind, null.pooled[s.name])
            checks.append(
                {
                    "check": name,
                    "detected": rate(failed, len(records)),
                    "distance": distance,
                    "null_distance": floor,
                    "n_median": float(np.median([r.n for r in records])) if records else math.nan,
                    "guaranteed_median": float(np.median([r.guaranteed_tv for r in records])) if records else math.nan,
                    "designed_power_lower_bound": designed_power(records, distance),
                }
            )
    t0_rates = {}
    for name in sorted({key for run in runs for key in run.t0_violations}):
        violations = sum(run.t0_violations.get(name, 0) for run in runs)
        per_row = violations / (len(runs) * plan.rows)
        t0_rates[name] = {
            "violations": violations,
            "per_row": per_row,
            "implied_power": 1.0 - (1.0 - per_row) ** plan.rows,
        }
    return {
        "engine": plan.engine,
        "lossy": lossy,
        "caught_by": caught_by,
        **_plan_fields(plan),
        "flagged": rate(sum(run.flagged for run in runs), len(runs)),
        "flagged_by_t0": rate(t0_flagged, len(runs)),
        "flagged_by_t2": rate(t2_flagged, len(runs)),
        "t0": t0_rates,
        "checks": checks,
        "seconds": sw.seconds,
    }


def findings(result: dict) -> list[str]:
    """Plain statements of where the measurements agree or disagree with the design."""
    out = []
    for null in result["null"]:
        engine = null["engine"]
        out += [f"{engine}: scenario {name} not run: {why}" for name, why in null["skipped"].items()]
        for fw in null["family_wise"]:
            verdict = "above" if fw["ci_low"] > fw["alpha"] else "consistent with"
            out.append(
                f"{engine}: runs flagged at family-wise alpha {fw['alpha']:g}: {fw['count']}/{fw['trials']} "
                f"(95% CI [{fw['ci_low']:.4f}, {fw['ci_high']:.4f}]), {verdict} the design (<= alpha)"
            )
        if null["t0_violations"] or null["adapter_failures"]:
            out.append(
                f"{engine}: {null['t0_violations']} T0 violations and {null['adapter_failures']} adapter "
                "failures on a correct engine"
            )
        pooled = null.get("all_kinds", {})
        for level, entry in pooled.get("levels", {}).items():
            if entry["ci_low"] > float(level):
                out.append(
                    f"{engine}: all kinds together: {entry['count']}/{entry['trials']} p-values at or below "
                    f"{level}, above nominal (95% CI from {entry['ci_low']:.2g})"
                )
        for kind, k in sorted(null["kinds"].items()):
            if not k["n"]:
                continue
            above = [f"{a:g}" for a in LEVELS if k["levels"][str(a)]["ci_low"] > a]
            if above:
                out.append(f"{engine}: {kind}: false-alarm rate above nominal at level {', '.join(above)}")
            if k["ks_p_value"] < KS_FLAG:
                out.append(
                    f"{engine}: {kind}: p-values not uniform (KS D = {k['ks_statistic']:.3f}, "
                    f"p = {k['ks_p_value']:.2g}, mean p = {k['mean']:.3f} against 0.5)"
                )
    below = []
    for m in result["power"]:
        below += [(m["engine"], c["check"], m["rows_per_scenario"], c) for c in m["checks"]]
    for curve in result.get("curves", []):
        below += [(curve["mutant"], curve["check"], p["rows"], p) for p in curve["points"]]
    for engine, check, rows, entry in below:
        bound = entry["designed_power_lower_bound"]
        if bound is not None and math.isfinite(bound) and entry["detected"]["ci_high"] < bound:
            out.append(
                f"{engine}: {check} at {rows} rows: measured power {entry['detected']['rate']:.3f} "
                f"(95% CI up to {entry['detected']['ci_high']:.3f}) below the design's bound {bound:.3f}"
            )
    return out
