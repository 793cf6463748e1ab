"""The outcome of one conformance run: every check, the verdict, and the data the rendered report plots."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

from ...stats import CheckResult, ErrorBudget
from ...stats.record import json_safe
from . import precision, registry
from .check_words import (
    check_record,
    count_statuses,
    counts_line,
    detection_words,
    diagnosis_words,
    failure_lines,
    family,
    uninformative_lines,
)
from .contract import Contract
from .lossy_words import lossy_lines
from .natural_edge import explained_by_edge
from .plan import LAW, RULE
from .sizing import BETA

CONFORMING, NON_CONFORMING, LOSSY = "conforming", "non-conforming", "lossy by configuration"
#: Only the forced edge probe failed (family "edge", edges/probe.py): non-conforming by default (exit 1),
#: accepted with `--allow-edge`.
RARE_EDGE = "non-conforming: rare edge"
#: The verdict of a run stopped by SIGINT (Ctrl-C): a partial report, exit 130 on the command line.
INTERRUPTED = "interrupted (partial report)"
EDGE = registry.EDGE


def lossless(rule: str) -> str:
    """The verdict of a verifier that keeps the target law and follows its declared rule other than exact."""
    return f"lossless (declared rule {rule})"


#: The power every detectable distance is stated at (sizing.BETA: the checks' own beta).
POWER = 1 - BETA
#: A law check whose detectable TV at its N is above this is "uninformative at this N" (default of --resolution).
RESOLUTION_FLOOR = 0.1


def is_law_check(record: dict) -> bool:
    """A T2 check of the law family (its distance is TV): the checks the run's resolution is stated over."""
    return record.get("family") == LAW and (record.get("details") or {}).get("tier") == "T2"


def resolution_of(checks: list[dict]) -> float | None:
    """The largest detectable TV among the passed law checks (report.json check records), None with none."""
    values = [c["detectable_tv"] for c in checks if is_law_check(c) and c.get("status") == "passed"]
    values = [v for v in values if v is not None]
    return max(values) if values else None


def resolution_words(verdict: str, resolution: float | None, counts: dict[str, int], upper: bool = False) -> str:
    """The verdict with what it rules out: "conforming: no deviation above TV x in any law check (power 0.999)"."""
    if resolution is None:
        said = "no law check passed, so no deviation of the output law is ruled out"
    else:
        said = f"no deviation above TV {resolution:.3g} in any law check (power {POWER:g})"
    uninformative = counts.get("uninformative", 0)
    if uninformative:
        said += f"; {uninformative} check(s) uninformative at this N, not counted as passed"
    shown = verdict.upper() if upper else verdict
    if verdict == CONFORMING or verdict.startswith("lossless"):
        return f"{shown}: {said}"
    return f"{shown} (resolution of the passed law checks: {said})"


@dataclass
class Report:
    adapter: object  # the adapter, with its declared capabilities (name, rule, lossy, dtype, device, ...)
    contract: Contract  # the contract it was checked under (engine/contract.py): not recorded but by name
    seed: int
    budget_seconds: float | None  # None: fixed rows, no time cap
    alpha: float
    checks: list[CheckResult] = field(default_factory=list)
    scenarios: dict = field(default_factory=dict)
    plots: dict = field(default_factory=dict)  # scenario -> observed/expected series (small vocabularies)
    wall_seconds: float = 0.0
    verdict: str = ""
    rule_diagnosis: dict = field(default_factory=dict)  # other rules' fit and the acceptance ratio (see runner)
    probe: dict = field(default_factory=dict)  # the rare-edge probe: tests run and detection probability
    natural_edge: dict = field(default_factory=dict)  # zero-probability tokens a named edge explains (natural_edge.py)
    interrupted: str = ""  # why the run stopped before its end (SIGINT): the report is partial
    lossy: dict = field(default_factory=dict)  # a lossy adapter's TV intervals and acceptance (Contract.lossy_measure)
    timings: dict = field(default_factory=dict)  # where the run's time went (engine/timings.py)
    resolution_floor: float = RESOLUTION_FLOOR  # law checks detecting no less than this are uninformative
    family_size: int = 0  # the planned T2 family Holm runs over (alpha / family_size: each check's Bonferroni alpha)
    sizing: dict = field(default_factory=dict)  # how N was chosen (plan_rows.py): mode, tv, expected seconds, rows

    def mark_interrupted(self, why: str) -> None:
        """A partial report: the verdict says so, whatever the checks reached before the interrupt show."""
        self.interrupted, self.verdict = why, INTERRUPTED

    def add_t0(self, scenario: str, results: list[CheckResult]) -> None:
        for r in results:
            name = r.name if "[" in r.name else f"{r.name}[{scenario}]"
            self.checks.append(dataclasses.replace(r, name=name))

    def add_t2(self, scenario: str, results: list[CheckResult], series: dict | None = None) -> None:
        for r in results:
            tier = "none" if r.details.get("tier") == "none" else "T2"  # "none": planned out (plan.py), no alpha
            self.checks.append(dataclasses.replace(r, details={**r.details, "tier": tier, "family": family(r)}))
        if series is not None:  # the contract decides which scenarios are plotted (Contract.plot_series)
            self.plots[scenario] = series

    def finish(self, budget: ErrorBudget, wall_seconds: float, family_size: int) -> None:
        """Holm over the T2 family of family_size planned checks (fixed before data: ErrorBudget.holm), then the
        verdict: contract, then law, then rule (plan.py)."""
        self.family_size = family_size
        t2 = [i for i, r in enumerate(self.checks) if r.details.get("tier") == "T2"]
        for i, r in zip(t2, budget.holm([self.checks[i] for i in t2], family_size=family_size)):
            self.checks[i] = r
        self.wall_seconds = wall_seconds
        failed = {family(r) for r in self.failures}
        if not failed:
            self.verdict = CONFORMING if self.adapter.rule == "exact" else lossless(self.adapter.rule)
        elif failed == {EDGE} or (EDGE in failed and self._edge_explains()):
            self.verdict = RARE_EDGE  # the law is otherwise exact; the edge is named with its probability
        elif self.adapter.lossy and LAW in failed and failed <= {LAW, RULE}:
            self.verdict = LOSSY  # lossy describes a law: it never excuses a crash or a broken invariant
        else:
            self.verdict = NON_CONFORMING

    def _edge_explains(self) -> dict | None:
        """The natural-edge finding (natural_edge.explained_by_edge), kept in `self.natural_edge` (report.json
        "natural_edge") and shown in the summary and report.md; None where the failures are not the edge's."""
        self.natural_edge = explained_by_edge(self.failures, self.scenarios, self.forced_probe, self.alpha) or {}
        return self.natural_edge or None

    @property
    def law_kept(self) -> bool:
        """Only rule checks failed: the output law is the target's, acceptance does not follow the declared rule."""
        failed = {family(r) for r in self.failures}
        return None if self.interrupted else failed == {RULE}

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.checks)

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.checks if not r.passed]

    def caught_by(self) -> list[str]:
        """Kinds of the failed checks, most certain first (T0, then by p-value); checks not run explain nothing."""
        caught = [r for r in self.failures if r.details.get("tier") != "not run"]
        ordered = sorted(caught, key=lambda r: (r.details.get("tier") != "T0", r.p_value))
        return list(dict.fromkeys(r.id.kind for r in ordered))

    def measured_tv(self) -> dict[str, float]:
        """The TV of the output law from the target's per scenario (lossy verdicts): the bias-corrected estimate of
        the contract's lossy measure where it has one (the whole-sequence law where the scenario has it, else the
        first token's), else the plug-in TV of the first-token law against p_1 (upward-biased at small N)."""
        if self.lossy.get("scenarios"):
            laws = {name: e.get("sequence") or e.get("first_token") for name, e in self.lossy["scenarios"].items()}
            return {name: tv["estimate"] for name, tv in laws.items() if tv}
        checked = {r.name for r in self.checks}
        out = {}
        for name, series in self.plots.items():
            first = series.get("first")
            if first and sum(first["observed"]) and f"first_token_law[{name}]" in checked:
                obs = np.asarray(first["observed"], float)
                exp = np.asarray(first["expected"], float)
                out[name] = float(0.5 * np.abs(obs / obs.sum() - exp / exp.sum()).sum())
        return out

    def counts(self) -> dict[str, int]:
        """{passed, failed, not run, not tested}: the counts the terminal, report.md, report.json, the pytest plugin
        and the demo all state (status of each check record)."""
        return count_statuses(r.status for r in self.checks)

    @property
    def resolution(self) -> float | None:
        """The largest detectable TV among the passed law checks (None: none passed)."""
        return resolution_of([check_record(r, self.contract.name) for r in self.checks])

    def verdict_line(self) -> str:
        """The verdict with the run's resolution, as every output states it."""
        return resolution_words(self.verdict, self.resolution, self.counts())

    def summary(self) -> str:
        counts = self.counts()
        lines = [
            f"{self.adapter.name}: {resolution_words(self.verdict, self.resolution, counts, upper=True)}  "
            f"({counts_line(counts)}; {sum(s['rows'] for s in self.scenarios.values()):,} rows in "
            f"{self.wall_seconds:.0f} s; family-wise alpha {self.alpha:g}, Holm; each power statement at its "
            f"check's Bonferroni alpha {self.alpha:g} / {self.family_size})",
        ]
        if self.sizing.get("words"):
            lines.append(f"  sizing: {self.sizing['words']}")
        lines += [f"  {line}" for line in uninformative_lines(self.checks)]
        if self.interrupted:
            lines.append(f"  partial report: {self.interrupted}; the checks it did not reach are not run")
        if self.cut_short:
            lines.append(f"  cut short by the time budget (rows run of the fixed N planned): {self.cut_short}")
        if self.law_kept:
            lines.append(f"  output law kept; acceptance does not follow {self.adapter.rule!r} ({self.rule_words()})")
        if self.natural_edge and self.verdict == RARE_EDGE:
            lines.append(f"  {self.natural_edge['words']}")
        lines += self._edge_not_shown()
        lines += ["  " + line for line in failure_lines(self.failures)]
        if self.verdict == LOSSY and self.lossy.get("scenarios"):
            lines += ["  " + line for line in lossy_lines(self.lossy)]
        elif self.verdict == LOSSY:
            tv = self.measured_tv()
            if tv:
                lines.append("  measured TV of the first-token law: "
                             + ", ".join(f"{k} {v:.3f}" for k, v in sorted(tv.items())))  # fmt: skip
        return "\n".join(lines)

    @property
    def forced_probe(self) -> dict:
        """The forced rare-edge probe's summary (edges/probe.py: carried by its last record), or {} where it did not
        run."""
        return next((c.details["forced_probe"] for c in self.checks if "forced_probe" in c.details), {})

    def _edge_not_shown(self) -> list[str]:
        """One line where the forced probe could not reach the subject, as report.md says it: never implied passed."""
        forced = self.forced_probe
        if not forced.get("not_shown"):
            return []
        detection = detection_words(self.probe) if self.probe.get("scenario") else None
        return [f"  {forced['not_shown']}" + (f"; statistical probe's detection probability: {detection}"
                                               if detection else "")]  # fmt: skip

    @property
    def cut_short(self) -> str:
        """The scenarios that got fewer rows than the fixed N asked for (rows with a budget), or ''."""
        return ", ".join(f"{name} ({s['rows']:,} of {s['rows_planned']:,} planned)"
                         for name, s in self.scenarios.items() if "rows_planned" in s)  # fmt: skip

    def rule_words(self) -> str:
        """Which known rule the acceptance matches, and the acceptance ratio against exact speculative sampling."""
        return diagnosis_words(self.rule_diagnosis)

    def to_dict(self) -> dict:
        a = self.adapter
        return json_safe(
            {
                "impl": a.name,
                "contract": self.contract.name,
                "verdict": self.verdict,
                "verdict_line": self.verdict_line(),
                "resolution": self.resolution,
                "resolution_floor": self.resolution_floor,
                "sizing": self.sizing,
                "passed": self.passed,
                "seed": self.seed,
                "budget_seconds": self.budget_seconds,
                "alpha": self.alpha,
                "wall_seconds": self.wall_seconds,
                "adapter": {
                    "kind": a.kind,
                    "ragged": a.ragged,
                    "point_mass": a.point_mass,
                    "uniforms": a.uniforms,
                    "device": str(a.device),
                    "dtype": str(a.dtype),
                    "rule": a.rule,
                    "lossy": a.lossy,
                    "notes": a.notes,
                    "uniform_dtype": str(getattr(a, "uniform_dtype", None) or "") or None,
                    **self.contract.adapter_record(a),
                },
                "rows_as_given": precision.describe(a.dtype),
                "law_kept": self.law_kept,
                "interrupted": self.interrupted or None,
                "rule_diagnosis": self.rule_diagnosis,
                "probe": self.probe,
                "natural_edge": self.natural_edge,
                "counts": self.counts(),
                "caught_by": self.caught_by(),
                "measured_tv": self.measured_tv() if a.lossy else {},
                "lossy": self.lossy,
                "scenarios": self.scenarios,
                "checks": [check_record(r, self.contract.name) for r in self.checks],
                "plots": self.plots,
                "timings": self.timings,
            }
        )
