"""Power curves: one biased sampler, one catching check, measured power against the design over a grid of N.

The main power table measures each sampler at one N. Here a single check is followed from the N where the design
promises nothing to the N where it promises power near 1: at each N, every seed runs the check's scenario (its
whole T2 plan, each check at the main run's Bonferroni alpha) and the measured detection rate is set against the
design's lower bound at the sampler's distance (analysis.designed_power; the distance is the one pooled over the
main power sweep). The design is a worst case over all laws at that distance, so measured power should lie on or
above the bound.
"""

from __future__ import annotations

import numpy as np

from ..conformance.chain import tally as checks
from ..conformance.chain.adapters import as_adapter
from ..conformance.chain.scenarios import SCENARIOS
from ..mutants import CATALOGUE
from .analysis import designed_power, rate
from .sweep import make_plan, sweep

#: (biased sampler, scenario, check kind): checks whose catch is statistical, not a certain T0 violation.
CURVES = (
    ("lenient_acceptance", "cf_dense_g4", "reject_rate"),
    ("lenient_acceptance", "cf_dense_g4", "first_token_law"),
    ("softmax_residual", "cf_dense_g4", "correction_law"),
    ("shared_uniform_positions", "cf_dense_g4", "accepted_length_law"),
    ("bonus_wrong_row", "markov_g5", "bonus_law"),
)
FIRST_SEED = 20_000  # disjoint from the main sweeps' seeds


def power_curve(
    mutant: str, scenario: str, kind: str, *, rows_grid: tuple[int, ...], seeds: int, check_alpha: float,
    distance: float,
) -> dict:  # fmt: skip
    """Measured detection rate of `kind[scenario]` on `mutant` at each N in rows_grid, with the design's bound."""
    plan_kinds = checks.t2_plan(SCENARIOS[scenario])
    if kind not in plan_kinds:
        raise ValueError(f"kind={kind!r} is not planned on scenario={scenario!r} (plan: {plan_kinds})")
    name = f"{kind}[{scenario}]"
    points = []
    for rows in rows_grid:
        plan = make_plan(f"{mutant}@{rows}", as_adapter(CATALOGUE[mutant]), [scenario], rows=rows, seeds=seeds,
                         alpha=check_alpha * len(plan_kinds))  # fmt: skip
        result = sweep(plan, first_seed=FIRST_SEED)
        records = [r for run in result.runs for r in run.t2 if r.name == name]
        points.append({
            "rows": rows,
            "n_median": float(np.median([r.n for r in records])),
            "detected": rate(sum(not r.passed for r in records), len(records)),
            "guaranteed_median": float(np.median([r.guaranteed_tv for r in records])),
            "designed_power_lower_bound": designed_power(records, distance),
            "seconds": result.seconds,
        })  # fmt: skip
    return {"mutant": mutant, "check": name, "distance": distance, "check_alpha": check_alpha, "seeds": seeds,
            "points": points}  # fmt: skip


def power_curves(power: list[dict], *, rows_grid: tuple[int, ...], seeds: int) -> list[dict]:
    """Every CURVES entry whose sampler ran in the main power sweep (its distance and alpha come from there)."""
    out = []
    for mutant, scenario, kind in CURVES:
        summary = next((m for m in power if m["engine"] == mutant), None)
        if summary is None:
            continue
        entry = next((c for c in summary["checks"] if c["check"] == f"{kind}[{scenario}]"), None)
        if entry is None or not np.isfinite(entry["distance"]):
            continue
        out.append(power_curve(mutant, scenario, kind, rows_grid=rows_grid, seeds=seeds,
                               check_alpha=summary["bonferroni_alpha"], distance=entry["distance"]))  # fmt: skip
    return out
