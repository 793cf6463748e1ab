"""What a lossy rule costs and buys, measured: for an adapter declaring lossy=True, per scenario, the TV of its
output law from the target's with an interval at the run's alpha (specref.stats.tv), and its accepted drafts per
cycle against exact speculative sampling on the same rows (laws.length_law under rule "exact").

The first-token law is measured on every scenario whose first token has the target's law p under a lossless rule
(rows drafted from q, not one fixed draft; not the rare-edge probe); the whole-sequence law, the first JOINT_TOKENS
tokens over repeated cycles, on the joint scenario, against laws.sequence_law. The accepted drafts come from the
scenarios whose accepted count the tally counts (not point-mass, probe, identical-rows or joint rows).
"""

from __future__ import annotations

import zlib

from ...stats.tv import tv_interval
from ..engine.joint import JOINT_TOKENS
from . import laws


def _seed(name: str) -> int:
    return zlib.crc32(f"lossy:{name}".encode())


def lossy_measure(tallies: dict, alpha: float) -> dict:
    """{"scenarios": {name: {"first_token": TV record, "sequence": TV record, "accepted_ratio", "accepted",
    "accepted_exact"}}, "alpha"}: every key only where the scenario measures it."""
    out: dict = {}
    for name, tally in tallies.items():
        sc = tally.scenario
        if not tally.rows or sc.probe or sc.identical_rows:
            continue
        entry: dict = {}
        if tally.joint is not None and tally.joint.sum():
            expected = laws.sequence_law(sc, int(sc.starts[0]), JOINT_TOKENS)
            entry["sequence"] = tv_interval(tally.joint, expected, alpha, _seed(name)).to_dict()
        elif tally.first.sum():
            expected = sc.target.T @ tally.first.sum(1)  # [V]: the start states' target rows, by their counts
            entry["first_token"] = tv_interval(tally.first.sum(0), expected, alpha, _seed(name)).to_dict()
        if not (sc.point_mass or sc.joint) and tally.length.sum():
            observed, exact = tally.mean_accepted("exact")
            cycles = float(tally.length.sum())
            entry.update(accepted=observed / cycles, accepted_exact=exact / cycles,
                         accepted_ratio=observed / exact if exact else None)  # fmt: skip
        if entry:
            out[name] = entry
    return {"alpha": alpha, "scenarios": out}


__all__ = ["lossy_measure"]
