"""Run the conformance harness's checks on one engine over many seeds, with a fixed number of rows per scenario.

This is `specref.conformance.run` without the time-based sizing: the same plan (checks.t2_plan per scenario), the
same Bonferroni split of the run's alpha over the T2 family, the same T0 invariants (checks.Tally) and the same
Holm re-verdict (ErrorBudget.holm). A fixed N per scenario keeps every seed's run identical in design, so that the
p-values of one check over seeds are draws from one null (or alternative) law, and the run is reproducible.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..conformance import checks
from ..conformance.adapters import Adapter
from ..conformance.calls import AdapterFailure, call
from ..conformance.runner import derive_seed
from ..conformance.scenarios import SCENARIOS, Scenario
from ..stats import CheckResult, ErrorBudget

#: Rows per verify call (small vocabularies only; the calibration scenarios all have V <= 32).
CALL_ROWS = 16384
#: Seconds a single verify call may take before the harness calls it a hang.
CALL_TIMEOUT = 120.0
#: Tally arrays summed over seeds (the pooled estimate of an engine's laws).
POOLED_ARRAYS = ("first", "correction", "bonus", "length", "reached", "rejected")
PROBE_ROWS = 256


@dataclass
class Plan:
    """What one engine runs on every seed."""

    engine: str
    adapter: Adapter
    scenarios: list[Scenario]
    rows: int  # per scenario per seed
    seeds: int
    alpha: float  # the run's family-wise alpha
    skipped: dict[str, str] = field(default_factory=dict)  # scenario -> why it is not in the plan

    @property
    def t2_names(self) -> list[str]:
        return [f"{kind}[{s.name}]" for s in self.scenarios for kind in checks.t2_plan(s)]

    @property
    def bonferroni_alpha(self) -> float:
        return self.alpha / len(self.t2_names)


@dataclass
class SeedRun:
    seed: int
    t2: list[CheckResult]  # raw records, each at its Bonferroni alpha
    t0_violations: dict[str, int]  # "check[scenario]" -> violations (nonzero entries only)
    failures: list[str]  # adapter failures (exception, hang, malformed output)
    flagged: bool  # the run's verdict: Holm at plan.alpha over t2, or any T0 violation or adapter failure


@dataclass
class Sweep:
    plan: Plan
    runs: list[SeedRun]
    pooled: dict[str, dict[str, np.ndarray]]  # scenario -> Tally array -> counts summed over seeds
    seconds: float

    def p_values(self) -> dict[str, np.ndarray]:
        """check name -> [seeds] p-values; NaN where the scenario failed or the check ran no test (untested)."""
        out = {name: np.full(len(self.runs), np.nan) for name in self.plan.t2_names}
        for i, run in enumerate(self.runs):
            for r in run.t2:
                if not untested(r):
                    out[r.name][i] = r.p_value
        return out


def untested(r: CheckResult) -> bool:
    """A chi-square left with one bin (df = 0) or with no observations returns p = 1 without testing anything."""
    return "note" in r.details and r.p_value == 1.0


def make_plan(engine: str, adapter: Adapter, scenario_names: list[str], *, rows: int, seeds: int, alpha: float) -> Plan:
    """Scenarios the adapter declares the capabilities for, minus those a probe call shows it cannot run."""
    if rows < 2 or rows % 2:
        raise ValueError(f"rows={rows!r} must be an even number >= 2 (row-independence pairs rows)")
    if seeds < 1:
        raise ValueError(f"seeds={seeds!r} must be >= 1")
    plan = Plan(engine, adapter, [], rows, seeds, alpha)
    for name in scenario_names:
        s = SCENARIOS[name]
        if (s.ragged and not adapter.ragged) or (s.point_mass and not adapter.point_mass):
            plan.skipped[name] = "capability not declared by the adapter"
            continue
        try:
            call(adapter, s.inputs(PROBE_ROWS, 0, "probe"), derive_seed("probe", engine, name), timeout=CALL_TIMEOUT)
        except AdapterFailure as failure:
            plan.skipped[name] = f"probe call failed: {failure}"
            continue
        plan.scenarios.append(s)
    if not plan.scenarios:
        raise ValueError(f"engine={engine!r} can run none of scenario_names={scenario_names!r}: {plan.skipped}")
    return plan


def run_seed(plan: Plan, seed: int, pooled: dict[str, dict[str, np.ndarray]]) -> SeedRun:
    """One run of the plan at one seed; adds this seed's counts to `pooled`."""
    alphas = ErrorBudget(plan.alpha).split(plan.t2_names)
    t2: list[CheckResult] = []
    violations: dict[str, int] = {}
    failures: list[str] = []
    for s in plan.scenarios:
        tally = checks.Tally(s, seed=seed)
        try:
            done, chunk = 0, 0
            while done < plan.rows:
                rows = min(CALL_ROWS, plan.rows - done)
                batch = s.inputs(rows, seed, chunk)
                generator_seed = derive_seed("calibration", plan.engine, seed, s.name, chunk)
                out, seen, _ = call(plan.adapter, batch, generator_seed, timeout=CALL_TIMEOUT)
                tally.add(batch, out, seen, {"scenario": s.name, "seed": seed, "chunk": chunk, "rows": rows})
                done, chunk = done + rows, chunk + 1
        except AdapterFailure as failure:
            failures.append(f"{s.name}: {failure}")
            continue
        for r in tally.t0_results():
            if r.statistic > 0:
                violations[f"{r.name}[{s.name}]"] = int(r.statistic)
        t2 += tally.t2_results({kind: alphas[f"{kind}[{s.name}]"] for kind in checks.t2_plan(s)})
        into = pooled.setdefault(s.name, {})
        for key in POOLED_ARRAYS:
            value = getattr(tally, key)
            into[key] = value.copy() if key not in into else into[key] + value
    holm = ErrorBudget(plan.alpha).holm(t2) if t2 else []
    flagged = bool(failures or violations or not all(r.passed for r in holm))
    return SeedRun(seed, t2, violations, failures, flagged)


def sweep(plan: Plan, first_seed: int = 0, progress: Callable[[str], None] | None = None) -> Sweep:
    """Seeds first_seed .. first_seed + plan.seeds - 1."""
    started = time.perf_counter()
    pooled: dict[str, dict[str, np.ndarray]] = {}
    runs = []
    for i, seed in enumerate(range(first_seed, first_seed + plan.seeds)):
        runs.append(run_seed(plan, seed, pooled))
        if progress and (i + 1) % max(1, plan.seeds // 10) == 0:
            progress(f"{plan.engine}: {i + 1}/{plan.seeds} seeds, {time.perf_counter() - started:.0f} s")
    return Sweep(plan, runs, pooled, time.perf_counter() - started)
