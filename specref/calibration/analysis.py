"""What the sweeps measure: false-alarm rates and p-value uniformity on correct engines, power on biased ones.

False alarms. For each check kind, every (seed, scenario) p-value is one draw from the check's null law: the
false-alarm rate at a level a is the fraction with p <= a, given with its Clopper-Pearson 95% interval. The run's
family-wise verdict (Holm at the run's alpha over its T2 family, plus the T0 invariants) is one Bernoulli per seed.

Uniformity. The design claims validity, P(p <= a) <= a, not uniformity: exact binomial tests and the far-tail
Pearson rule are conservative on purpose. So the finding is the one-sided KS test (scipy.stats.kstest,
alternative="greater": the p-values' CDF lies above the uniform one somewhere, i.e. too many small p-values); the
two-sided KS statistic is listed as a description of the shape. The one-sided KS p-values of all kinds and engines
are one family, corrected by Holm at KS_FLAG before any is called a finding.

Power. For a biased engine, the fraction of seeds its run is flagged, and per designed catching check the fraction
of seeds that check alone fails at its Bonferroni alpha, compared with the design: the mutant's distance from the
expected law, estimated from counts pooled over all its seeds, gives the worst-case noncentrality
lambda = 4 n (TV - hidden_mass)^2 and so a lower bound on the check's power (stats/power.py).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import binomtest, chi2, kstest, ncx2

from ..conformance.chain.scenarios import Scenario
from ..conformance.engine import registry
from ..conformance.engine.check_words import kind_of
from ..stats import ErrorBudget
from ..stats.power import binomial_power, rule_critical
from ..stats.record import CheckId
from .sweep import Sweep, untested

LEVELS = (0.05, 0.01, 0.001)
#: Family-wise level of the KS findings (Holm over every kind of every engine).
KS_FLAG = 1e-3
#: The run-level false-alarm rate is called consistent with the design when its 95% upper bound is at most
#: this multiple of the run's alpha (3e-3 at alpha 1e-3: what 2000 seeds can resolve).
ACCEPT_FACTOR = 3.0
FAMILY_LEVELS = (1e-3, 1e-2, 0.05)
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
        holm = ErrorBudget(level).holm(run.t2, family_size=len(sw.plan.t2_names)) if run.t2 else []
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
        anti = kstest(p, "uniform", alternative="greater")
        out[kind] = {
            "n": int(p.size),
            "untested": skipped.get(kind, 0),
            "levels": {str(a): rate(int((p <= a).sum()), int(p.size)) for a in LEVELS},
            "ks_statistic": float(ks.statistic),
            "ks_p_value": float(ks.pvalue),
            "ks_anti_statistic": float(anti.statistic),
            "ks_anti_p_value": float(anti.pvalue),
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
    anti = kstest(p, "uniform", alternative="greater")
    return {
        "n": int(p.size),
        "levels": {str(a): rate(int((p <= a).sum()), int(p.size)) for a in (*LEVELS, 1e-4)},
        "ks_statistic": float(ks.statistic),
        "ks_p_value": float(ks.pvalue),
        "ks_anti_statistic": float(anti.statistic),
        "ks_anti_p_value": float(anti.pvalue),
    }


def _plan_fields(plan) -> dict:
    """What a summary says about the plan behind a sweep."""
    return {
        "seeds": plan.seeds,
        "rows_per_scenario": dict(plan.rows),
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
        "seconds_per_run": float(np.mean([r.seconds for r in sw.runs])) if sw.runs else math.nan,
    }


# ---- power -----------------------------------------------------------------------------------------------------


def _tv(observed, expected) -> float:
    observed, expected = np.asarray(observed, float), np.asarray(expected, float)
    if observed.sum() <= 0 or expected.sum() <= 0:
        return math.nan
    return float(0.5 * np.abs(observed / observed.sum() - expected / expected.sum()).sum())


def pooled_distance(s: Scenario, kind: str, pooled: dict) -> float:
    """The distance a check measures, from the report series pooled over seeds (sweep._pool): TV of the first-token
    law or of the full-draft length law, the reached-weighted |rate - Z| of the reject rate; NaN for the others."""
    plot = registry.get(kind).plot
    if plot == "first" and "first.observed" in pooled:
        return _tv(pooled["first.observed"], pooled["first.expected"])
    if kind == "accepted_length_law" and "length.observed" in pooled:
        return _tv(pooled["length.observed"], pooled["length.expected"])
    if kind == "reject_rate" and "reject.reached" in pooled:
        reached, rejected = pooled["reject.reached"], pooled["reject.rejected"]
        used = reached > 0
        return float((np.abs(rejected[used] / reached[used] - pooled["reject.z"]) * reached[used]).sum()
                     / reached[used].sum())  # fmt: skip
    return math.nan


def designed_power(records: list, distance: float) -> float:
    """Lower bound on one seed's power at the median n, df, hidden mass and alpha of the check's records."""
    records = [r for r in records if r.tested]
    if not records or not math.isfinite(distance):
        return math.nan
    n = float(np.median([r.n for r in records]))
    alpha = float(np.median([r.details.get("holm", {}).get("bonferroni_alpha", r.alpha) for r in records]))
    return POWER[registry.get(records[0].id.kind).power](records, n, alpha, distance)


def _binomial_positions_power(records: list, n: float, alpha: float, distance: float) -> float:
    """Exact binomial per position, Bonferroni over m positions: the power at the position with fewest trials."""
    positions = records[0].details.get("positions", [])
    if not positions:
        return math.nan
    m = len(positions)
    first = min(positions, key=lambda entry: entry["trials"])
    p0 = first["p0"]
    sides = [p0 + sign * distance for sign in (+1, -1) if 0 <= p0 + sign * distance <= 1]
    return min(binomial_power(first["trials"], p0, p, alpha / m) for p in sides) if sides else math.nan


def _chisquare_power(records: list, n: float, alpha: float, distance: float) -> float:
    df = int(np.median([r.df for r in records]))
    hidden = float(np.median([r.hidden_mass for r in records]))
    if df < 1:
        return math.nan
    critical = rule_critical(alpha, df) if df >= 2 else float(chi2.isf(alpha, 1))
    return float(ncx2.sf(critical, df, 4.0 * n * max(0.0, distance - hidden) ** 2))


#: The designed power of each model a check kind declares (registry.CheckKind.power).
POWER = {"binomial positions": _binomial_positions_power, "chi-square": _chisquare_power}


def power_summary(sw: Sweep, null: Sweep | None, caught_by: list[str], lossy: bool) -> dict:
    """Run-level power, T0 power, and per designed catching check the measured rate against the design."""
    plan = sw.plan
    runs = sw.runs
    t0_flagged = sum(bool(run.t0_violations or run.failures) for run in runs)
    t2_flagged = sum(not all(r.passed for r in ErrorBudget(plan.alpha).holm(run.t2, family_size=len(plan.t2_names)))
                     for run in runs if run.t2)  # fmt: skip
    checks = []
    for s in plan.scenarios:
        for name in plan.t2_names:
            kind = kind_of(name)
            if not name.endswith(f"[{s.name}]") or kind not in caught_by:
                continue
            records = [r for run in runs for r in run.t2 if r.name == name]
            bonferroni = [r.details.get("holm", {}).get("bonferroni_alpha", r.alpha) for r in records]
            failed = sum(r.tested and r.p_value <= a for r, a in zip(records, bonferroni))
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
        rows = plan.rows.get(CheckId.parse(name).scenario, max(plan.rows.values()))
        per_row = violations / (len(runs) * rows)
        t0_rates[name] = {
            "violations": violations,
            "per_row": per_row,
            "implied_power": 1.0 - (1.0 - per_row) ** rows,
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
    ks_family = []  # (engine, kind, one-sided KS p-value, entry)
    for null in result["null"]:
        engine = null["engine"]
        out += [f"{engine}: scenario {name} not run: {why}" for name, why in null["skipped"].items()]
        design = f"the sweep's design ({result.get('settings', {}).get('rows')} rows per scenario)"
        for fw in null["family_wise"]:
            accept = ACCEPT_FACTOR * fw["alpha"]
            if fw["ci_high"] <= fw["alpha"]:
                verdict = f"validated on {design}: the 95% upper bound is at or below the nominal {fw['alpha']:g}"
            elif fw["ci_low"] > fw["alpha"]:
                verdict = f"ABOVE the design on {design}: the 95% lower bound exceeds alpha"
            elif fw["ci_high"] <= accept:
                verdict = (f"consistent with {design} (95% upper bound <= {accept:g}, {ACCEPT_FACTOR:g} x alpha) but "
                           f"not shown at or below the nominal {fw['alpha']:g}: more seeds are needed")  # fmt: skip
            else:
                verdict = f"not confirmed on {design}: the 95% upper bound exceeds {accept:g}; more seeds are needed"
            out.append(
                f"{engine}: runs flagged at family-wise alpha {fw['alpha']:g}: {fw['count']}/{fw['trials']} "
                f"(95% CI [{fw['ci_low']:.4f}, {fw['ci_high']:.4f}]), {verdict}"
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
            if "ks_anti_p_value" in k:
                ks_family.append((engine, kind, k["ks_anti_p_value"], k))
    # Holm over the one-sided KS tests of every kind and engine
    m = len(ks_family)
    for rank, (engine, kind, p, k) in enumerate(sorted(ks_family, key=lambda entry: entry[2])):
        if p > KS_FLAG / (m - rank):
            break
        out.append(
            f"{engine}: {kind}: too many small p-values (one-sided KS D+ = {k['ks_anti_statistic']:.3f}, "
            f"p = {p:.2g}, significant after Holm over {m} KS tests at {KS_FLAG:g})"
        )
    below = []
    for m in result["power"]:
        below += [(m["engine"], c["check"], "fixed", c) for c in m["checks"]]
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
