"""The forced rare-edge probe's design on chain rows (edges/probe.py runs it): two batches of g = 1 rows.

  accept  p = (0, 3/8, 5/8, 0), q = (1/2, 0, 0, 1/2): every accept test has p/q = 0 and the residual is p, whose
          first token has probability 0 (the scenario PROBE).
  bonus   p = q = (0, 3/8, 5/8, 0): every draft is accepted (p/q = 1), and the bonus row starts with a zero.
The tree contract runs the same rows as one-node trees (tree/contract.py).
"""

from __future__ import annotations

import numpy as np
import torch

from ..edges.probe import ROWS
from .scenarios import PROBE, Batch, Scenario, context_free, get
from .tally import t0_violations

_ZERO_FIRST = np.array([0.0, 0.375, 0.625, 0.0])


def bonus_scenario() -> Scenario:
    """p = q = (0, 3/8, 5/8, 0), g = 1: every draft accepted, the bonus row starting with a zero."""
    return context_free("edge_bonus_g1", "edge probe: p == q, every draft accepted, bonus row starts with p = 0",
                        _ZERO_FIRST, _ZERO_FIRST.copy(), 1, rows_per_call=ROWS)  # fmt: skip


def probe_batch(name: str, dtype: torch.dtype, rows: int = ROWS, seed: int = 0) -> Batch:
    """The edge probe's batch `name` ('accept' or 'bonus') as a `dtype` verifier is given it."""
    if name == "accept":
        return get(PROBE).given(dtype).inputs(rows, seed, "edge")
    if name == "bonus":
        return bonus_scenario().given(dtype).inputs(rows, seed, "edge")
    raise ValueError(f"name={name!r} must be 'accept' or 'bonus'")


def classify(batch_name: str, batch: Batch, out: np.ndarray, target_seen: np.ndarray) -> dict[int, str]:
    """{row: edge} for the rows whose output breaks a T0 check: 'accept', 'correction', 'bonus' or the check."""
    vocab = target_seen.shape[-1]
    violations, _ = t0_violations(batch, out, target_seen, vocab)
    found = {}

    def zero(row: int, token: int, position: int = 0) -> bool:
        return 0 <= token < vocab and target_seen[row, position, token] <= 0

    for row in np.flatnonzero(np.any(np.stack(list(violations.values())), axis=0)):
        first, last = int(out[row, 0]), int(out[row, 1])
        draft = int(batch.draft_tokens[row, 0])
        if batch_name == "accept" and first == draft and last != -1 and zero(row, draft):
            found[int(row)] = "accept"
        elif batch_name == "accept" and last == -1 and zero(row, first):
            found[int(row)] = "correction"
        elif batch_name == "bonus" and first == draft and zero(row, last, 1):
            found[int(row)] = "bonus"
        else:
            found[int(row)] = next(name for name, bad in violations.items() if bad[row])
    return found


class ChainDesign:
    """The probe's design for the chain contract (edges/probe.ProbeDesign): the rows as they are; injected uniforms
    [B, 2] in specref's convention, u_0 the accept test and u_1 the final draw."""

    def batch(self, name: str, dtype: torch.dtype, rows: int, seed: int) -> tuple[Batch, Batch]:
        batch = probe_batch(name, dtype, rows, seed)
        return batch, batch

    def classify(self, batch_name: str, batch: Batch, out: np.ndarray, target_seen: np.ndarray) -> dict[int, str]:
        return classify(batch_name, batch, out, target_seen)

    def correction_column(self, adapter) -> int:
        return 1


DESIGN = ChainDesign()

__all__ = ["DESIGN", "ChainDesign", "bonus_scenario", "classify", "probe_batch"]
