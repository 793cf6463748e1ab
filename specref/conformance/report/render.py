"""Rendering a conformance Report: report.md, report.json and PNG plots in reports/<impl>/, and reports/index.md.

    paths = write_report(report, "reports/batched", spec="batched")
    write_index("reports")   # rebuilt from every reports/**/report.json present

report.md holds the verdict, the failures with a snippet that rebuilds the failing inputs, the table of T2 checks
(what each tests, statistic, p-value, alpha, N, detectable TV, verdict) and the T0 checks aggregated by kind.
The plots compare observed with expected frequencies inside pointwise 99.9% bands (expected +- 3.29 binomial
standard deviations): the first-token law, the accepted-length law, and the reject rate by position against Z.
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections import defaultdict
from pathlib import Path

from ...extras import MATPLOTLIB
from ...folders import earlier_files, remove_stale, replace_files
from ...stats.record import CheckId, CheckResult
from ..contracts import every_kind
from ..engine import registry
from ..engine.check_words import count_statuses, counts_line, diagnosis_words, uninformative_words
from ..engine.lossy_words import lossy_lines
from ..engine.plan import describe
from ..engine.report import RARE_EDGE, RESOLUTION_FLOOR, Report, resolution_of, resolution_words
from .edges import markdown as edge_markdown
from .plots import BAND_Z, PLOT_FILES, write_plots
from .snippets import snippet


def write_report(report: Report, out_dir: str | os.PathLike, *, spec: str | None = None, plots: bool = True) -> dict:
    """Write report.json and report.md, then (plots=True) the PNGs, into out_dir; returns {kind: path}.

    spec: how the implementation was named on the command line (`batched`, `pkg.mod:attr`, `file.py:attr`); it goes
    into report.json and into the reproduction snippets of report.md. The report is written before the plots, which
    are optional: without matplotlib, or when drawing fails, a note goes to stderr and the report stands as written.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    earlier = earlier_files(out)
    record = report.to_dict()
    record["spec"] = spec
    paths = {"json": out / "report.json", "md": out / "report.md"}
    _write_record(record, paths)
    if plots:
        drawn = _try_plots(record, out)
        if drawn:
            paths.update(drawn)
            _write_record(record, paths)  # again, now listing and showing the PNGs
    remove_stale(out, earlier, {p.name for p in paths.values()})
    return {kind: str(path) for kind, path in paths.items()}


def _write_record(record: dict, paths: dict) -> None:
    record["files"] = sorted(p.name for p in paths.values())
    replace_files(paths["json"].parent, {paths["json"].name: json.dumps(record, indent=1) + "\n",
                                         paths["md"].name: render_markdown(record)})  # fmt: skip


def _try_plots(record: dict, out: Path) -> dict[str, Path]:
    """write_plots, or {} with a note on stderr: a plot may cost its own file, never the report."""
    if not MATPLOTLIB.available:
        print(f"specref: no PNG plots in {out}: matplotlib is not installed ({MATPLOTLIB.install})", file=sys.stderr)
        return {}
    try:
        return write_plots(record, out)
    except Exception as error:  # noqa: BLE001 -- any plotting failure; the report is already on disk
        print(f"specref: no PNG plots in {out}: {type(error).__name__}: {error} (the report is complete without them)",
              file=sys.stderr)  # fmt: skip
        return {}


# --- report.md -----------------------------------------------------------------------------------------------------


def status(check: dict) -> str:
    """A report.json check's status (older records carry none: read from the result)."""
    return check.get("status") or CheckResult.from_dict(check).status


def _id(check: dict) -> CheckId:
    if check.get("kind"):
        return CheckId(check["kind"], check.get("scenario"))
    return CheckId.parse(check["name"])  # older records


def _reason(check: dict) -> str:
    if check.get("reason"):
        return check["reason"]
    details = check["details"]
    if details.get("not_tested"):
        return str(details["not_tested"]).removeprefix("not tested: ")
    return str(details.get("error") or "").removeprefix("not run: ")


def render_markdown(record: dict) -> str:
    """report.md from a report.json record (Report.to_dict() plus spec and files)."""
    checks = record["checks"]
    t2 = [c for c in checks if c["details"].get("tier") in ("T2", "none") or status(c) == "not tested"]
    t0 = [c for c in checks if c not in t2]
    failed = [c for c in checks if not c["passed"]]
    counts = count_statuses(status(c) for c in checks)
    tested_t2 = [c for c in t2 if status(c) != "not tested"]
    adapter = record["adapter"]
    rows = sum(s["rows"] for s in record["scenarios"].values())
    caps = [name for name in ("ragged", "point_mass", "uniforms") if adapter.get(name)]
    lines = [
        f"# Conformance report: `{record['impl']}`",
        "",
        f"**Verdict: {record['verdict'].upper()}** - {counts_line(counts)}; {len(checks)} checks in all "
        f"(T0 and run-level {len(t0)}, statistical T2 {len(tested_t2)} tested and "
        f"{len(t2) - len(tested_t2)} not tested).",
        "",
        f"**Resolution: {resolution_words(record['verdict'], resolution_of(checks), counts)}.** Each law check's "
        f"detectable TV is in the table below; a law check that detects no less than TV "
        f"{record.get('resolution_floor', RESOLUTION_FLOOR):g} (the resolution floor, `--resolution`) is "
        "uninformative at its N and not counted as passed.",
        "",
        *[f"- {uninformative_words(c)}" for c in checks if status(c) == "uninformative"],
        *([f"- sizing: {record['sizing']['words']}"] if (record.get("sizing") or {}).get("words") else []),
        "",
        f"- implementation: `{record.get('spec') or record['impl']}` ({adapter['kind']}; device {adapter['device']}, "
        f"dtype {adapter['dtype']}; "
        + (
            "a whole pipeline: prompts in, continuations out)"
            if adapter["kind"] == "pipeline"
            else f"capabilities: {', '.join(caps) or 'none beyond the verify contract'})"
        ),
        f"- seed {record['seed']}, {_budget(record['budget_seconds'])}, wall time {record['wall_seconds']:.1f} s, "
        f"{rows:,} rows over {len(record['scenarios'])} scenarios",
        f"- family-wise false-alarm probability {record['alpha']:g}: Bonferroni split over the {len(tested_t2)} "
        "tested T2 checks, re-verdicted by Holm; T0 checks are certain and spend none",
        "- detectable TV: not a measured deviation, but the total-variation distance (|p - p0| for rates) each check "
        "detects with probability 0.999 at its N and at its Bonferroni "
        "alpha (the run's alpha over the planned family; the Holm threshold a check is verdicted at is never "
        "smaller), bins merged by expected counts included",
        "- not tested: a check that cannot fail on this scenario (df 0, implied by a T0 check, no observations); it "
        "spends no alpha and is never counted as passed. Not run: a check that could not be computed; a failure",
    ]
    cut = [f"{name} ({sc['rows']:,} of {sc['rows_planned']:,})" for name, sc in record["scenarios"].items()
           if "rows_planned" in sc]  # fmt: skip
    if cut:
        lines.append(f"- **cut short by the time budget** (rows run of the fixed N planned): {', '.join(cut)}")
    probe = record.get("probe") or {}
    if probe:
        if probe.get("detection_probability") is None:  # float64 uniforms: 2^-53, never in practice (edges/probe.py)
            lines.append(
                f"- rare-edge probe ({probe['scenario']}): {probe['accept_tests_with_ratio_0']:,} accept "
                f"tests with p/q = 0; the event is {probe['event']}, so no detection probability is stated"
            )
        else:
            lines.append(
                f"- rare-edge probe ({probe['scenario']}): {probe['accept_tests_with_ratio_0']:,} accept "
                f"tests with p/q = 0 (target {probe['target_rows']:,}); it sees {probe['event']} at least once "
                f"with probability {probe['detection_probability']:.3g}; it catches {probe['catches']}"
            )
    if record.get("law_kept") and record.get("rule_diagnosis"):
        lines.append(f"- output law kept; acceptance does not follow {adapter['rule']!r} "
                     f"({diagnosis_words(record['rule_diagnosis'])})")  # fmt: skip
    if record.get("natural_edge") and record["verdict"] == RARE_EDGE:
        lines.append(f"- {record['natural_edge']['words']}")
    if adapter.get("notes"):
        lines.append(f"- notes: {adapter['notes']}")
    if record["verdict"] == "lossy by configuration" and (record.get("lossy") or {}).get("scenarios"):
        lines += ["", "This implementation is **lossy by configuration**: its rule does not keep the target law, by "
                  f"design. Per scenario, the TV of its output law from the target's (bias-corrected estimate, then "
                  f"the interval at alpha {record['lossy']['alpha']:g}; see docs/verdicts.md) and its accepted drafts "
                  "against exact speculative sampling:", ""]  # fmt: skip
        lines += [f"- {line}" for line in lossy_lines(record["lossy"])]
    elif record["verdict"] == "lossy by configuration":
        tv = record.get("measured_tv") or {}
        lines += ["", "This implementation is **lossy by configuration**: its rule does not keep the target law, by "
                  "design. Measured TV of the first-token law per scenario: "
                  + (", ".join(f"{k} {v:.4f}" for k, v in sorted(tv.items())) or "n/a") + "."]  # fmt: skip
    if failed:
        lines += ["", "## Failures", "", f"Caught by (most certain first): {', '.join(record['caught_by'])}.", ""]
        ordered = sorted(failed, key=lambda c: (c["details"].get("tier") != "T0", c["p_value"] or 0.0))
        shown = list({_id(c).kind: c for c in reversed(ordered)}.values())[::-1]  # first failure per kind
        for check in shown:
            lines += failure_section(check, record)
        rest = [c["name"] for c in ordered if c not in shown]
        if rest:
            lines += [f"Also failed: {', '.join(f'`{name}`' for name in rest)}.", ""]
    lines += edge_markdown(record)  # the forced and the statistical rare-edge probes (edges/probe.py)
    lines += ["", "## Statistical checks (T2)", "", _t2_table(t2), "", "## Deterministic checks (T0)", "",
              _t0_table(t0), ""]  # fmt: skip
    plots = [name for name in PLOT_FILES.values() if name in record.get("files", [])]
    if plots:
        lines += ["## Plots", "", f"Observed (dots) against expected, with pointwise bands of +-{BAND_Z} binomial "
                  "standard deviations around the expected value (vocabularies up to 64 tokens).", ""]  # fmt: skip
        lines += [f"![{name}]({name})" for name in plots] + [""]
    lines += ["## Scenarios", "", TAU_WORDS, "", "| scenario | description | g | V | rows | rows/s | tau [CI] vs rule "
              "|", "|---|---|---:|---:|---:|---:|---|"]  # fmt: skip
    for name, s in record["scenarios"].items():
        rate, gamma = s.get("rows_per_second"), _fmt(s.get("gamma"), "d")
        lines.append(f"| {name} | {_cell(s['description'])} | {gamma} | {s['vocab_size']} | {s['rows']:,} | "
                     f"{'-' if rate is None else f'{rate:,.0f}'} | {_tau(s.get('tau'))} |")  # fmt: skip
    return "\n".join(lines) + "\n"


TAU_WORDS = ("tau: mean tokens per cycle of the full-draft rows, derived from the accepted-count table "
             "accepted_length_law tests (no test, no alpha), with its Hoeffding interval (valid for every law of "
             "tau), against the rule's value.")  # fmt: skip


def _tau(tau: dict | None) -> str:
    return f"{tau['observed']:.3f} [{tau['ci'][0]:.3f}, {tau['ci'][1]:.3f}] ({tau['level']:.0%}) vs " \
        f"{tau['theory']:.3f}" if tau else "-"  # fmt: skip


def _cell(text: str) -> str:
    """Table-safe Markdown: a literal | would end the cell."""
    return str(text).replace("|", "\\|")


def _fmt(value, spec: str = ".3g") -> str:
    return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else format(value, spec)


VERDICT_WORD = {
    "passed": "pass",
    "failed": "**FAIL**",
    "uninformative": "uninformative at this N",
    "not run": "**FAIL** (not run)",
    "not tested": "not tested",
}


def _t2_table(t2: list[dict]) -> str:
    head = "| check | what it tests | statistic (kind) | df | p-value | alpha | N | detectable TV | verdict |"
    lines = [head, "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for c in t2:
        what = _cell(c.get("description") or describe(_id(c).kind))
        if status(c) == "not tested":
            lines.append(f"| `{c['name']}` | {what} | - | - | - | - | {c['n']:,} | - | not tested: "
                         f"{_cell(_reason(c))} |")  # fmt: skip
            continue
        kind = c.get("statistic_kind")
        stat = _fmt(c["statistic"], ".4g") + (f" ({_cell(kind)})" if kind else "")
        lines.append(
            f"| `{c['name']}` | {what} | {stat} | {c['df']} "
            f"| {_fmt(c['p_value'])} | {_fmt(c['alpha'], '.2g')} | {c['n']:,} | {_fmt(c['guaranteed_tv'], '.4f')} "
            f"| {VERDICT_WORD[status(c)]} |"
        )
    return "\n".join(lines)


def _t0_table(t0: list[dict]) -> str:
    by_kind: dict[str, list[dict]] = defaultdict(list)
    for c in t0:
        by_kind[_id(c).kind].append(c)
    lines = [
        "| check | what it tests | scenarios | rows checked | violations | verdict |",
        "|---|---|---:|---:|---:|---|",
    ]
    for kind, group in by_kind.items():
        words = []
        for word in ("failed", "not run"):
            bad = [c for c in group if status(c) == word]
            if bad:
                where = ", ".join(_id(c).scenario or "run" for c in bad[:6]) + (" ..." if len(bad) > 6 else "")
                words.append(f"**FAIL**{' (not run)' if word == 'not run' else ''} {len(bad)}: {where}")
        passed = sum(status(c) == "passed" for c in group)
        verdict = "; ".join(([f"pass {passed}"] if passed and words else ["pass"] if passed else []) + words)
        violations = sum(int(c["statistic"] or 0) for c in group if status(c) != "not run")
        what = _cell(group[0].get("description") or describe(kind))
        lines.append(
            f"| `{kind}` | {what} | {len(group)} | {sum(c['n'] for c in group):,} | {violations:,} | {verdict} |"
        )
    return "\n".join(lines)


def bin_label(bins: str, entry: dict) -> str:
    """A bin of a law named by what it is ("accepted count 0", "token 5 in stratum 3"), not a bare "token"."""
    label = "" if entry.get("token") is None else f"{bins or 'token'} {entry['token']}"
    if "stratum" in entry:
        label += f" (stratum: {entry['stratum']})" if label else f"stratum {entry['stratum']}"
    return label


def failure_section(check: dict, record: dict) -> list[str]:
    details = check["details"]
    cid = _id(check)
    lines = [f"### `{check['name']}`", "", check.get("description") or describe(cid.kind)]
    if details.get("tier") == "T2":
        kind = check.get("statistic_kind") or "statistic"
        lines.append(
            f"p = {_fmt(check['p_value'])} against alpha {_fmt(check['alpha'], '.2g')} ({kind} "
            f"{_fmt(check['statistic'], '.4g')}, df {check['df']}, N {check['n']:,})."
        )
        bins = registry.get(cid.kind).bins if cid.kind in every_kind() else "token"
        for entry in details.get("impossible", [])[:5]:
            lines.append(f"- impossible {bin_label(bins, entry)} observed {entry['observed']} times (expected 0)")
        for key, label in (("over", "over-represented"), ("under", "under-represented")):
            for entry in details.get(key, [])[:3]:
                lines.append(f"- {cid.kind}: {label}: {bin_label(bins, entry)} observed {entry['observed']}, "
                             f"expected {entry['expected']:.4g} (residual {entry['residual']:+.2f})")  # fmt: skip
        if "rate_by_position" in details:
            rates = ", ".join(_fmt(r, ".4f") for r in details["rate_by_position"])
            lines.append(f"- reject rate by position: {rates}; Z = {details['z']:.4f}")
        scenario = cid.scenario
        calls = record["scenarios"].get(scenario, {}).get("calls") or {}
        where = calls.get("first") and {**calls["first"], "row": None}  # absent in reports of older versions
        if where and "joint" not in record["scenarios"].get(scenario, {}).get("features", []):
            first, last = calls["chunks"]
            lines.append(f"Its counts came from {calls['count']} calls (chunks {first} to {last}, {calls['rows']:,} "
                         "rows); the snippet rebuilds the first of them.")  # fmt: skip
    else:
        count = check["statistic"]
        error = details.get("error")
        example = details.get("example")
        if details.get("tier") == "not run":
            lines.append(f"Not run: {error.removeprefix('not run: ')}.")
        elif error:
            lines.append(f"The adapter failed: `{error}`.")
        elif count is not None:
            lines.append(f"{int(count):,} violations" + (f" in {check['n']:,} rows." if check["n"] else "."))
        where = example if isinstance(example, dict) and "scenario" in example else None
        if isinstance(details.get("call"), dict):  # the call that raised, hung or crashed
            where = {**details["call"], "row": None}
            lines.append(f"The call: scenario {where['scenario']}, chunk {where['chunk']}, {where['rows']} rows, "
                         f"generator seed {where['generator_seed']}.")  # fmt: skip
        elif where:
            drafts = f", drafts {where['draft_tokens']}" if "draft_tokens" in where else ""  # a pipeline has none
            drafts += f" (num_draft {where['num_draft']})" if "num_draft" in where else ""
            lines.append(f"First violation: scenario {where['scenario']}, chunk {where['chunk']}, row "
                         f"{where.get('row')}: output {where['output']}{drafts}.")  # fmt: skip
        elif isinstance(example, dict):
            lines.append(f"Example: `{json.dumps(example)}`")
    code = snippet(record, where, details) if where else None
    if code:
        lines += ["", "Reproduce:", "", "```python", code, "```"]
    return lines + [""]


# --- reports/index.md ----------------------------------------------------------------------------------------------


def write_index(root: str | os.PathLike) -> Path:
    """reports/index.md: one line per report.json found under root, built-ins first, then mutants."""
    root = Path(root)
    records = []
    for path in sorted(root.rglob("report.json")):
        try:
            record = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if "verdict" in record and "checks" in record:
            records.append((path.parent.relative_to(root), record))
    lines = ["# Conformance reports", "", f"{len(records)} implementation runs, rebuilt from the report.json files "
             "under this folder. Mutants are deliberately wrong verifiers (see mutants.md).", ""]  # fmt: skip
    for title, group in (
        ("Implementations", [r for r in records if r[0].parts[0] != "mutants"]),
        ("Mutants", [r for r in records if r[0].parts[0] == "mutants"]),
    ):
        if not group:
            continue
        lines += [f"## {title}", "", "| implementation | verdict | checks passed (of all) | caught by | rows | wall s "
                  "| budget s | seed |", "|---|---|---:|---|---:|---:|---:|---:|"]  # fmt: skip
        for folder, r in group:
            checks = r["checks"]
            passed = sum(status(c) == "passed" for c in checks)
            rows = sum(s["rows"] for s in r["scenarios"].values())
            caught = ", ".join(r.get("caught_by", [])[:3]) or "-"
            lines.append(
                f"| [{r['impl']}]({folder.as_posix()}/report.md) | {r['verdict']} | {passed}/{len(checks)} | {caught} "
                f"| {rows:,} | {r['wall_seconds']:.0f} | {r['budget_seconds'] or '-'} | {r['seed']} |"
            )
        lines.append("")
    path = root / "index.md"
    root.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))
    return path


def rebuild(root: str | os.PathLike) -> Path:
    """Re-render every report.md under root from its report.json (after a change of this module), then index.md."""
    for path in Path(root).rglob("report.json"):
        record = json.loads(path.read_text())
        if "verdict" in record and "checks" in record:
            path.with_name("report.md").write_text(render_markdown(record))
    return write_index(root)


def _budget(seconds) -> str:
    return "no time budget (fixed rows)" if seconds is None else f"budget {seconds:g} s"


__all__ = ["failure_section", "rebuild", "render_markdown", "write_index", "write_plots", "write_report"]


if __name__ == "__main__":  # python -m specref.conformance.render [reports]
    print(rebuild(sys.argv[1] if len(sys.argv) > 1 else "reports"))
