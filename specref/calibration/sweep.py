"""Run `specref.conformance.run` itself on one engine over many seeds, with a fixed number of rows per scenario.

Every seed is one ordinary conformance run (`run(adapter, seed=s, rows=ROWS, scenarios=...)`): the runner's own
plan, budget split, T0 invariants, Holm and verdict, nothing copied. A fixed N per scenario keeps every seed's run
identical in design, so that the p-values of one check over seeds are draws from one null (or alternative) law.
Seeds can be spread over worker processes (jobs); each seed's run is the same whichever process runs it.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from ..conformance import run
from ..conformance.chain.adapters import Adapter, as_adapter, builtin_adapters
from ..conformance.chain.plan import scenarios_for
from ..conformance.chain.scenarios import SCENARIOS
from ..stats import CheckResult

#: Rows per scenario per seed: the large vocabularies cost far more per row, so they get fewer.
DEFAULT_ROWS = {"default": 2048, "large_v8193_g2": 512, "large_v151936_g1": 64}
#: The dtypes a calibration can give its rows in (specref.conformance.precision).
DTYPES = ("float32", "bfloat16", "float16")
#: A run's time budget: generous, so that the fixed rows always finish (a hang is still declared per call).
RUN_BUDGET_SECONDS = 600.0


def rows_for(scenario: str, rows: int | dict[str, int]) -> int:
    if isinstance(rows, int):
        return rows
    return int(rows.get(scenario, rows.get("default", DEFAULT_ROWS["default"])))


@dataclass
class Plan:
    """What one engine runs on every seed."""

    engine: str  # a built-in name or a mutant name (resolved in each worker by resolve_adapter)
    adapter: Adapter
    scenarios: list  # Scenario objects
    rows: dict[str, int]  # per scenario per seed
    seeds: int
    alpha: float  # the run's family-wise alpha
    dtype: str = "float32"  # the rows' dtype (the adapter asks for it; the harness gives rows exact in it)
    skipped: dict[str, str] = field(default_factory=dict)  # scenario -> why it is not in the plan
    t2_names: list[str] = field(default_factory=list)  # filled from the first run's report

    @property
    def bonferroni_alpha(self) -> float:
        return self.alpha / max(1, len(self.t2_names))


@dataclass
class SeedRun:
    seed: int
    t2: list[CheckResult]  # the report's T2 records (p-values as computed; alpha and verdict after Holm)
    t0_violations: dict[str, int]  # failed T0 checks "check[scenario]" -> violations
    failures: list[str]  # adapter failures (exception, hang, malformed output)
    flagged: bool  # the run's verdict: not conforming
    seconds: float = 0.0
    plots: dict = field(default_factory=dict)  # the report's observed/expected series (power distances)


@dataclass
class Sweep:
    plan: Plan
    runs: list[SeedRun]
    pooled: dict[str, dict[str, np.ndarray]]  # scenario -> series -> counts summed over seeds (from report plots)
    seconds: float

    def p_values(self) -> dict[str, np.ndarray]:
        """check name -> [seeds] p-values; NaN where the check did not run or was not a test (tested=False)."""
        names = dict.fromkeys(r.name for run_ in self.runs for r in run_.t2)
        out = {name: np.full(len(self.runs), np.nan) for name in names}
        for i, run_ in enumerate(self.runs):
            for r in run_.t2:
                if r.tested:
                    out[r.name][i] = r.p_value
        return out


def untested(r: CheckResult) -> bool:
    return not r.tested


def resolve_adapter(engine: str, dtype: str = "float32") -> Adapter:
    """A built-in engine or a mutant of specref.mutants.CATALOGUE, by name, asking for `dtype` rows."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype={dtype!r} must be one of {DTYPES}")
    factories = builtin_adapters()
    if engine in factories:
        adapter = as_adapter(factories[engine]())
    else:
        from ..mutants import CATALOGUE

        if engine not in CATALOGUE:
            raise ValueError(f"engine={engine!r} is neither a built-in nor a mutant")
        adapter = as_adapter(CATALOGUE[engine])
    return replace(adapter, dtype=getattr(torch, dtype))


def make_plan(
    engine: str,
    adapter: Adapter | None,
    scenario_names: list[str] | None,
    *,
    rows,
    seeds: int,
    alpha: float,
    dtype: str = "float32",
) -> Plan:
    """The scenarios the adapter's capabilities allow (all of them by default, as `run` itself plans)."""
    if seeds < 1:
        raise ValueError(f"seeds={seeds!r} must be >= 1")
    adapter = resolve_adapter(engine, dtype) if adapter is None else replace(adapter, dtype=getattr(torch, dtype))
    allowed = {s.name for s in scenarios_for(adapter)}
    names = list(SCENARIOS) if scenario_names is None else list(scenario_names)
    plan = Plan(engine, adapter, [], {}, seeds, alpha, dtype)
    for name in names:
        if name not in SCENARIOS:
            raise ValueError(f"scenario={name!r} is unknown")
        if name not in allowed:
            plan.skipped[name] = "capability not declared by the adapter"
            continue
        n = rows_for(name, rows if rows is not None else DEFAULT_ROWS)
        if n < 2 or n % 2:
            raise ValueError(f"rows={n!r} for {name} must be an even number >= 2 (row-independence pairs rows)")
        plan.scenarios.append(SCENARIOS[name])
        plan.rows[name] = n
    if not plan.scenarios:
        raise ValueError(f"engine={engine!r} can run none of scenario_names={scenario_names!r}: {plan.skipped}")
    return plan


def run_seed(plan: Plan, seed: int) -> SeedRun:
    """One ordinary conformance run of the plan at one seed."""
    started = time.perf_counter()
    report = run(plan.adapter, seed=seed, alpha=plan.alpha, budget_seconds=RUN_BUDGET_SECONDS,
                 scenarios=[s.name for s in plan.scenarios], rows=dict(plan.rows))  # fmt: skip
    t2 = [r for r in report.checks if r.details.get("tier") == "T2"]
    t0 = [r for r in report.checks if r.details.get("tier") != "T2" and not r.passed]
    failures = [f"{r.name}: {r.details.get('error')}" for r in t0 if r.id.kind == "adapter"]
    violations = {r.name: int(r.statistic) if np.isfinite(r.statistic) else 1 for r in t0
                  if r.id.kind != "adapter"}  # fmt: skip
    return SeedRun(seed, t2, violations, failures, not report.passed, time.perf_counter() - started, report.plots)


def _worker(args: tuple) -> SeedRun:
    engine, names, rows, alpha, dtype, seed = args
    plan = _worker_plan(engine, tuple(names), tuple(sorted(rows.items())), alpha, dtype)
    return run_seed(plan, seed)


_PLANS: dict = {}


def _worker_plan(engine: str, names: tuple, rows: tuple, alpha: float, dtype: str) -> Plan:
    key = (engine, names, rows, alpha, dtype)
    if key not in _PLANS:
        _PLANS[key] = make_plan(engine, None, list(names), rows=dict(rows), seeds=1, alpha=alpha, dtype=dtype)
    return _PLANS[key]


def _pool(pooled: dict, plots: dict) -> None:
    for scenario, series in plots.items():
        into = pooled.setdefault(scenario, {})
        for key, entry in series.items():
            for field_name in ("observed", "rejected", "reached"):
                if field_name in entry:
                    value = np.asarray(entry[field_name], dtype=np.float64)
                    slot = f"{key}.{field_name}"
                    into[slot] = value if slot not in into else into[slot] + value
            if "expected" in entry:
                value = np.asarray(entry["expected"], dtype=np.float64)
                slot = f"{key}.expected"
                into[slot] = value if slot not in into else into[slot] + value
            if "z" in entry:
                into[f"{key}.z"] = float(entry["z"])


def sweep(plan: Plan, first_seed: int = 0, progress: Callable[[str], None] | None = None, jobs: int = 1) -> Sweep:
    """Seeds first_seed .. first_seed + plan.seeds - 1, in `jobs` worker processes (1: in this process)."""
    started = time.perf_counter()
    seeds = range(first_seed, first_seed + plan.seeds)
    runs: list[SeedRun] = []

    def tell(i: int) -> None:
        if progress and (i + 1) % max(1, plan.seeds // 10) == 0:
            progress(f"{plan.engine}: {i + 1}/{plan.seeds} seeds, {time.perf_counter() - started:.0f} s")

    if jobs <= 1:
        for i, seed in enumerate(seeds):
            runs.append(run_seed(plan, seed))
            tell(i)
    else:
        names = [s.name for s in plan.scenarios]
        work = [(plan.engine, names, plan.rows, plan.alpha, plan.dtype, seed) for seed in seeds]
        # spawn, not fork: a child forked after torch started its OpenMP pool hangs in its first parallel op
        with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
            for i, result in enumerate(pool.map(_worker, work, chunksize=4)):
                runs.append(result)
                tell(i)
    pooled: dict = {}
    for r in runs:
        _pool(pooled, r.plots)
        r.plots = {}  # the pooled sums keep what the power analysis needs
    if runs:
        plan.t2_names = [r.name for r in runs[0].t2]
    return Sweep(plan, runs, pooled, time.perf_counter() - started)
