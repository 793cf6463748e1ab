"""reports/calibration.md and calibration.json; the plots they link are drawn by figures.py."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ..stats.record import json_safe
from .analysis import LEVELS
from .figures import CURVES_PNG, POWER_PNG, QQ_PNG


def _ci(entry: dict) -> str:
    return f"{entry['count']}/{entry['trials']} = {entry['rate']:.4f} [{entry['ci_low']:.4f}, {entry['ci_high']:.4f}]"


def _f(value: float, spec: str = ".3g") -> str:
    return "n/a" if value is None or (isinstance(value, float) and not math.isfinite(value)) else format(value, spec)


def _rows(rows) -> str:
    if isinstance(rows, dict):
        default = rows.get("default")
        others = ", ".join(f"{k} {v:,}" for k, v in rows.items() if k != "default" and v != default)
        return f"{default:,}" + (f" ({others})" if others else "") if default is not None else others
    return f"{rows:,}"


def _sizes_section(result: dict) -> list[str]:
    table = result.get("sizes") or {}
    if not table:
        return []
    lines = [
        "## Exact size of every test family at the levels a run uses",
        "",
        "A run splits alpha 1e-3 over its checks (~1.4e-5 each; Holm's thresholds reach up to alpha), so the levels "
        "are 1e-4 down to 1e-7. Each size is computed exactly (enumeration or an exact lattice law; "
        "`specref.stats.size`), nothing is simulated; ratio = size / alpha must be <= 1. The same cases are asserted "
        "by the T1 test `properties/test_stats_size.py`. Worst ratio of the rules in use: "
        f"**{table['worst_ratio']:.4f}**.",
        "",
        "Pearson against chi2(1) on 2 bins, the rule before (for comparison; now replaced by the exact binomial):",
        "",
        "| alpha | rare-bin expected | rare-bin p | exact size | ratio |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {r['alpha']:g} | {r['expected']} | {r['p']} | {r['size']:.3g} | {r['ratio']:.2f} |"
              for r in table["old_rule_two_bins"]]  # fmt: skip
    lines += ["", "Exact binomial test (2-bin laws; reject rate per position, Bonferroni over positions):", "",
              "| alpha | trials | p0 | exact size | ratio |", "|---|---|---|---|---|"]  # fmt: skip
    lines += [f"| {r['alpha']:g} | {r['trials']:,} | {r['p0']} | {r['size']:.3g} | {r['ratio']:.3f} |"
              for r in table["binomial"]]  # fmt: skip
    lines += [
        "",
        "Pearson chi-square, far-tail rule (df >= 2): bins >= E_min(alpha, df), p-value from the law of Q_df / E. "
        "Size at the rule's critical value when m bins hold E_min and one bin is infinite (m = 1..df; the worst m "
        "is listed), and when all df bins hold a larger E than the ladder step:",
        "",
        "| alpha | df | E_min | critical (chi2.isf) | worst m | size, m = df | size, m = 1 | size, larger E "
        "| worst size | ratio |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['alpha']:g} | {r['df']} | {r['e_min']} | {r['critical']:.2f} ({r['chi2_critical']:.2f}) "
        f"| {r['worst_rare_bins']} | {r['size_all_rare']:.3g} | {r['size_one_rare']:.3g} | {r['size_larger_e']:.3g} "
        f"| {r['size']:.3g} | {r['ratio']:.4f} |"
        for r in table["pearson_rule"]
    ]
    lines += ["", "The same rule on 3-bin multinomials at finite N, enumerated exactly:", "",
              "| alpha | expected counts | exact size | ratio |", "|---|---|---|---|"]  # fmt: skip
    lines += [f"| {r['alpha']:g} | {', '.join(f'{x:g}' for x in r['expected'])} | {r['size']:.3g} | {r['ratio']:.3f} |"
              for r in table["pearson_rule_finite"]]  # fmt: skip
    lines += [
        "",
        "The same rule at real (non-integer) expected counts, df = 2: two bins at E, one infinite bin, E on a "
        "0.05 grid over each ladder span (before: the lattice law's critical value, integer E only):",
        "",
        "| alpha | ladder E | worst E before | ratio before | worst E now | ratio now |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['alpha']:g} | {r['e']} | {r['worst_e_before']:.2f} | {r['ratio_before']:.3f} "
        f"| {r['worst_e_now']:.2f} | {r['ratio_now']:.3f} |"
        for r in table.get("pearson_rule_real_e", [])
    ]
    return lines + [""]


def write_json(result: dict, out: Path) -> Path:
    path = out / "calibration.json"
    path.write_text(json.dumps(json_safe(result), indent=1) + "\n")
    return path


#: Which design the numbers of this report validate (issue 33): the sweep's own fixed rows, not a run's.
DESIGN_VALIDATED = (
    "**Which design these numbers validate.** The false-alarm counts under Findings and the per-kind tables are for "
    "the design of this sweep: {rows} rows per scenario per seed (the large-vocabulary scenarios fewer, as listed), "
    "run alpha split over the planned family. `specref conform` does not run that design: a default run allocates "
    "its rows to bring every law check to the resolution floor (TV 0.1) and a `--tv T` run sizes every check to T, "
    "from 10^3 to 10^7 rows per scenario. The family-wise rate at those sizes is measured by `python -m "
    'specref.calibration.design` and summarised under "On the design users run" (the full tables, seeds and rows: '
    "reports/calibration-design.md)."
)


def _names(scenarios: list[str]) -> str:
    return ", ".join(scenarios) if len(scenarios) < 3 else f"{len(scenarios)} scenarios"


def _design_section(out: Path) -> list[str]:
    """The family-wise rates on the design users run, rendered from the seeds design.py saved under out."""
    from .design import BY_SIZE, STORE, WHAT
    from .design import render as render_design

    store = out / STORE.name
    lines = ["## On the design users run", ""]
    if not store.is_dir():
        return lines + [f"Not measured here: no saved seeds in {STORE.name}/ beside this report.", ""]
    for r in render_design(store, by_size=BY_SIZE):
        parts = r["family_wise"][0]["groups"]
        seeds = ", ".join(f"{g['seeds']:,} ({_names(g['scenarios'])}{', bounded by size' * (g['bound'] == 'size')})"
                          for g in parts)  # fmt: skip
        left_out = f" Not in this family (no saved seeds): {', '.join(r['excluded'])}." if r["excluded"] else ""
        lines.append(f"- {WHAT.get(r['design'], r['design'])} Family of {r['family_size']} T2 checks; seeds: "
                     f"{seeds}; {r['rows_per_seed']:,} rows per seed.{left_out}")  # fmt: skip
        for f in r["family_wise"]:
            state = ("validated: the 95% upper bound is at or below the nominal rate" if f["upper_at_or_below_level"]
                     else "not shown: the 95% upper bound is above the nominal rate")  # fmt: skip
            lines.append(f"  - at {f['level']:g}: rate {f['rate']:.4f}, 95% upper bound {f['upper_95']:.4f}, {state}")
    return lines + [""]


def write_markdown(result: dict, out: Path) -> Path:
    lines = [
        "# Calibration of the conformance checks",
        "",
        "Generated by `nox -s calibration` (`python -m specref.calibration "
        + " ".join(result["argv"])
        + f"`) in {result['wall_seconds']:.0f} s. Every seed is one ordinary `specref.conformance.run` (its plan, "
        "budget split, T0 invariants, Holm and verdict) with a fixed number of rows per scenario. Rows given in "
        f"{result['settings'].get('dtype', 'float32')}: every adapter asked for that dtype, so the harness gave it "
        "rows exact in it, each summing to exactly 1, and held it to their law.",
        "",
        DESIGN_VALIDATED.format(rows=result["settings"].get("rows")),
        "",
        "## Design statement checked",
        "",
        "- False alarms: each T2 check rejects a correct engine with probability <= its alpha, at the levels a run "
        "really uses (exact sizes below); a run (Holm over its tested T2 checks at alpha "
        f"{result['run_alpha']:g}, plus the T0 invariants, which a correct engine never violates) is flagged with "
        "probability <= that alpha. Checks that cannot fail (tested=False) spend no alpha and are counted apart.",
        "- P-values of a check on a correct engine are valid: P(p <= a) <= a (conservative tests allowed).",
        "- Power: a chi-square check on n draws at level alpha detects every law at stratum-weighted TV >= d + "
        "hidden_mass with probability >= ncx2.sf(c, df, 4 n d^2), c the far-tail rule's critical value (worst case "
        "over TV = d); 2-bin laws and rates state the exact binomial power. At power 0.999 that is the record's "
        "guaranteed_tv.",
        "",
    ]
    lines += ["## Findings", ""] + [f"- {line}" for line in result["findings"]] + [""]
    lines += _design_section(out)
    lines += _sizes_section(result)
    for null in result["null"]:
        lines += _null_section(null)
    lines += _power_section(result)
    lines += _curves_section(result)
    lines += [
        "## How to read this",
        "",
        "- Intervals are Clopper-Pearson (exact) 95% intervals (scipy.stats.binomtest(...).proportion_ci).",
        "- Each kind pools its p-values over seeds and over the scenarios that run it; p-values of different "
        "scenarios come from independent generator seeds.",
        "- KS: the design claims validity (P(p <= a) <= a), not uniformity: exact binomial tests and the far-tail "
        "Pearson rule are conservative on purpose. The finding is the one-sided KS test (D+: too many small "
        "p-values), Holm-corrected over every kind and engine; the two-sided KS is listed to describe the shape.",
        "- The run-level verdict reads the 95% upper bound: consistent with the design when it is <= 3 x alpha.",
        "- Power 'designed lower bound' plugs the mutant's distance, estimated from counts pooled over all its "
        "seeds (the 'null distance' column is the same estimate on the correct batched engine, the estimator's "
        "noise floor), into the worst-case noncentral chi-square at the check's median n, df, hidden mass and "
        "Bonferroni alpha. Measured power at or above it agrees with the design; a bound near 0 means the design "
        "promises nothing at this N.",
        "",
        f"Plots: [{QQ_PNG}]({QQ_PNG}), [{POWER_PNG}]({POWER_PNG}), [{CURVES_PNG}]({CURVES_PNG})."
        if not result.get("plots_skipped")
        else f"Plots: skipped ({result['plots_skipped']}).",
    ]
    path = out / "calibration.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _null_section(null: dict) -> list[str]:
    lines = [
        f"## False alarms: `{null['engine']}` engine, {null['seeds']} seeds",
        "",
        f"{_rows(null['rows_per_scenario'])} rows per scenario per seed; scenarios {', '.join(null['scenarios'])}; "
        f"T2 family of {null['family_size']} checks (Bonferroni alpha {null['bonferroni_alpha']:.2g}); "
        f"{null['seconds']:.0f} s ({null.get('seconds_per_run', float('nan')):.2f} s per run).",
        "",
    ]
    if null["skipped"]:
        lines += ["Skipped scenarios: " + "; ".join(f"{k}: {v}" for k, v in null["skipped"].items()), ""]
    lines += ["| run-level family-wise alpha | runs flagged | rate [95% CI] |", "|---|---|---|"]
    for fw in null["family_wise"]:
        lines.append(
            f"| {fw['alpha']:g} | {fw['count']}/{fw['trials']} | {fw['rate']:.4f} "
            f"[{fw['ci_low']:.4f}, {fw['ci_high']:.4f}] |"
        )
    lines += ["", f"T0 violations: {null['t0_violations']}; adapter failures: {null['adapter_failures']}.", ""]
    pooled = null.get("all_kinds", {})
    if pooled.get("n"):
        levels = "; ".join(f"p <= {level}: {_ci(entry)}" for level, entry in pooled["levels"].items())
        lines += [
            f"All kinds together ({pooled['n']} p-values): {levels}; KS D = {pooled['ks_statistic']:.3f}, "
            f"p = {pooled['ks_p_value']:.3g}.",
            "",
        ]
    lines += [
        "| check kind | p-values (not tested) | "
        + " | ".join(f"p <= {a:g}: rate [95% CI]" for a in LEVELS)
        + " | KS D | KS p | one-sided KS D+ | D+ p | distinct | mean p |",
        "|---|---|" + "---|" * (len(LEVELS) + 6),
    ]
    for kind, k in sorted(null["kinds"].items()):
        if k["n"] == 0:
            lines.append(f"| {kind} | 0 ({k['untested']}) |" + " |" * (len(LEVELS) + 6))
            continue
        cells = [
            f"{k['levels'][str(a)]['count']} = {k['levels'][str(a)]['rate']:.4f} "
            f"[{k['levels'][str(a)]['ci_low']:.4f}, {k['levels'][str(a)]['ci_high']:.4f}]"
            for a in LEVELS
        ]
        lines.append(
            f"| {kind} | {k['n']} ({k['untested']}) | "
            + " | ".join(cells)
            + f" | {k['ks_statistic']:.3f} | {k['ks_p_value']:.3g} | {k.get('ks_anti_statistic', float('nan')):.3f} "
            f"| {k.get('ks_anti_p_value', float('nan')):.3g} | {k['distinct_fraction']:.3f} "
            f"| {k['mean']:.3f} |"
        )
    return lines + [""]


def _power_section(result: dict) -> list[str]:
    lines = [
        f"## Power on biased samplers (run alpha {result['run_alpha']:g})",
        "",
        "| biased sampler | seeds | rows/scenario | family | runs flagged [95% CI] | by T0 "
        "| by T2 alone (Holm) [95% CI] |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in result["power"]:
        lossy = " (lossy by configuration)" if m["lossy"] else ""
        lines.append(
            f"| `{m['engine']}`{lossy} | {m['seeds']} | {_rows(m['rows_per_scenario'])} | {m['family_size']} "
            f"| {_ci(m['flagged'])} | {m['flagged_by_t0']['count']}/{m['flagged_by_t0']['trials']} "
            f"| {_ci(m['flagged_by_t2'])} |"
        )
    lines += [
        "",
        "Per designed catching check (at its Bonferroni alpha, one seed = one trial):",
        "",
        "| biased sampler | check | detected [95% CI] | distance (pooled) | null distance | median n "
        "| guaranteed TV @0.999 | designed lower bound |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m in result["power"]:
        for c in m["checks"]:
            lines.append(
                f"| `{m['engine']}` | {c['check']} | {_ci(c['detected'])} | {_f(c['distance'], '.4f')} "
                f"| {_f(c['null_distance'], '.4f')} | {_f(c['n_median'], '.0f')} "
                f"| {_f(c['guaranteed_median'], '.4f')} | {_f(c['designed_power_lower_bound'], '.4f')} |"
            )
        for name, t0 in m["t0"].items():
            lines.append(
                f"| `{m['engine']}` | {name} (T0) | {t0['violations']} violations "
                f"| {t0['per_row']:.2e} per row | | | | implied {t0['implied_power']:.4f} |"
            )
    return lines + [""]


def _curves_section(result: dict) -> list[str]:
    if not result.get("curves"):
        return []
    lines = [
        "## Power curves: single checks against the design",
        "",
        "Each point: the check alone at the main run's Bonferroni alpha, one seed = one trial; the sampler's "
        "distance is the pooled estimate from the power sweep above.",
        "",
        "| biased sampler | check | distance | rows | median n | detected [95% CI] | guaranteed TV @0.999 "
        "| designed lower bound |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for curve in result["curves"]:
        for p in curve["points"]:
            lines.append(
                f"| `{curve['mutant']}` | {curve['check']} | {curve['distance']:.4f} | {p['rows']:,} "
                f"| {p['n_median']:.0f} | {_ci(p['detected'])} | {_f(p['guaranteed_median'], '.4f')} "
                f"| {_f(p['designed_power_lower_bound'], '.4f')} |"
            )
    return lines + [""]
