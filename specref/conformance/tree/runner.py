"""`run_tree(verify)`: conformance of a tree verifier. Plans the checks, sizes them to the budget, runs, reports.

    from specref.conformance.tree import run_tree
    report = run_tree(my_verify_tree, seed=0, budget_seconds=120)   # a verify_tree function or a TreeAdapter
    assert report.passed, report.summary()

The harness drafts every tree itself by the adapter's declared scheme (scenarios.py) and casts the rows to its dtype
(precision.as_given). The T2 checks of each scenario are fixed from the exact laws before any data (checks.py:
those that cannot fail take no alpha); the run's alpha is split over them by Bonferroni and re-verdicted by Holm,
as the chain harness does. T0 checks spend nothing. Calls go through the chain harness's Caller (calls.py): a raise,
a hang, a crash or a malformed output fails that scenario's adapter check and the run goes on (a hang stops it).
Time: one small call per scenario, then each scenario gets an equal share of the time left, up to MAX_ROWS rows
(or `rows`, fixed), and what it leaves rolls on.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
import torch

from ...stats import CheckResult, ErrorBudget
from ..calls import AdapterFailure
from ..checks import not_tested, t0_result
from ..diagnosis import tree_rule_diagnosis
from ..hangs import HangLimits
from ..passes import MIN_ROWS
from ..report import Report
from ..runner import MIN_CALL_TIMEOUT, derive_seed
from .adapters import TreeAdapter, as_tree_adapter
from .calls import TreeCaller
from .checks import JOINT_TOKENS, T0_CHECKS, TreeTally, tree_t0
from .picture import series_for
from .scenarios import SCENARIOS, TreeScenario, get

MAX_ROWS = 200_000


def scenarios_for_tree(adapter: TreeAdapter) -> list[TreeScenario]:
    """The tree scenarios the adapter's capabilities allow, as its dtype gives them."""
    return [s.given(adapter.dtype) for s in SCENARIOS.values() if s.chains_only or not adapter.chains_only]


def run_tree(
    verify,
    *,
    seed: int = 0,
    budget_seconds: float | None = None,
    alpha: float = 1e-3,
    name: str | None = None,
    scenarios: list[str | TreeScenario] | None = None,
    rows: int | None = None,
    progress: Callable[[str, float], None] | None = None,
    started: float | None = None,
) -> Report:
    """Check one tree verifier (a verify_tree function, a TreeAdapter, or an object with verify)."""
    if budget_seconds is None and rows is None:
        budget_seconds = 300.0
    if budget_seconds is not None and not budget_seconds > 0:
        raise ValueError(f"budget_seconds={budget_seconds!r} must be > 0")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha!r} must lie in (0, 1)")
    adapter = as_tree_adapter(verify, name)
    if scenarios is None:
        plan = scenarios_for_tree(adapter)
    else:
        plan = [(s if isinstance(s, TreeScenario) else get(s)).given(adapter.dtype) for s in scenarios]
    tell = progress or (lambda message, fraction: None)
    started = time.perf_counter() if started is None else started  # the CLI gives its process's start
    deadline = started + (math.inf if budget_seconds is None else budget_seconds)
    report = Report(adapter, seed=seed, budget_seconds=budget_seconds, alpha=alpha)
    tallies = {s.name: TreeTally(s, adapter.scheme, adapter.rule, adapter.nodes) for s in plan}
    planned = {s.name: tallies[s.name].planned() for s in plan}  # exact laws only: fixed before any data
    names = [f"{kind}[{s.name}]" for s in plan for kind in planned[s.name][0]]
    alphas = ErrorBudget(alpha).split(names) if names else {}
    failures: dict[str, AdapterFailure] = {}
    stopped = None
    with TreeCaller(adapter, HangLimits(budget_seconds, MIN_CALL_TIMEOUT)) as caller:
        for i, s in enumerate(plan):
            share = (deadline - 0.1 * (budget_seconds or 0) - time.perf_counter()) / (len(plan) - i)
            try:
                _scenario(caller, s, tallies[s.name], seed, rows, time.perf_counter() + share, deadline)
            except AdapterFailure as failure:
                failures[s.name] = failure
                if failure.kind == "hang":
                    stopped = f"the run stopped calling the adapter after a hang in {s.name}"
                    break
            tell(f"{s.name}: {tallies[s.name].rows:,} rows", (i + 1) / len(plan))
        extra = [_reproducibility(caller, plan[0], seed, deadline)] if stopped is None and plan else []
        if stopped is None and adapter.uniforms and not adapter.lossy:
            extra.append(_coupling(caller, seed, deadline))

    run_checks: list[CheckResult] = []
    for s in plan:
        tally, failure = tallies[s.name], failures.get(s.name)
        report.scenarios[s.name] = {"description": s.description, "scheme": adapter.scheme, "rule": adapter.rule,
                                    "shapes": [repr(shape) for shape in s.shapes], "vocab_size": s.vocab_size,
                                    "gamma": s.depth,  # the deepest node: the most drafts one cycle can accept
                                    "rows": tally.rows, "rows_per_second": tally.rows / tally.seconds
                                    if tally.seconds else None}  # fmt: skip
        details = (
            {"error": None}
            if failure is None
            else {"error": str(failure), "kind": failure.kind, "raised_at": failure.location, "call": failure.call}
        )
        if failure is not None or tally.rows:
            run_checks.append(t0_result(f"adapter[{s.name}]", int(failure is not None), tally.rows, details))
        picture = series_for(tally, adapter.scheme, adapter.rule) if failure is None else None
        if picture is not None:
            report.scenarios[s.name]["node_acceptance"] = picture
        tested, skipped = planned[s.name]
        if tally.rows:
            report.add_t0(s.name, tally.t0_results())
        why = _why_not_run(tally, failure, stopped)
        if why:
            run_checks += [_not_run(f"{kind}[{s.name}]", why) for kind in tested]
            if not tally.rows:
                run_checks += [_not_run(f"{kind}[{s.name}]", why) for kind in T0_CHECKS]
            continue
        results = [tally.t2(kind, alphas[f"{kind}[{s.name}]"]) for kind in tested]
        results += [not_tested(f"{kind}[{s.name}]", reason) for kind, reason in skipped.items()]
        report.add_t2(s.name, results)
    report.add_t0("run", run_checks + extra)
    report.finish(ErrorBudget(alpha), time.perf_counter() - started, family_size=len(alphas))
    if report.law_kept:
        report.rule_diagnosis = tree_rule_diagnosis(tallies, adapter.rule, adapter.scheme, alpha)
    tell("done", 1.0)
    return report


def _scenario(caller, s: TreeScenario, tally: TreeTally, seed: int, rows, slice_end: float, deadline: float):
    cap = rows if rows is not None else MAX_ROWS
    chunk = 0
    if s.joint:
        tally.joint = _joint(caller, s, tally, seed, cap, slice_end, deadline)
        return
    while tally.rows < cap and (tally.rows == 0 or time.perf_counter() < slice_end):
        size = int(min(s.rows_per_call, cap - tally.rows, MIN_ROWS if tally.rows == 0 else s.rows_per_call))
        _feed(caller, s, tally, size, chunk, seed, deadline)
        chunk += 1


def _feed(caller, s, tally, size, chunk, seed, deadline, start_states=None):
    batch = s.inputs(size, seed, chunk, tally.scheme, start_states)
    generator_seed = derive_seed("tree-generator", seed, s.name, chunk)
    where = {"scenario": s.name, "seed": seed, "chunk": chunk, "rows": size, "scheme": tally.scheme,
             "generator_seed": generator_seed}  # fmt: skip
    tokens, nodes, seen, seconds = caller(batch, generator_seed, where=where)
    tally.seconds += seconds
    return batch, tokens, nodes, seen, tally.add(batch, tokens, nodes, seen, where)


def _joint(caller, s, tally, seed, cap, slice_end, deadline) -> np.ndarray:
    """counts [V^n] of the first n tokens over repeated cycles; a row leaves at its first T0 violation."""
    v, n = s.vocab_size, JOINT_TOKENS
    counts = np.zeros(v**n, dtype=np.int64)
    done, chunk = 0, 1000
    while done < cap and (done == 0 or time.perf_counter() < slice_end):
        size = int(min(s.rows_per_call, cap - done))
        state = np.full(size, s.start)
        seqs = np.full((size, n), -1)
        filled = np.zeros(size, dtype=np.int64)
        counted = np.ones(size, bool)
        while (counted & (filled < n)).any():
            if done and time.perf_counter() >= deadline:
                return counts
            _, tokens, _, _, good = _feed(caller, s, tally, size, chunk, seed, deadline, state.copy())
            chunk += 1
            counted &= good | (filled >= n)
            for j in range(tokens.shape[1]):
                emit = counted & (filled < n) & (tokens[:, j] >= 0)
                seqs[emit, filled[emit]] = tokens[emit, j]
                state[emit] = s.next_state[state[emit], tokens[emit, j]]
                filled += emit
        np.add.at(counts, np.ravel_multi_index(seqs[counted].T, (v,) * n), 1)
        done += size
    return counts


def _reproducibility(caller, s: TreeScenario, seed: int, deadline: float) -> CheckResult:
    """Same generator seed twice: identical tokens; another seed: different tokens (512 rows)."""
    batch = s.inputs(512, seed, "repro", caller.adapter.scheme)
    try:
        outs = [caller(batch, g)[0] for g in (derive_seed("tree-repro", seed),) * 2
                + (derive_seed("tree-repro", seed) + 1,)]  # fmt: skip
    except AdapterFailure as failure:
        return t0_result("reproducibility", 1, 0, {"error": str(failure)})
    first, again, other = outs
    differs = int((first != again).any(1).sum())
    same_other = bool((first == other).all())
    return t0_result("reproducibility", differs + int(same_other), 512,
                     {"rows_differing_under_same_seed": differs, "identical_under_other_seed": same_other})  # fmt: skip


#: Scenarios of the coupling check (each drafted by the adapter's scheme; chain adapters get the chain ones).
COUPLING_SCENARIOS = ("tree_chain_markov", "tree_star_cf", "tree_duplicates_cf", "tree_eagle_markov",
                      "tree_ragged_markov")  # fmt: skip
COUPLING_ROWS = 128


def _coupling(caller, seed: int, deadline: float) -> CheckResult:
    """Injected uniforms [B, N+1], float64 rows: tokens equal specref.reference.tree's, token for token."""
    from ...reference.tree import uniforms_rng, verify_tree

    adapter = caller.adapter
    mismatches, rows, example = 0, 0, None
    for name in COUPLING_SCENARIOS:
        s = get(name).given(torch.float64)
        if adapter.chains_only and not s.chains_only:
            continue
        batch = s.inputs(COUPLING_ROWS, seed, "coupling", adapter.scheme)
        n = s.num_nodes
        uniforms = np.random.Generator(np.random.PCG64(derive_seed("tree-uniforms", seed, name))).random(
            (COUPLING_ROWS, n + 1))  # fmt: skip
        try:
            theirs = caller(batch, 0, uniforms=uniforms, dtype=torch.float64)[0]
        except AdapterFailure as failure:
            return t0_result("coupling", 1, rows, {"error": str(failure)})
        for b in range(COUPLING_ROWS):
            ours = verify_tree(
                batch.target_probs[b].tolist(),
                batch.draft_probs[b].tolist(),
                batch.draft_tokens[b].tolist(),
                batch.parents[b].tolist(),
                uniforms_rng(adapter.rule, uniforms[b].tolist()),
                rule=adapter.rule,
                validate=False,
            )
            expected = ours + [-1] * (n + 1 - len(ours))  # fmt: skip
            if theirs[b].tolist() != expected:
                mismatches += 1
                if example is None:
                    example = {"scenario": name, "row": b, "theirs": theirs[b].tolist(), "reference": expected}
        rows += COUPLING_ROWS
    return t0_result("coupling", mismatches, rows, {"example": example})


def _why_not_run(tally: TreeTally, failure, stopped) -> str | None:
    if failure is not None:
        return f"the adapter failed on this scenario ({failure.kind})"
    if stopped and not tally.rows:
        return stopped
    if not tally.rows:
        return "no rows"
    if tally.scenario.joint and (tally.joint is None or not tally.joint.sum()):
        return "no sequence of the joint loop passed the T0 checks"
    return None


def _not_run(name: str, why: str) -> CheckResult:
    return CheckResult(name, float("nan"), 0, float("nan"), 0, 0.0, float("nan"), False, 0.0,
                       {"tier": "not run", "error": f"not run: {why}"})  # fmt: skip


__all__ = ["run_tree", "scenarios_for_tree", "tree_t0"]
