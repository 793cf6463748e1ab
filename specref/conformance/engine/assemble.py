"""From counts to a Report: each scenario's checks (adapter, T0, certain, T2), the run-level checks, Holm and the
verdict, and the rule diagnosis. Checks that could not be computed are failures marked "not run" (tier "not run",
no p-value), never passes. The same code serves one run (engine/run.run_contract) and merged shards (shards.merge)."""

from __future__ import annotations

import dataclasses
from typing import Protocol

from ...stats import CheckResult, ErrorBudget
from .calls import AdapterFailure
from .check_words import family
from .contract import Contract, Scenario
from .plan import LAW
from .plan_rows import demands_of
from .report import RESOLUTION_FLOOR, Report
from .results import failure_details, not_run, not_tested, t0_result
from .run_plan import RunPlan
from .sizing import rows_for_tv


class Counted(Protocol):
    """What the calls left: passes.Calls for one run, shards.Merged for merged shards."""

    tallies: dict  # scenario -> its contract's tally (chain/tally.Tally, tree.checks.TreeTally, pipeline.PipelineTally)
    broken: dict[str, AdapterFailure]
    stopped: str | None
    finished: set[str]

    def summary(self, name: str) -> dict: ...


def build_report(contract: Contract, adapter, plan: RunPlan, counted: Counted, run_results: list[CheckResult],
                 run_not_run: list[CheckResult], *, seed: int, budget_seconds: float, alpha: float,
                 wall_seconds, resolution: float = RESOLUTION_FLOOR) -> Report:  # fmt: skip
    """The checks of every scenario, then the run-level ones, then Holm, the verdict and the rule diagnosis.

    wall_seconds: a callable read when the verdict is made (the run's time, checks included).
    resolution: the floor above which a law check's detectable TV makes it uninformative (mark_uninformative).
    """
    report = Report(adapter, contract, seed=seed, budget_seconds=budget_seconds, alpha=alpha,
                    resolution_floor=resolution)  # fmt: skip
    adapter_results, not_run_list = [], list(run_not_run)  # not run: listed last, after the failures explaining them
    for s in plan.scenarios:
        adapter_results += scenario_checks(report, s, plan, counted, not_run_list, contract)
    report.add_t0("run", adapter_results + run_results + not_run_list)
    mark_uninformative(report, contract, adapter, plan, resolution)
    report.finish(ErrorBudget(alpha), wall_seconds(), family_size=len(plan.alphas))
    if report.law_kept:
        report.rule_diagnosis = contract.rule_diagnosis(adapter, counted.tallies, alpha)
    if getattr(adapter, "lossy", False):
        report.lossy = contract.lossy_measure(adapter, counted.tallies, alpha)
    return report


def scenario_checks(report: Report, s: Scenario, plan: RunPlan, counted: Counted, not_run_list: list,
                    contract) -> list:  # fmt: skip
    """Add scenario s's summary and checks to the report; returns its adapter check (appended to the run's)."""
    tally, calls, failure = counted.tallies[s.name], counted.summary(s.name), counted.broken.get(s.name)
    report.scenarios[s.name] = {
        "description": s.description,
        **contract.describe(report.adapter, s, tally, failure),
        "vocab_size": s.vocab_size,
        "rows": tally.rows,
        "rows_per_second": tally.rows / tally.seconds if tally.seconds else None,
        "calls": calls,
    }
    results = []
    if failure is not None:
        results.append(t0_result(f"adapter[{s.name}]", 1, tally.rows, failure_details(failure)))
    elif not calls["count"]:
        not_run_list.append(not_run(f"adapter[{s.name}]", counted.stopped))
    else:
        results.append(t0_result(f"adapter[{s.name}]", 0, tally.rows, {"error": None}))
    why = why_not_run(s, tally, failure, None if s.name in counted.finished else counted.stopped)
    if tally.rows:
        report.add_t0(s.name, tally.t0_results())
    else:
        not_run_list += [not_run(f"{kind}[{s.name}]", why) for kind in tally.t0_kinds()]
    scenario_plan = plan.checks[s.name]
    kinds = {kind: plan.alphas[f"{kind}[{s.name}]"] for kind in scenario_plan.tested}
    skipped = [not_tested(f"{kind}[{s.name}]", reason) for kind, reason in scenario_plan.skipped.items()]
    if why:
        not_run_list += [not_run(f"{kind}[{s.name}]", why) for kind in [*kinds, *scenario_plan.certain]]
    else:
        report.add_t0(s.name, tally.certain_results(scenario_plan.certain))
        report.add_t2(s.name, tally.t2_results(kinds) + skipped, None if s.joint else contract.plot_series(tally))
    if s.probe:
        report.probe = contract.probe_summary(s, tally, report.adapter)
    return results


def why_not_run(s, tally, failure: AdapterFailure | None, stopped: str | None) -> str | None:
    """Why a scenario's T2 checks cannot be computed, or None when they can."""
    if failure is not None:
        return f"the adapter failed on this scenario ({failure.kind})"
    if stopped:  # cut short by a hang elsewhere
        return stopped
    if tally.rows == 0:
        return "no rows"
    if s.joint and (tally.joint is None or tally.joint.sum() == 0):
        return "no sequence of the joint loop passed the T0 checks"  # the first batch always completes
    return None


def mark_uninformative(report: Report, contract, adapter, plan: RunPlan, floor: float) -> None:
    """Mark every tested T2 law check whose detectable TV at its N is above `floor` (or none) uninformative: it is
    then counted apart from the passes (CheckResult.status), with the rows its scenario would need to reach the floor
    (sizing.rows_for_tv on the check's own demand, where the contract states demands)."""
    demands = demands_of(contract, adapter, plan) or {}
    for i, r in enumerate(report.checks):
        if r.details.get("tier") != "T2" or not r.tested or family(r) != LAW:
            continue
        if r.detectable_tv <= floor:  # NaN or inf (no power) is uninformative too
            continue
        scenario = r.id.scenario
        own = [d for d in demands.get(scenario, []) if d.check == r.name]
        need = rows_for_tv(own, floor) if own else None
        report.checks[i] = dataclasses.replace(r, details={**r.details, "uninformative": {
            "floor": floor, "rows_needed": need, "scenario": scenario}})  # fmt: skip
