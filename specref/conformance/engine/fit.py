"""What a rule fit rules out: the largest deviation each of its check kinds would have detected (power 0.999), so
"it matches rule R" is never read as a fit beyond what its checks could see.

    ruled = ruled_out(results)    # {kind: {"distance": "TV", "worst": 0.052, "scenario": "markov_g5", "checks": 14}}
    fit_words(ruled)   # "no deviation from its acceptance law detected above TV 0.052 in accepted_length_law, ..."

Each check states the distance it detects at its N and alpha (CheckResult.guaranteed_tv, in its kind's unit:
registry.CheckKind.distance); the worst over a kind's scenarios is what the kind rules out in every scenario it ran.
"""

from __future__ import annotations

import math

from . import registry
from .sizing import BETA


def ruled_out(results) -> dict[str, dict]:
    """{kind: its worst (largest) detectable distance over the tested T2 results, the scenario there, its unit and
    how many checks}; kinds with no finite distance are left out."""
    out: dict[str, dict] = {}
    for r in results:
        tv = r.guaranteed_tv
        if r.details.get("tier") == "T0" or "not_tested" in r.details or not math.isfinite(tv):
            continue
        kind = registry.kinds().get(r.id.kind)
        entry = out.setdefault(r.id.kind, {"distance": kind.distance if kind else "TV", "worst": tv,
                                           "scenario": r.id.scenario, "checks": 0})  # fmt: skip
        entry["checks"] += 1
        if tv > entry["worst"]:
            entry["worst"], entry["scenario"] = tv, r.id.scenario
    return out


def fit_words(ruled: dict[str, dict], power: float = 1 - BETA) -> str:
    """The deviations a matching rule's checks rule out, in words (power `power` at each check's alpha)."""
    if not ruled:
        return "no deviation bound stated (no statistical rule check with power)"
    parts = [f"{e['distance']} {e['worst']:.3g} in {kind}" for kind, e in sorted(ruled.items())]
    return (
        f"no deviation from its acceptance law detected above {', '.join(parts)} (the worst scenario of each "
        f"kind; power {power:g})"
    )


__all__ = ["fit_words", "ruled_out"]
