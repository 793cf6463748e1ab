"""A lossy tree verifier measured (as chain/lossy.py for chains): per scenario the TV of the first token's law from
the target's at the root (or, on the joint scenario, of the first JOINT_TOKENS tokens over repeated cycles) with an
interval at the run's alpha (specref.stats.tv), and its accepted drafts against the exact law of the lossless rule it
declares, on the same rows and shapes."""

from __future__ import annotations

import zlib

import numpy as np

from ...stats.tv import tv_interval
from ..engine.joint import JOINT_TOKENS


def tree_lossy_measure(tallies: dict, declared: str, alpha: float) -> dict:
    out: dict = {}
    for name, tally in tallies.items():
        sc = tally.scenario
        if not tally.rows:
            continue
        seed = zlib.crc32(f"lossy:{name}".encode())
        entry: dict = {"against": declared}
        if sc.joint and tally.joint is not None and tally.joint.sum():
            entry["sequence"] = tv_interval(tally.joint, sc.sequence_law(JOINT_TOKENS), alpha, seed).to_dict()
        elif tally.first.sum():
            entry["first_token"] = tv_interval(tally.first, sc.target[sc.start], alpha, seed).to_dict()
            accepted = np.arange(tally.length.shape[1])
            observed = float(tally.length.sum(0) @ accepted)
            expected = float((tally.length.sum(1) @ tally.expected_length()) @ accepted)
            cycles = float(tally.length.sum())
            entry.update(accepted=observed / cycles, accepted_exact=expected / cycles,
                         accepted_ratio=observed / expected if expected else None)  # fmt: skip
        if "sequence" in entry or "first_token" in entry:
            out[name] = entry
    return {"alpha": alpha, "scenarios": out}


__all__ = ["tree_lossy_measure"]
