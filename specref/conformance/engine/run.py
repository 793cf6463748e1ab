"""One run of the conformance harness under a contract it is handed: plan, size, call, check, report.

    report = run_contract(contract, adapter, seed=0, budget_seconds=300)   # specref.conformance.run picks contract

Steps, each in its module: plan (run_plan.py), size (passes.Sizing), the probe pass and the main pass (passes.py),
the run-level checks (run_checks.py), then the checks, the verdict and the report (assemble.py). With
shard=(K, N) the same run is cut into N disjoint parts that shards.py merges exactly.

Plan. Every scenario the adapter's capabilities allow (the contract's), given as its dtype gives them (rows rounded
and summing to exactly 1), the T0 invariants on every call, the T2 laws of each scenario under the declared rule
(plan.plan_for: checks that cannot fail take no alpha), reproducibility, and token-for-token coupling with the
reference engine when the adapter accepts injected uniforms and declares the exact rule. The run's false-alarm
budget (alpha, default 1e-3) is split by Bonferroni over the T2 checks before any data is seen, then the family is
re-verdicted by Holm. T0 checks spend nothing.

Sizing. After one small call per scenario, the rare-edge probe (scenarios.PROBE) runs first, with up to
passes.PROBE_SHARE of the time, until it reaches its target power or cannot; then each scenario in turn gets an
equal share of the time left, and stops early at the rows that buy it little more (Contract.max_rows); what it leaves
rolls on to the next. A slow adapter (a row loop) thus gets the largest N its budget allows, and the report states
the TV each check could detect at that N.

Rare edges. After the run-level checks, the deterministic edge probe (edges/probe.py) calls the adapter a few times
with forced CPU generator states (specref.forced): a float32 u = 0 at chosen draws shows `u <= p/q` or a left-side
inverse CDF in one call; its records (family "edge") join the run-level checks.

Calls. Every call goes through calls.Caller: CPU adapters run in a forked worker process (a hang is killed, a
crash is a verdict), others in a thread (a hang is abandoned). An exception, a crash or malformed output fails
that scenario's adapter check (with the raising line and the call's provenance) and the run goes on; a hang stops
the run's calls. Checks that could not be computed are failures marked "not run" (tier "not run", no p-value),
never passes.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable

from ... import arguments
from .assemble import build_report
from .calls import AdapterFailure, Caller
from .contract import Contract
from .hangs import HangLimits
from .passes import PROBE_SHARE, Calls, Clock, Sizing, _reserve, main_pass, probe_pass
from .plan_rows import Refit, allocate_rows, check_budget, demands_of, tv_rows
from .report import RESOLUTION_FLOOR, Report
from .run_plan import make_plan
from .shards import Shard, fixed_rows, shard_report
from .timings import Timings

#: No call is declared hung before this many seconds (hangs.py: the floor of every hang limit); the environment
#: variable SPECREF_MIN_CALL_TIMEOUT overrides it.
MIN_CALL_TIMEOUT = float(os.environ.get("SPECREF_MIN_CALL_TIMEOUT", "30"))
#: The budget of a run given neither rows nor a budget (seconds).
DEFAULT_BUDGET = 300.0


def run_contract(
    contract: Contract,
    verify,
    *,
    seed: int = 0,
    budget_seconds: float | None = None,
    alpha: float = 1e-3,
    name: str | None = None,
    scenarios: list | None = None,
    rows: int | dict[str, int] | None = None,
    progress: Callable[[str, float], None] | None = None,
    shard: tuple[int, int] | str | None = None,
    started: float | None = None,
    tv: float | None = None,
    resolution: float = RESOLUTION_FLOOR,
) -> Report:
    """Check one implementation under `contract` (engine/contract.py): `verify` is what the contract wraps into
    its adapter (a verify function, an adapter object, a pipeline).

    scenarios: names from SCENARIOS or Scenario objects (default: all the adapter's capabilities allow).
    budget_seconds: the run's time budget; default DEFAULT_BUDGET (300 s), or none at all when `rows` is given.
    rows: a fixed number of rows per scenario (or a dict scenario name -> rows) instead of sizing by time
    (reproducible N, as CI tests want). Every scenario gets its rows unless budget_seconds is also given; then the
    budget bounds the run, and a scenario it cut short is named in the report (Report.cut_short).
    started: the time.perf_counter() the budget counts from (default: now; the CLI gives its process's start).
    shard: (K, N) or "K/N": run only the K-th of N disjoint parts of the run (fixed rows needed) and return a
    ShardReport whose to_dict()["shard"] holds the counts; `shards.merge` sums N of them into the run's report.
    tv: size every scenario so that each of its T2 checks detects this distance (TV for laws, in their own units
    for rule checks) at power 0.999, from the scenario's own probabilities (plan_rows.tv_rows): the same N on every
    machine. The run states beforehand how long it expects to take and, with a budget that cannot reach tv, stops
    with BudgetTooSmall (a UsageError) before its main pass. Without a budget it takes what it needs.
    resolution: a law check whose detectable TV is above this is "uninformative at this N", not passed.
    Sized by time (no rows, no tv), the rows are allocated across scenarios from a timed warm-up call whose outputs
    are not counted, to minimise the worst detectable distance (law checks first, to the resolution floor), and each
    scenario's N is fixed before its main pass.
    """
    tv, resolution = arguments.tv(tv), arguments.resolution(resolution)
    arguments.tv_or_rows(tv, rows)
    if budget_seconds is None and rows is None and tv is None:
        budget_seconds = DEFAULT_BUDGET
    seed, alpha, rows = arguments.seed(seed), arguments.alpha(alpha), arguments.rows(rows)
    budget_seconds, scenarios = arguments.budget_seconds(budget_seconds), arguments.scenarios(scenarios)
    part = None if shard is None else Shard.of(shard)
    if part is not None and not contract.shardable:
        raise ValueError(f"shard={shard!r}: {contract.name} runs cannot be sharded; run them unsharded")
    adapter = contract.wrap(verify, name)
    timings = Timings()  # where the run's time goes (timings.py): report.json "timings"
    with timings.phase("plan"):
        plan = make_plan(adapter, scenarios, alpha, contract)  # plan: scenarios, checks, alpha split
        if tv is not None:
            rows = tv_rows(contract, adapter, plan, tv)  # from the plan alone: the same N on every machine
    sizing = _size(plan, budget_seconds, rows, part)  # size: a fixed N, or shares of the budget; a shard's chunks
    sizing.allocated = (part is None and rows is None and budget_seconds is not None
                        and demands_of(contract, adapter, plan) is not None)  # fmt: skip
    sizing.warm = sizing.allocated or (tv is not None and part is None)  # N is fixed without chunk 0's outputs
    record = {"mode": "tv" if tv is not None else "rows" if rows is not None else
              "allocated" if sizing.allocated else "time", "tv": tv, "resolution_floor": resolution}  # fmt: skip
    clock = Clock.start(budget_seconds, started)
    tell = progress or _silent
    calls = Calls.start(plan.scenarios, seed, lambda s: contract.tally(adapter, s, seed))
    limits = HangLimits(budget_seconds, MIN_CALL_TIMEOUT)
    interrupted = ""
    with Caller(adapter, contract, limits=limits, timings=timings) as caller:
        try:
            probe_pass(caller, plan.scenarios, calls, seed, clock, tell, sizing.owns, sizing)  # one small call each
            if not calls.stopped and part is None:
                _fix_rows(caller, plan, calls, sizing, clock, tv, resolution, record, tell)  # N, before the main pass
            if not calls.stopped:
                main_pass(caller, plan.scenarios, calls, seed, sizing, clock, tell)  # calls: the main pass
            with timings.phase("run_checks"):
                run_results, run_not_run = (contract.run_checks(caller, plan, seed, calls.stopped)
                                            if sizing.owns(0) else ([], []))  # fmt: skip
            with timings.phase("edge_probe"):
                edge = forced_edge_probe(caller, calls, seed) if sizing.owns(0) else None  # edges/probe.py
            run_results += edge.results if edge else []
        except KeyboardInterrupt:  # Ctrl-C: no more calls; what the calls so far show, in a partial report
            interrupted = f"interrupted by SIGINT (Ctrl-C) after {clock.elapsed():.0f} s"
            calls.stopped = calls.stopped or f"the run was {interrupted}"
            run_results, run_not_run = [], contract.run_checks(caller, plan, seed, calls.stopped)[1]
    if part is not None:
        report = shard_report(contract, adapter, plan, calls, run_results, run_not_run, shard=part,
                              rows=sizing.rows, seed=seed, budget_seconds=budget_seconds, alpha=alpha,
                              wall_seconds=clock.elapsed, resolution=resolution, sizing=record)  # fmt: skip
        if interrupted:
            report.mark_interrupted(interrupted)
        return report
    # checks, verdict, report
    with timings.phase("checks"):
        report = build_report(contract, adapter, plan, calls, run_results, run_not_run, seed=seed,
                              budget_seconds=budget_seconds, alpha=alpha, wall_seconds=clock.elapsed,
                              resolution=resolution)  # fmt: skip
    report.timings = timings.record(clock.elapsed())
    report.sizing = record
    if interrupted:
        report.mark_interrupted(interrupted)
    for name, fixed in calls.cut.items():  # --rows with a budget that cut them short: named in every output
        report.scenarios[name]["rows_planned"] = fixed
    tell("done", 1.0)
    return report


def forced_edge_probe(caller: Caller, calls: Calls, seed: int):
    """The contract's deterministic rare-edge probe (edges/probe.py), unless a hang stopped the run's calls."""
    if calls.stopped:
        return None
    try:
        return caller.contract.edge_probe(caller, seed)
    except AdapterFailure as failure:  # a hang under a forced state: the run's calls stop here
        calls.stopped = f"the run stopped calling the adapter after a hang in the edge probe ({failure})"
        return None


def _fix_rows(caller, plan, calls, sizing: Sizing, clock: Clock, tv, resolution: float, record: dict,
              tell) -> None:  # fmt: skip
    """After the warm-up: a --tv run states the seconds it expects (and stops when its budget cannot reach tv); a run
    sized by time gets its rows allocated (plan_rows.allocate_rows). Both fix every N before the main pass."""
    left = clock.left() - (_reserve(caller, sizing.budget_seconds) if math.isfinite(clock.deadline) else 0.0)
    if tv is not None:
        expected = check_budget(tv, plan, calls, sizing.rows, left)
        record.update(
            expected_seconds=expected,
            rows=dict(sizing.rows),
            words=f"--tv {tv:g}: {sum(sizing.rows.values()):,} rows, from the scenarios' probabilities "
            f"alone; the main pass should take about {expected:.0f} s at this machine's measured speed",
        )
        tell(f"sizing: {record['words']}", 0.1)
    elif sizing.allocated:
        allocation, probe_seconds = allocate_rows(caller.contract, caller.adapter, plan, calls, max(left, 0.0),
                                                  resolution, PROBE_SHARE)  # fmt: skip
        if allocation is None:
            return
        sizing.rows, sizing.probe_seconds = dict(allocation.rows), probe_seconds
        costs = allocation.costs
        sizing.order = lambda s: (not s.probe, costs[s.name][2] * allocation.rows[s.name] if s.name in costs else 0)
        sizing.before = Refit(allocation, costs, clock, _reserve(caller, sizing.budget_seconds), resolution,
                              sizing.rows)  # fmt: skip
        record.update(rows=dict(allocation.rows), expected_seconds=allocation.seconds + (probe_seconds or 0.0),
                      seconds_per_row=dict(calls.warmup), probe_seconds=probe_seconds, allocated_seconds=left,
                      planned_law_tv=allocation.law_tv, planned_tv=allocation.tv,
                      words=f"{sum(allocation.rows.values()):,} rows allocated from a timed warm-up (outputs not "
                      f"counted) to reach law-check TV {allocation.law_tv:.3g} (every check {allocation.tv:.3g}) "
                      "at power 0.999; each N fixed before its main pass")  # fmt: skip
        tell(f"sizing: {record['words']}", 0.1)


def _size(plan, budget_seconds: float, rows, part: Shard | None) -> Sizing:
    if part is None:
        return Sizing(budget_seconds, rows)
    return Sizing(budget_seconds, fixed_rows(plan, rows, part), part.owns)  # a shard: fixed N, and only its units


def _silent(message: str, fraction: float) -> None:
    pass


__all__ = ["DEFAULT_BUDGET", "MIN_CALL_TIMEOUT", "run_contract"]
