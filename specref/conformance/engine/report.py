"""The outcome of one conformance run: every check, the verdict, and the data the rendered report plots."""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field

import numpy as np
from scipy.stats import chi2, poisson

from ...stats import CheckResult, ErrorBudget
from ...stats.record import STATUSES, CheckId, json_safe
from . import precision, registry
from .contract import Contract
from .failure_words import defect_words, example_words
from .fit import fit_words
from .lossy_words import lossy_lines
from .plan import LAW, RULE, describe, family_of
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


#: The T0 checks a token of the rare edge fails: target probability 0, or a correction where the rule cannot put one.
EDGE_TOKENS = ("t0_zero_prob_emitted", "t0_residual_support")


def natural_edge_words(tokens: int, draws: int, event: float, p_value: float, flagged: float | None = None) -> str:
    power = ""
    if flagged is not None:
        power = (f"; extra zero-probability tokens at {flagged:.3g} per draw or more ({flagged / event:.3g}x the "
                 f"edge's rate) would have been flagged with probability {EDGE_POWER:g}")  # fmt: skip
    return (
        f"the {tokens} zero-probability or out-of-support token(s) emitted in the run are the named edge met "
        f"naturally: {draws:,} draws where the edge acts, at {event:.3g} each, explain them (one-sided Poisson "
        f"p = {p_value:.3g}; no scenario holds more than its own draws explain){power}"
    )


#: The power at which the natural-edge rule states the extra rate of zero-probability tokens it flags.
EDGE_POWER = 0.999


def edge_draws(scenario: dict, edges: dict) -> int:
    """The draws of one scenario (report.json's record: rows, gamma) on which the forced probe's named edges act:
    rows x g accept tests for the accept edge, one final draw (correction or bonus) per row for any other."""
    rows, gamma = scenario["rows"], scenario.get("gamma") or 0
    accept, final = "accept" in edges, any(key != "accept" for key in edges)
    return rows * (gamma * accept + final)


def edge_power(draws: int, event: float, alpha: float, power: float = EDGE_POWER) -> float:
    """The extra rate per draw of zero-probability tokens, on top of the edge's `event`, that the one-sided Poisson
    test at `alpha` flags with probability `power`: the critical count c (the least with P(X >= c) <= alpha at
    draws x event), then the rate whose P(X >= c) is `power` (P(X >= c; m) = P(chi^2_2c <= 2m))."""
    expected = draws * event
    critical = int(poisson.isf(alpha, expected)) + 1
    while critical > 1 and poisson.sf(critical - 2, expected) <= alpha:
        critical -= 1
    while poisson.sf(critical - 1, expected) > alpha:
        critical += 1
    return float(chi2.ppf(power, 2 * critical) / 2 / draws - event)


def kind_of(check_name: str) -> str:
    """The kind of a check, from its name (CheckId.parse)."""
    return CheckId.parse(check_name).kind


def family(result: CheckResult) -> str:
    return result.details.get("family") or family_of(result.id.kind)


def tested(result: CheckResult) -> bool:
    """False for a check that could not fail (plan.py): it spent no alpha and is never counted as a pass."""
    return result.status != "not tested"


def reason(result: CheckResult) -> str | None:
    """Why a check is not tested or was not run (None for a check that passed or failed on its data)."""
    if result.status == "not tested":
        return str(result.details.get("not_tested") or "it could not fail").removeprefix("not tested: ")
    if result.status == "not run":
        return str(result.details.get("error") or "not run").removeprefix("not run: ")
    return None


def count_statuses(statuses) -> dict[str, int]:
    """{status: how many} over STATUSES, from an iterable of statuses: the one count every output prints."""
    statuses = list(statuses)
    return {status: statuses.count(status) for status in STATUSES}


def counts_line(counts: dict[str, int]) -> str:
    """The counts in words, as every output states them."""
    return (f"{counts['passed']} passed, {counts['failed']} failed, {counts.get('uninformative', 0)} uninformative "
            f"at this N, {counts['not run']} not run, {counts['not tested']} not tested (could not fail)")  # fmt: skip


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
    natural_edge: dict = field(default_factory=dict)  # zero-probability tokens a named edge explains (_edge_explains)
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
        """When the forced probe named an edge and every other failure is a token the edge makes, whether those
        tokens are no more than the named edge explains in nature. A token the edge makes fails a T0 token check
        (EDGE_TOKENS: a zero-probability token; a correction the rule cannot put there, as a left-side inverse CDF's
        zero-weight token), and may fail a statistical check of the same scenario as an impossible outcome: such a
        check counts only if its possible outcomes alone pass (p_asymptotic above its alpha).

        The edge acts on the draws it names (edge_draws: the accept tests for the accept edge, one final draw per
        row for the others), each with the edge's event probability. The tokens are the edge's, and the verdict stays
        "rare edge", only if (1) their count passes a one-sided Poisson test at the run's alpha against the run's
        expected count, and (2) no scenario holds more than its own draws explain (the same test per scenario with
        tokens, at alpha over their number): where one does, a second cause is more likely there than the edge, and
        the verdict stays "non-conforming". What the rule could still absorb is stated (edge_power): the rate of
        extra zero-probability tokens per draw it flags with probability 0.999. The finding is kept in
        `self.natural_edge` (report.json "natural_edge"), shown in the summary and report.md."""
        others = [r for r in self.failures if family(r) != EDGE]
        tokens = [r for r in others if kind_of(r.name) in EDGE_TOKENS]
        where = {CheckId.parse(r.name).scenario for r in tokens}
        impossible = [r for r in others if r.details.get("impossible_observed") and CheckId.parse(r.name).scenario
                      in where and r.details.get("p_asymptotic", 0.0) > r.alpha]  # fmt: skip
        if not tokens or len(tokens) + len(impossible) != len(others):
            return None
        edges = self.forced_probe.get("edges", {})
        events = [e.get("event_probability") or 0.0 for e in edges.values()]
        if not events or not max(events) > 0:
            return None
        event = max(events)
        draws = {name: edge_draws(s, edges) for name, s in self.scenarios.items()}
        total = sum(draws.values())
        count = sum(int(r.statistic) for r in tokens)  # an impossible outcome of a T2 check is one of these tokens
        p_value = float(poisson.sf(count - 1, total * event))
        per_scenario = {}
        for r in tokens:
            name = CheckId.parse(r.name).scenario
            per_scenario[name] = per_scenario.get(name, 0) + int(r.statistic)
        second = {name: float(poisson.sf(k - 1, draws.get(name, 0) * event)) for name, k in per_scenario.items()}
        if p_value <= self.alpha or min(second.values()) <= self.alpha / len(second):
            return None
        power = edge_power(total, event, self.alpha)
        self.natural_edge = {"tokens": count, "draws": total, "event_probability": event, "p_value": p_value,
                             "per_scenario_p_values": second, "flagged_extra_rate": power,
                             "checks": [r.name for r in others],
                             "words": natural_edge_words(count, total, event, p_value, power)}  # fmt: skip
        return self.natural_edge

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


def diagnosis_words(diagnosis: dict) -> str:
    """The rule diagnosis in words (report.json's rule_diagnosis): the rules the acceptance matches, each with what
    its checks rule out (engine/fit.py), and the acceptance ratio against the declared rule."""
    d = diagnosis

    def tested(fit: dict) -> str:
        smallest = fit["min_p_value"]  # None in report.json where NaN: certain checks only
        if smallest is None or math.isnan(smallest):
            return f"{fit['checks']} certain rule checks"
        return f"smallest p-value {smallest:.3g} over {fit['checks']} rule checks"

    matches = [f"it matches rule {name!r}: {fit_words(fit.get('ruled_out') or {})}; {tested(fit)}"
               for name, fit in d.get("rules", {}).items() if fit["matches"]]  # fmt: skip
    words = matches or ["it matches no rule specref knows"]
    if d.get("acceptance_ratio") is not None:
        against = f"rule {d['against']!r}" if d.get("against") else "exact speculative sampling"
        words.append(f"accepted drafts {d['acceptance_ratio']:.3f}x those of {against}")
    return "; ".join(words)


def check_record(r: CheckResult, contract: str = registry.CHAIN) -> dict:
    """One check as every output reads it: the result, its kind and scenario, family, status and reason, and how its
    numbers read (the statistic's kind, what a bin and a stratum are: registry.py)."""
    kind = registry.kinds().get(r.id.kind)
    return {
        **r.to_dict(),
        "kind": r.id.kind,
        "scenario": r.id.scenario,
        "family": family(r),
        "status": r.status,
        "reason": reason(r),
        "tested": tested(r),
        "description": describe(r.id.kind, contract) if kind else "",
        "statistic_kind": statistic_kind(r, kind),
        "bins": kind.bins if kind else "",
        "strata": kind.strata if kind else "",
    }


def statistic_kind(r: CheckResult, kind=None) -> str:
    """What the statistic of this result is, from the test it ran (details), else from its kind's declaration."""
    d = r.details
    if r.status == "not tested" or d.get("tier") == "not run":
        return ""
    if d.get("tier") == "T0":
        return "violations"
    used = str(d.get("test_used") or "")
    if d.get("method") == "bennett":
        return "mean shift (Bennett bound)"
    if "per position" in str(d.get("test", "")):
        return "largest |rate - p0| (exact binomial per position)"
    if used.startswith("exact binomial"):
        return "exact binomial count (the rarer bin)"
    if used.startswith("Pearson"):
        return "Pearson X^2"
    return kind.statistic if kind else ""


def uninformative_words(record: dict) -> str:
    """One uninformative check in words (a report.json check record): its distance, the floor, the rows it needs."""
    u = record["details"]["uninformative"]
    need = f"; about {u['rows_needed']:,} rows of {u['scenario']} would reach it" if u.get("rows_needed") else ""
    tv = record.get("detectable_tv")
    return (f"UNINFORMATIVE {record['name']}: detectable TV {'none' if tv is None else f'{tv:.3g}'} at n = "
            f"{record['n']:,} is above the resolution floor {u['floor']:g}{need}")  # fmt: skip


def uninformative_lines(checks: list[CheckResult], contract: str = registry.CHAIN) -> list[str]:
    records = [check_record(r, contract) for r in checks]
    return [uninformative_words(c) for c in records if c["status"] == "uninformative"]


#: Distinct failure causes the terminal lists (report.md lists every failed check).
SHOWN_CAUSES = 12


def failure_lines(failures: list[CheckResult], limit: int = SHOWN_CAUSES) -> list[str]:
    """One line per distinct cause: a statistical failure is its own cause; a certain failure of one kind with one
    error (a malformed output in 12 scenarios) is one line naming its scenarios; checks not run for one reason are
    one line naming their kinds."""
    groups: dict[tuple, list[CheckResult]] = {}
    for r in failures:
        if r.status == "not run":
            key = ("not run", reason(r))
        elif r.details.get("tier") == "T2":
            key = ("T2", r.name)
        else:
            # one cause: one kind, one error up to its numbers (shape [256, 4] in one scenario, [256, 9] in another)
            key = ("T0", r.id.kind, re.sub(r"\d+", "#", str(r.details.get("error") or "")))
        groups.setdefault(key, []).append(r)
    lines = [_cause_line(key[0], group) for key, group in groups.items()]
    if len(lines) > limit:
        lines = lines[:limit] + [f"... and {len(lines) - limit} more distinct failures (report.md lists every check)"]
    return lines


def _where(group: list[CheckResult]) -> str:
    scenarios = list(dict.fromkeys(r.id.scenario or "run" for r in group))
    shown = ", ".join(scenarios[:4]) + (f", +{len(scenarios) - 4} more" if len(scenarios) > 4 else "")
    return f"{shown} ({len(scenarios)} scenarios)" if len(scenarios) > 4 else shown


def _cause_line(tier: str, group: list[CheckResult]) -> str:
    r = group[0]
    if tier == "not run":
        kinds = list(dict.fromkeys(c.id.kind for c in group))
        return f"NOT RUN {len(group)} checks ({', '.join(kinds)}) in {_where(group)}: {reason(r)}"
    if tier == "T2":
        return (f"FAIL {r.name}: p={r.p_value:.3g} (alpha {r.alpha:.2g}), {statistic_kind(r) or 'statistic'} "
                f"{r.statistic:.4g}, n={r.n:,}")  # fmt: skip
    head = f"FAIL {r.id.kind}[{_where(group)}]"
    if r.details.get("edge"):  # a rare edge the forced probe named (edges/probe.py)
        edge = r.details["edge"]  # the probe's words carry the fix where it located the line
        return f"{head}: {edge}" + ("" if "known defect class" in edge else defect_words(edge))
    if r.details.get("error"):
        return f"{head}: {r.details['error']}" + (f" (in {r.id.scenario}; the same in each)" if len(group) > 1 else "")
    violations = sum(0 if math.isnan(c.statistic) else int(c.statistic) for c in group)
    rows = sum(c.n for c in group)
    count = f"{violations:,} violations" + (f" in {rows:,} rows" if rows else "")
    detail = r.details.get("example")
    if detail is None:
        detail = {k: v for k, v in r.details.items() if k not in ("tier", "family")}
        return f"{head}: {count}; first: {detail}"
    return f"{head}: {count}; first: {example_words(detail)}"


def detection_words(probe: dict) -> str:
    """The statistical probe's detection probability in words (report.json's probe record): the probability, or
    why none is stated (float64 uniforms: 2^-53, never in practice). Records from before the words were recorded
    carry the probability alone (specref merge and render.rebuild read such files)."""
    detection = probe.get("detection_probability")
    if detection is not None:
        return probe.get("detection_words") or f"{detection:.4g}"
    event = probe.get("event", "")
    return "none stated" + (f": {event.split(': ', 1)[1]}" if ": " in event else "")
