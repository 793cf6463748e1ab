"""`run(verify)`: the conformance harness. Plans the checks, sizes them to the time budget, runs, reports.

    report = specref.conformance.run(my_verify, seed=0, budget_seconds=300)
    assert report.passed, report.summary()

Plan. Every scenario the adapter's capabilities allow (scenarios.py), the T0 invariants on every call, the T2 laws
of each scenario (checks.t2_plan), reproducibility, and token-for-token coupling with the reference engine when
the adapter accepts injected uniforms. The run's false-alarm budget (alpha, default 1e-3) is split by Bonferroni
over the T2 checks before any data is seen, then the family is re-verdicted by Holm. T0 checks spend nothing.

Sizing. After one probe call per scenario, each scenario in turn gets an equal share of the time left, and
stops early at the rows that buy it little more (MAX_ROWS); what it leaves rolls on to the next. A slow adapter
(a row loop) thus gets the largest N its budget allows, and the report states the TV each check could detect
at that N.

Calls. Every call goes through calls.Caller: CPU adapters run in a forked worker process (a hang is killed, a
crash is a verdict), others in a thread (a hang is abandoned). An exception, a crash or malformed output fails
that scenario's adapter check (with the raising line and the call's provenance) and the run goes on; a hang stops
the run's calls. Checks that could not be computed are failures marked "not run" (tier "not run", no p-value),
never passes.
"""

from __future__ import annotations

import functools
import os
import time
import zlib
from collections.abc import Callable

import numpy as np
import torch

from ..stats import CheckResult, ErrorBudget
from . import checks
from .adapters import Adapter, as_adapter
from .calls import AdapterFailure, Caller
from .joint import joint_counts
from .report import Report
from .scenarios import SCENARIOS, Scenario, get

#: Rows past which a scenario's checks gain little (TV detectable ~0.005 on small vocabularies).
MAX_ROWS = {"default": 400_000, "large_v8193_g2": 200_000, "large_v151936_g1": 20_000}
MIN_ROWS = 256
#: A call that returns nothing for this long (or for the rest of the budget, if longer) is declared a hang;
#: the environment variable SPECREF_MIN_CALL_TIMEOUT overrides it (seconds).
MIN_CALL_TIMEOUT = float(os.environ.get("SPECREF_MIN_CALL_TIMEOUT", "30"))
JOINT_TOKENS = 3
#: A joint-loop call's start states are kept in its provenance (for a reproduce snippet) up to this many rows.
MAX_RECORDED_STATES = 64


def derive_seed(*key) -> int:
    """A stable seed from a key (zlib.crc32): the generator seed of every call is derive_seed("generator", ...)."""
    return zlib.crc32(":".join(map(str, key)).encode())


def _timeout(deadline: float) -> float:
    return max(MIN_CALL_TIMEOUT, deadline - time.perf_counter())


def scenarios_for(adapter: Adapter) -> list[Scenario]:
    """The scenarios an adapter's declared capabilities allow."""
    return [
        s for s in SCENARIOS.values() if (adapter.ragged or not s.ragged) and (adapter.point_mass or not s.point_mass)
    ]


def run(
    verify,
    *,
    seed: int = 0,
    budget_seconds: float = 300.0,
    alpha: float = 1e-3,
    name: str | None = None,
    scenarios: list[str | Scenario] | None = None,
    rows: int | dict[str, int] | None = None,
    progress: Callable[[str, float], None] | None = None,
) -> Report:
    """Check one implementation; `verify` is a verify function, an Adapter, or an object with `verify`.

    scenarios: names from SCENARIOS or Scenario objects (default: all the adapter's capabilities allow).
    rows: a fixed number of rows per scenario (or a dict scenario name -> rows) instead of sizing by time
    (reproducible N, as CI tests want); the time budget still bounds the run.
    """
    if not budget_seconds > 0:
        raise ValueError(f"budget_seconds={budget_seconds!r} must be > 0")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha!r} must lie in (0, 1)")
    if getattr(verify, "kind", None) == "pipeline" and not hasattr(verify, "verify"):
        from .pipeline import run_pipeline

        return run_pipeline(verify, seed=seed, budget_seconds=budget_seconds, alpha=alpha, progress=progress)
    adapter = as_adapter(verify, name)
    if scenarios is None:
        plan = scenarios_for(adapter)
    else:
        plan = [s if isinstance(s, Scenario) else get(s) for s in scenarios]
    started = time.perf_counter()
    deadline = started + budget_seconds
    report = Report(adapter, seed=seed, budget_seconds=budget_seconds, alpha=alpha)
    tell = progress or (lambda message, fraction: None)

    t2_names = [f"{kind}[{s.name}]" for s in plan for kind in checks.t2_plan(s)]
    alphas = ErrorBudget(alpha).split(t2_names) if t2_names else {}
    tallies = {s.name: checks.Tally(s, seed=seed) for s in plan}
    fed: dict[str, list[dict]] = {s.name: [] for s in plan}  # provenance of every call, per scenario
    with Caller(adapter) as caller:
        broken, stopped, finished = _calls(caller, plan, tallies, fed, seed, rows, budget_seconds, deadline, tell)
        extras = ["reproducibility"] + (["coupling"] if adapter.uniforms else [])
        not_run = []  # planned checks that could not be computed: listed last, after the failures that explain them
        if stopped:
            not_run += [_not_run(f"{name}[run]", stopped) for name in extras]
            extra_results = []
        else:
            extra_results = [_reproducibility(caller, seed, deadline)]
            if adapter.uniforms:
                extra_results.append(_coupling(caller, seed, deadline))

    # checks
    results = []
    for s in plan:
        tally = tallies[s.name]
        report.scenarios[s.name] = {
            "description": s.description,
            "gamma": s.gamma,
            "vocab_size": s.vocab_size,
            "rows": tally.rows,
            "rows_per_second": tally.rows / tally.seconds if tally.seconds else None,
            "calls": _calls_summary(fed[s.name]),
        }
        failure = broken.get(s.name)
        if failure is not None:
            results.append(checks.t0_result(f"adapter[{s.name}]", 1, tally.rows, _failure_details(failure)))
        elif not fed[s.name]:
            not_run.append(_not_run(f"adapter[{s.name}]", stopped))
        else:
            results.append(checks.t0_result(f"adapter[{s.name}]", 0, tally.rows, {"error": None}))
        why = _why_not_run(s, tally, failure, None if s.name in finished else stopped)
        if tally.rows:
            report.add_t0(s.name, tally.t0_results())
        else:
            not_run += [_not_run(f"{kind}[{s.name}]", why) for kind in checks.T0_CHECKS]
        kinds = {kind: alphas[f"{kind}[{s.name}]"] for kind in checks.t2_plan(s)}
        if why:
            not_run += [_not_run(f"{kind}[{s.name}]", why) for kind in kinds]
        elif "joint_law" in kinds:
            report.add_t2(s.name, [checks.joint_law_result(tally.joint, s, JOINT_TOKENS, kinds["joint_law"])])
        else:
            report.add_t2(s.name, tally.t2_results(kinds), tally)
    report.add_t0("run", results + extra_results + not_run)
    report.finish(ErrorBudget(alpha), time.perf_counter() - started)
    tell("done", 1.0)
    return report


def _calls(caller, plan, tallies, fed, seed, rows, budget_seconds, deadline, tell) -> tuple[dict, str | None, set]:
    """Probe, then the main pass. Returns (scenario -> AdapterFailure, why the run stopped calling the adapter or
    None, the scenarios whose main pass ended).

    After a hang the run calls the adapter no more: the hang has spent the budget (a call is declared hung only
    after max(MIN_CALL_TIMEOUT, the time left)), and the scenarios left get their checks marked not run.
    """
    broken: dict[str, AdapterFailure] = {}
    finished: set[str] = set()
    chunk_index = {s.name: 1 for s in plan}

    def halted(s: Scenario, failure: AdapterFailure) -> str | None:
        broken[s.name] = failure
        return f"the run stopped calling the adapter after a hang in {s.name}" if failure.kind == "hang" else None

    # probe: one small call per scenario (T0 on every scenario early, and a first speed reading)
    for i, s in enumerate(plan):
        try:
            _feed(
                caller, s, tallies[s.name], fed[s.name], min(MIN_ROWS, s.rows_per_call), 0, seed=seed, deadline=deadline
            )
        except AdapterFailure as failure:
            if stopped := halted(s, failure):
                return broken, stopped, finished
        tell(f"probe {s.name}", 0.1 * (i + 1) / len(plan))

    # main pass: each scenario gets an equal slice of the time left, up to its cap; unused time rolls forward
    reserve = 0.1 * budget_seconds + 2.0 + 2.0 * caller.adapter.uniforms
    todo = [s for s in plan if s.name not in broken]
    for i, s in enumerate(todo):
        tally = tallies[s.name]
        slice_end = time.perf_counter() + max(0.0, deadline - reserve - time.perf_counter()) / (len(todo) - i)
        fixed = rows.get(s.name) if isinstance(rows, dict) else rows
        cap = fixed if fixed is not None else MAX_ROWS.get(s.name, MAX_ROWS["default"])
        if fixed is not None:
            slice_end = deadline
        try:
            if s.name.startswith("joint_"):
                feed = functools.partial(_feed, caller, s, tally, fed[s.name], seed=seed, deadline=deadline)
                tally.joint = joint_counts(feed, s, cap, JOINT_TOKENS, slice_end=slice_end, deadline=deadline)
            else:
                while tally.rows < cap and time.perf_counter() < slice_end:
                    rows_now = int(min(s.rows_per_call, cap - tally.rows))
                    _feed(caller, s, tally, fed[s.name], rows_now, chunk_index[s.name], seed=seed, deadline=deadline)
                    chunk_index[s.name] += 1
        except AdapterFailure as failure:
            if stopped := halted(s, failure):
                return broken, stopped, finished
        finished.add(s.name)
        tell(f"{s.name}: {tally.rows:,} rows", 0.1 + 0.8 * (i + 1) / len(todo))
    return broken, None, finished


def _why_not_run(s: Scenario, tally: checks.Tally, failure: AdapterFailure | None, stopped: str | None) -> str | None:
    """Why a scenario's T2 checks cannot be computed, or None when they can."""
    if failure is not None:
        return f"the adapter failed on this scenario ({failure.kind})"
    if stopped:  # cut short by a hang elsewhere
        return stopped
    if tally.rows == 0:
        return "no rows"
    if s.name.startswith("joint_") and (tally.joint is None or tally.joint.sum() == 0):
        return "no sequence of the joint loop passed the T0 checks"  # the first batch always completes
    return None


def _not_run(name: str, why: str | None) -> CheckResult:
    """A planned check that could not be computed: a failure with its reason, never a pass (no p-value, no alpha)."""
    why = why or "not reached"
    return CheckResult(name, float("nan"), 0, float("nan"), 0, 0.0, float("nan"), False, 0.0,
                       {"tier": "not run", "error": f"not run: {why}"})  # fmt: skip


def _failure_details(failure: AdapterFailure) -> dict:
    return {"error": str(failure), "kind": failure.kind, "raised_at": failure.location, "call": failure.call}


def _record(log: list, adapter: Adapter, s: Scenario, rows: int, seed: int, chunk, generator_seed: int,
            start_states: np.ndarray | None = None) -> dict:  # fmt: skip
    """The provenance of one call (what a snippet needs to rebuild and repeat it), appended to the scenario's log."""
    where = {"scenario": s.name, "seed": seed, "chunk": chunk, "rows": rows, "generator_seed": generator_seed,
             "dtype": str(adapter.dtype), "device": str(adapter.device)}  # fmt: skip
    if start_states is not None and not np.array_equal(start_states, np.full(rows, s.starts[0])):
        # a joint-loop call past the first: its start states came from earlier outputs (None: too many to keep)
        where["start_states"] = start_states.tolist() if rows <= MAX_RECORDED_STATES else None
    log.append(where)
    return where


def _calls_summary(log: list[dict]) -> dict:
    """The first call that fed a scenario (what T2 snippets rebuild), and how many calls there were in all."""
    if not log:
        return {"count": 0, "first": None, "rows": 0}
    return {"count": len(log), "first": log[0], "chunks": [log[0]["chunk"], log[-1]["chunk"]],
            "rows": sum(w["rows"] for w in log)}  # fmt: skip


def _feed(caller: Caller, s: Scenario, tally: checks.Tally, log: list, rows: int, chunk, start_states=None, *,
          seed: int, deadline: float) -> tuple:  # fmt: skip
    """One call on chunk `chunk` of scenario s: T0-checked and counted into tally; returns (batch, tokens, seen)."""
    batch = s.inputs(rows, seed, chunk, start_states=start_states)
    generator_seed = derive_seed("generator", seed, s.name, chunk)
    where = _record(log, caller.adapter, s, rows, seed, chunk, generator_seed, start_states)
    out, seen, seconds = caller(batch, generator_seed, timeout=_timeout(deadline), where=where)
    tally.add(batch, out, seen, where)
    tally.seconds += seconds
    return batch, out, seen


def _reproducibility(caller: Caller, seed: int, deadline: float) -> CheckResult:
    """Same generator seed twice: identical tokens. A different seed: different tokens (chance ~ 0 at 512 rows)."""
    s = SCENARIOS["cf_dense_g4"]
    batch = s.inputs(512, seed, "repro")
    log: list = []
    try:
        outs = []
        for generator_seed in (derive_seed("repro", seed),) * 2 + (derive_seed("repro", seed) + 1,):
            where = _record(log, caller.adapter, s, 512, seed, "repro", generator_seed)
            outs.append(caller(batch, generator_seed, timeout=_timeout(deadline), where=where)[0])
    except AdapterFailure as failure:
        return checks.t0_result("reproducibility", 1, 0, _failure_details(failure))
    first, again, other = outs
    differs = int((first != again).any(1).sum())
    same_other = bool((first == other).all())
    return checks.t0_result(
        "reproducibility", differs + int(same_other), 512,
        {"rows_differing_under_same_seed": differs, "identical_under_other_seed": same_other},
    )  # fmt: skip


def _coupling(caller: Caller, seed: int, deadline: float) -> CheckResult:
    """Injected uniforms, float64 inputs: tokens must equal specref.reference's, token for token."""
    from .adapters import reference_adapter

    reference = Caller(reference_adapter(), mode="inline")
    mismatches, rows, example = 0, 0, None
    for name in ("cf_dense_g4", "cf_zero_support_g3", "cf_near_equal_g4", "markov_g5", "ragged_g6"):
        s = SCENARIOS[name]
        if s.ragged and not caller.adapter.ragged:
            continue
        batch = s.inputs(256, seed, "coupling")
        uniforms = np.random.Generator(np.random.PCG64(derive_seed("uniforms", seed, name))).random((256, s.gamma + 1))
        try:
            timeout = _timeout(deadline)
            theirs = caller(batch, 0, timeout=timeout, uniforms=uniforms, dtype=torch.float64)[0]
        except AdapterFailure as failure:
            return checks.t0_result("coupling", 1, rows, _failure_details(failure))
        ours = reference(batch, 0, timeout=600.0, uniforms=uniforms)[0]
        bad = np.flatnonzero((theirs != ours).any(1))
        mismatches += bad.size
        rows += 256
        if bad.size and example is None:
            example = {"scenario": name, "row": int(bad[0]), "theirs": theirs[bad[0]].tolist(),
                       "reference": ours[bad[0]].tolist(), "uniforms": uniforms[bad[0]].tolist()}  # fmt: skip
    return checks.t0_result("coupling", mismatches, rows, {"example": example})


__all__ = ["run", "scenarios_for", "derive_seed"]
