"""`run(verify)`: the conformance harness. Plans the checks, sizes them to the time budget, runs, reports.

    report = specref.conformance.run(my_verify, seed=0, budget_seconds=300)
    assert report.passed, report.summary()

Plan. Every scenario the adapter's capabilities allow (scenarios.py), given as its dtype gives them (rows rounded
and summing to exactly 1), the T0 invariants on every call, the T2 laws of each scenario under the declared rule
(plan.plan_for: checks that cannot fail take no alpha), reproducibility, and token-for-token coupling with the
reference engine when the adapter accepts injected uniforms and declares the exact rule. The run's false-alarm
budget (alpha, default 1e-3) is split by Bonferroni over the T2 checks before any data is seen, then the family is
re-verdicted by Holm. T0 checks spend nothing.

Sizing. After one small call per scenario, the rare-edge probe (scenarios.PROBE) runs first, with up to
PROBE_SHARE of the time, until it reaches its target power or cannot; then each scenario in turn gets an equal share
of the time left, and stops early at the rows that buy it little more (MAX_ROWS); what it leaves rolls on to the
next. A slow adapter (a row loop) thus gets the largest N its budget allows, and the report states the TV each check
could detect at that N.

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
from . import checks, laws
from .adapters import Adapter, as_adapter
from .calls import AdapterFailure, Caller
from .joint import joint_counts
from .plan import RULE, plan_for
from .report import Report
from .scenarios import SCENARIOS, Scenario, get, probe_detection, probe_rows_needed

#: Rows past which a scenario's checks gain little (TV detectable ~0.005 on small vocabularies).
MAX_ROWS = {"default": 400_000, "large_v8193_g2": 200_000, "large_v151936_g1": 20_000}
MIN_ROWS = 256
#: The most of the budget the rare-edge probe may take (it stops earlier once it reaches its target power).
PROBE_SHARE = 0.45
#: A call that returns nothing for twice this long (or twice the rest of the budget, if longer) is declared a hang;
#: the environment variable SPECREF_MIN_CALL_TIMEOUT overrides it (seconds).
MIN_CALL_TIMEOUT = float(os.environ.get("SPECREF_MIN_CALL_TIMEOUT", "30"))
JOINT_TOKENS = 3
#: A joint-loop call's start states are kept in its provenance (for a reproduce snippet) up to this many rows.
MAX_RECORDED_STATES = 64


def derive_seed(*key) -> int:
    """A stable seed from a key (zlib.crc32): the generator seed of every call is derive_seed("generator", ...)."""
    return zlib.crc32(":".join(map(str, key)).encode())


def _timeout(deadline: float) -> float:
    # A call that overruns the budget is slow, not hung (a loaded machine slows a correct adapter several-fold):
    # it is declared hung only at twice what was left of the budget.
    return 2 * max(MIN_CALL_TIMEOUT, deadline - time.perf_counter())


def scenarios_for(adapter: Adapter) -> list[Scenario]:
    """The scenarios an adapter's declared capabilities allow, as its dtype gives them (Scenario.given)."""
    return [
        s.given(adapter.dtype)
        for s in SCENARIOS.values()
        if (adapter.ragged or not s.ragged) and (adapter.point_mass or not s.point_mass)
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
    laws.check_rule(adapter.rule)
    if scenarios is None:
        plan = scenarios_for(adapter)
    else:
        plan = [(s if isinstance(s, Scenario) else get(s)).given(adapter.dtype) for s in scenarios]
    plans = {s.name: plan_for(s, adapter.rule) for s in plan}
    started = time.perf_counter()
    deadline = started + budget_seconds
    report = Report(adapter, seed=seed, budget_seconds=budget_seconds, alpha=alpha)
    tell = progress or (lambda message, fraction: None)

    t2_names = [f"{kind}[{s.name}]" for s in plan for kind in plans[s.name].tested]
    alphas = ErrorBudget(alpha).split(t2_names) if t2_names else {}
    tallies = {s.name: checks.Tally(s, seed=seed, rule=adapter.rule) for s in plan}
    fed: dict[str, list[dict]] = {s.name: [] for s in plan}  # provenance of every call, per scenario
    with Caller(adapter) as caller:
        broken, stopped, finished = _calls(caller, plan, tallies, fed, seed, rows, budget_seconds, deadline, tell)
        coupled = adapter.uniforms and adapter.rule == "exact"  # the reference engine implements the exact rule
        extras = ["reproducibility"] + (["coupling"] if coupled else [])
        not_run = []  # planned checks that could not be computed: listed last, after the failures that explain them
        if stopped:
            not_run += [_not_run(f"{name}[run]", stopped) for name in extras]
            extra_results = []
        else:
            extra_results = [_reproducibility(caller, seed, deadline)]
            if coupled:
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
        kinds = {kind: alphas[f"{kind}[{s.name}]"] for kind in plans[s.name].tested}
        skipped = [checks.not_tested(f"{kind}[{s.name}]", why) for kind, why in plans[s.name].skipped.items()]
        if why:
            not_run += [_not_run(f"{kind}[{s.name}]", why) for kind in [*kinds, *plans[s.name].certain]]
        elif "joint_law" in kinds:
            report.add_t2(s.name, [checks.joint_law_result(tally.joint, s, JOINT_TOKENS, kinds["joint_law"])])
        else:
            report.add_t0(s.name, tally.certain_results(plans[s.name].certain))
            report.add_t2(s.name, tally.t2_results(kinds) + skipped, tally)
        if s.probe:
            report.probe = _probe_summary(s, tally)
    report.add_t0("run", results + extra_results + not_run)
    report.finish(ErrorBudget(alpha), time.perf_counter() - started)
    if report.law_kept:
        report.rule_diagnosis = rule_diagnosis(tallies, plans, alphas, adapter.rule)
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
    todo = sorted((s for s in plan if s.name not in broken), key=lambda s: not s.probe)  # the probe first
    for i, s in enumerate(todo):
        tally = tallies[s.name]
        left = max(0.0, deadline - reserve - time.perf_counter())
        slice_end = time.perf_counter() + (PROBE_SHARE * left if s.probe else left / (len(todo) - i))
        fixed = rows.get(s.name) if isinstance(rows, dict) else rows
        cap = fixed if fixed is not None else _max_rows(s)
        if fixed is not None:
            slice_end = deadline
        begun, rows_before = time.perf_counter(), tally.rows
        try:
            if s.name.startswith("joint_"):
                feed = functools.partial(_feed, caller, s, tally, fed[s.name], seed=seed, deadline=deadline)
                tally.joint = joint_counts(feed, s, cap, JOINT_TOKENS, slice_end=slice_end, deadline=deadline)
            else:
                while tally.rows < cap and time.perf_counter() < slice_end:
                    rows_now = int(min(s.rows_per_call, cap - tally.rows))
                    _feed(caller, s, tally, fed[s.name], rows_now, chunk_index[s.name], seed=seed, deadline=deadline)
                    chunk_index[s.name] += 1
                    if s.probe and fixed is None and _probe_hopeless(tally.rows, rows_before, begun, slice_end):
                        break
        except AdapterFailure as failure:
            if stopped := halted(s, failure):
                return broken, stopped, finished
        finished.add(s.name)
        tell(f"{s.name}: {tally.rows:,} rows", 0.1 + 0.8 * (i + 1) / len(todo))
    return broken, None, finished


def _max_rows(s: Scenario) -> int:
    return probe_rows_needed() if s.probe else MAX_ROWS.get(s.name, MAX_ROWS["default"])


def _probe_hopeless(rows: int, rows_before: int, begun: float, slice_end: float) -> bool:
    """At the speed seen so far the probe cannot reach even even odds by the end of its slice: stop it, and let
    the report state the detection probability it did reach (a slow adapter keeps its budget for the laws)."""
    now = time.perf_counter()
    speed = (rows - rows_before) / max(now - begun, 1e-9)
    return rows + speed * max(slice_end - now, 0.0) < probe_rows_needed(0.5)


def _probe_summary(s: Scenario, tally: checks.Tally) -> dict:
    tests = tally.rows  # one accept test with p/q = 0 and one correction draw per row
    return {
        "scenario": s.name,
        "accept_tests_with_ratio_0": tests,
        "detection_probability": probe_detection(tests),
        "event": "an fp32 uniform equal to 0 (probability 2^-24 per draw)",
        "catches": "a non-strict accept test u <= p/q on fp32 uniforms (it accepts a draft of target probability 0), "
        "and an inverse-CDF correction that returns token 0 at u = 0",
        "target_rows": probe_rows_needed(),
    }


def rule_diagnosis(tallies: dict, plans: dict, alphas: dict, declared: str) -> dict:
    """When only rule checks failed: does the acceptance follow another known rule, and how often does it accept?

    The counts are rule-free, so every other rule is tested on the same data at the same per-check alphas; its fit
    is a diagnosis, never part of the verdict (no alpha is spent on it).
    """
    out: dict = {"rules": {}}
    for rule in laws.RULES:
        if rule == declared:
            continue
        results, support = [], 0
        for name, tally in tallies.items():
            kinds = {k: alphas[f"{k}[{name}]"] for k in plan_for(tally.scenario, rule).tested
                     if f"{k}[{name}]" in alphas and checks.family_of(k) == RULE}  # fmt: skip
            if tally.rows and tally.joint is None and kinds:
                results += tally.t2_results(kinds, rule)
            support += tally.support_violations[rule]
        tested = [r for r in results if "not_tested" not in r.details]
        out["rules"][rule] = {
            "matches": support == 0 and all(r.passed for r in tested),
            "min_p_value": min((r.p_value for r in tested), default=float("nan")),
            "checks": len(tested),
            "residual_support_violations": support,
        }
    observed = expected = 0.0
    for tally in tallies.values():
        sc = tally.scenario
        if tally.rows and not (sc.probe or sc.identical_rows or sc.point_mass or sc.name.startswith("joint_")):
            o, e = tally.mean_accepted("exact")
            observed, expected = observed + o, expected + e
    out["acceptance_ratio"] = observed / expected if expected else None
    return out


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
    s = SCENARIOS["cf_dense_g4"].given(caller.adapter.dtype)
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
        s = SCENARIOS[name].given(torch.float64)
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


__all__ = ["run", "scenarios_for", "derive_seed", "rule_diagnosis"]
