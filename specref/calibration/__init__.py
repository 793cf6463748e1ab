"""Calibration as a meta-test: the conformance checks' real false-alarm rate and real power, measured.

    python -m specref.calibration [--seeds 2000] [--rows N] [--jobs J] [--quick] [--out reports]
                                                                           (nox -s calibration -- ...)

Every seed is one ordinary `specref.conformance.run` with a fixed number of rows per scenario: `batched` on every
scenario its capabilities allow, `reference` on a cheaper subset. The report gives the run-level false-alarm rate
at the family-wise alpha with its Clopper-Pearson interval (the verdict reads the upper bound), the false-alarm
rate of each check kind, the one-sided KS test of its p-values (Holm over the kinds), and the exact size of every
test family at the levels a run uses (specref.stats.size). Biased samplers from `specref.mutants.CATALOGUE` run the
same way: the fraction of seeds each is flagged, and each catching check's measured power against the design.

  sweep     one engine, many seeds, fixed rows per scenario, through specref.conformance.run
  analysis  false-alarm rates, KS, family-wise verdicts, power against the design
  sizes     the exact-size table
  curves    power of single checks over a grid of N, against the design's lower bound
  render    reports/calibration.md, calibration.json and (with matplotlib) the PNG plots
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..conformance.chain.adapters import as_adapter, builtin_adapters
from ..conformance.chain.scenarios import SCENARIOS as ALL_SCENARIOS
from ..mutants import CATALOGUE
from . import analysis, curves, figures, render, sizes
from .sweep import DEFAULT_ROWS, DTYPES, Sweep, make_plan, sweep

#: Every scenario (the adapter's capabilities decide which run, as in `specref conform`).
SCENARIOS = list(ALL_SCENARIOS)
#: The reference engine loops over rows in Python: a cheaper subset (zeros in p, Markov rows, ragged drafts).
REFERENCE_SCENARIOS = ["cf_zero_support_g3", "markov_g5", "ragged_g6"]
#: Biased samplers: lossy lenience 0.8, a residual floor, and three bugs of other classes.
MUTANTS = [
    "lenient_acceptance",
    "residual_floor_eps",
    "softmax_residual",
    "bonus_wrong_row",
    "shared_uniform_positions",
]
RUN_ALPHA = 1e-3


@dataclass(frozen=True)
class Settings:
    seeds: int = 2000  # the batched engine
    reference_seeds: int = 100  # the reference engine (a Python row loop)
    mutant_seeds: int = 50  # each biased sampler
    rows: int = DEFAULT_ROWS["default"]  # rows per scenario per seed (batched engine and mutants)
    large_rows: tuple[tuple[str, int], ...] = tuple((k, v) for k, v in DEFAULT_ROWS.items() if k != "default")
    reference_rows: int = 256  # rows per scenario per seed (reference engine)
    mutants: tuple[str, ...] = tuple(MUTANTS)
    alpha: float = RUN_ALPHA
    curve_seeds: int = 20  # seeds per point of each power curve
    curve_rows: tuple[int, ...] = (256, 512, 1024, 2048, 4096, 8192)
    jobs: int = 1  # worker processes for the seeds
    sizes: bool = True  # compute the exact-size table
    dtype: str = "float32"  # the dtype every adapter asks for (the harness gives rows exact in it)

    @classmethod
    def quick(cls) -> Settings:
        return cls(seeds=20, reference_seeds=5, mutant_seeds=5, rows=1024, reference_rows=128, curve_seeds=5,
                   curve_rows=(512, 2048))  # fmt: skip

    def rows_map(self) -> dict[str, int]:
        return {"default": self.rows, **dict(self.large_rows)}


def calibrate(
    settings: Settings,
    out: Path | None = None,
    progress: Callable[[str], None] | None = None,
    argv: list[str] | None = None,
) -> dict:
    """Run every sweep, analyse it, and (when out is given) write the report files. Returns the result dict."""
    if settings.dtype not in DTYPES:
        raise ValueError(f"dtype={settings.dtype!r} must be one of {DTYPES}")
    unknown = [name for name in settings.mutants if name not in CATALOGUE]
    if unknown:
        raise ValueError(f"mutants={unknown!r} are not in specref.mutants.CATALOGUE")
    started = time.perf_counter()
    tell = progress or (lambda message: None)
    factories = builtin_adapters()
    nulls: list[Sweep] = []
    for engine, names, rows, seeds in (
        ("batched", SCENARIOS, settings.rows_map(), settings.seeds),
        ("reference", REFERENCE_SCENARIOS, settings.reference_rows, settings.reference_seeds),
    ):
        if seeds < 1:
            continue
        plan = make_plan(engine, as_adapter(factories[engine]()), names, rows=rows, seeds=seeds, alpha=settings.alpha,
                         dtype=settings.dtype)  # fmt: skip
        nulls.append(sweep(plan, progress=tell, jobs=settings.jobs))
        tell(f"{engine}: done in {nulls[-1].seconds:.0f} s")
    power = []
    for name in settings.mutants if settings.mutant_seeds > 0 else ():
        mutant = CATALOGUE[name]
        plan = make_plan(name, as_adapter(mutant), SCENARIOS, rows=settings.rows_map(), seeds=settings.mutant_seeds,
                         alpha=settings.alpha, dtype=settings.dtype)  # fmt: skip
        biased = sweep(plan, first_seed=10_000, progress=tell, jobs=settings.jobs)  # seeds disjoint from the nulls'
        power.append(analysis.power_summary(biased, nulls[0] if nulls else None, mutant.caught_by, mutant.lossy))
        tell(f"{name}: done in {biased.seconds:.0f} s")
    curve_list = []
    if settings.curve_seeds > 0:
        curve_list = curves.power_curves(power, rows_grid=settings.curve_rows, seeds=settings.curve_seeds)
        tell(f"power curves: done ({len(curve_list)})")
    size_table = sizes.size_table() if settings.sizes else {}
    tell("exact sizes: done")
    p_values = {sw.plan.engine: analysis.p_values_by_kind(sw) for sw in nulls}
    result = {
        "argv": list(argv or []),
        "settings": dataclasses.asdict(settings),
        "run_alpha": settings.alpha,
        "null": [analysis.null_summary(sw) for sw in nulls],
        "power": power,
        "curves": curve_list,
        "sizes": size_table,
        "p_values": p_values,
        "wall_seconds": time.perf_counter() - started,
    }
    return finish(result, out)


def finish(result: dict, out: Path | None) -> dict:
    """Derived numbers (all kinds pooled, findings), then the report files when out is given."""
    for null in result["null"]:
        null["all_kinds"] = analysis.pooled_kinds(result["p_values"][null["engine"]])
    result["findings"] = analysis.findings(result)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        result["files"] = figures.plots(result, out) + [str(out / "calibration.md"), str(out / "calibration.json")]
        render.write_markdown(result, out)
        render.write_json(result, out)
    return result


def rerender(json_path: Path, out: Path) -> dict:
    """Rebuild the report files from a calibration.json, without running anything."""
    try:
        result = json.loads(Path(json_path).read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"json_path={str(json_path)!r} is not a readable calibration.json: {error}") from error
    if "p_values" not in result or "null" not in result:
        raise ValueError(f"json_path={str(json_path)!r} holds no calibration result")
    return finish(result, out)


__all__ = ["MUTANTS", "REFERENCE_SCENARIOS", "RUN_ALPHA", "SCENARIOS", "Settings", "calibrate", "rerender"]
