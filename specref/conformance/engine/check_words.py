"""Each check as every output reads it (check_record), and the words the terminal and report.md say of checks:
failure causes, uninformative checks, the rule diagnosis, the statistical probe's detection."""

from __future__ import annotations

import math
import re

from ...stats import CheckResult
from ...stats.record import STATUSES, CheckId
from . import registry
from .failure_words import defect_words, example_words
from .fit import fit_words
from .plan import describe, family_of


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
