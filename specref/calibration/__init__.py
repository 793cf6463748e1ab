"""Calibration as a meta-test: the conformance checks' real false-alarm rate and real power, measured.

    python -m specref.calibration [--seeds 200] [--quick] [--out reports]     (nox -s calibration)

Correct engines (`batched` on every calibration scenario, `reference` on a cheaper subset) run the harness's checks
over many seeds: the report gives the false-alarm rate of each check kind at several levels and of the whole run at
its family-wise alpha, each with a Clopper-Pearson interval, and the uniformity of the p-values (KS test, QQ plot).
Biased samplers from `specref.mutants.CATALOGUE` run the same plan: the report gives the fraction of seeds each is
flagged, and compares each catching check's measured power with the design's lower bound.

  sweep     one engine, many seeds, fixed rows per scenario (the runner's plan, budget split and Holm)
  analysis  false-alarm rates, KS, family-wise verdicts, power against the design
  curves    power of single checks over a grid of N, against the design's lower bound
  render    reports/calibration.md, calibration.json, calibration_qq.png, calibration_power.png
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..conformance.adapters import as_adapter, builtin_adapters
from ..mutants import CATALOGUE
from . import analysis, curves, render
from .sweep import Sweep, make_plan, sweep

#: Small-vocabulary scenarios that together run every T2 kind but the joint law (whose sequences span cycles),
#: including a sparse one (near-equal p and q: few rejections, so few correction draws).
SCENARIOS = [
    "cf_dense_g4",
    "cf_zero_support_g3",
    "cf_near_equal_g4",
    "markov_g5",
    "mixed_batch_g3",
    "ragged_g6",
    "point_mass_g4",
    "identical_rows_g2",
]
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
    seeds: int = 200  # correct engines
    mutant_seeds: int = 100  # each biased sampler
    rows: int = 8192  # rows per scenario per seed (batched engine and mutants)
    reference_rows: int = 1024  # rows per scenario per seed (reference engine)
    mutants: tuple[str, ...] = tuple(MUTANTS)
    alpha: float = RUN_ALPHA
    curve_seeds: int = 50  # seeds per point of each power curve
    curve_rows: tuple[int, ...] = (256, 512, 1024, 2048, 4096, 8192)

    @classmethod
    def quick(cls) -> Settings:
        return cls(seeds=20, mutant_seeds=10, rows=2048, reference_rows=256, curve_seeds=10, curve_rows=(512, 2048))


def calibrate(
    settings: Settings,
    out: Path | None = None,
    progress: Callable[[str], None] | None = None,
    argv: list[str] | None = None,
) -> dict:
    """Run every sweep, analyse it, and (when out is given) write the report files. Returns the result dict."""
    unknown = [name for name in settings.mutants if name not in CATALOGUE]
    if unknown:
        raise ValueError(f"mutants={unknown!r} are not in specref.mutants.CATALOGUE")
    started = time.perf_counter()
    tell = progress or (lambda message: None)
    factories = builtin_adapters()
    nulls: list[Sweep] = []
    for engine, names, rows in (
        ("batched", SCENARIOS, settings.rows),
        ("reference", REFERENCE_SCENARIOS, settings.reference_rows),
    ):
        plan = make_plan(engine, factories[engine](), names, rows=rows, seeds=settings.seeds, alpha=settings.alpha)
        nulls.append(sweep(plan, progress=tell))
        tell(f"{engine}: done in {nulls[-1].seconds:.0f} s")
    power = []
    for name in settings.mutants:
        mutant = CATALOGUE[name]
        plan = make_plan(
            name, as_adapter(mutant), SCENARIOS, rows=settings.rows, seeds=settings.mutant_seeds, alpha=settings.alpha
        )
        biased = sweep(plan, first_seed=10_000, progress=tell)  # seeds disjoint from the correct engines'
        power.append(analysis.power_summary(biased, nulls[0], mutant.caught_by, mutant.lossy))
        tell(f"{name}: done in {biased.seconds:.0f} s")
    curve_list = curves.power_curves(power, rows_grid=settings.curve_rows, seeds=settings.curve_seeds)
    tell(f"power curves: done ({len(curve_list)})")
    p_values = {sw.plan.engine: analysis.p_values_by_kind(sw) for sw in nulls}
    result = {
        "argv": list(argv or []),
        "settings": dataclasses.asdict(settings),
        "run_alpha": settings.alpha,
        "null": [analysis.null_summary(sw) for sw in nulls],
        "power": power,
        "curves": curve_list,
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
        result["files"] = [
            str(render.plot_qq(result, result["p_values"], out)),
            str(render.plot_power(result, out)),
            str(render.plot_curves(result, out)),
            str(out / "calibration.md"),
            str(out / "calibration.json"),
        ]
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
