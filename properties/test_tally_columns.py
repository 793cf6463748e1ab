"""The chain tally's columnar counts (one bincount per table and call, chain/tally.py) are the plain per-row count:
every row T0-checked in order and charged to the first check it breaks, the rest counted one by one, on real
outputs of the batched engine with rows broken on purpose (bad ids, padding, prefixes, zero-probability tokens)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specref.batched import verify
from specref.conformance.chain import scenarios as S
from specref.conformance.chain.form import CHAIN
from specref.conformance.chain.tally import T0_CHECKS, Tally
from specref.conformance.engine.callform import _arguments, _job

pytestmark = pytest.mark.exact

ROWS = 240
NAMES = [n for n, s in S.SCENARIOS.items() if not s.probe and s.vocab_size < 1000]


def _call(s: S.Scenario, seed: int, chunk: int):
    batch = s.inputs(ROWS, seed, chunk)
    job, seen = _job(batch, seed * 1000 + chunk, torch.float32, "cpu", {"ragged": True}, None, None, CHAIN)
    args, kwargs = _arguments(job)
    return batch, CHAIN.read(verify(*args, **kwargs), job), seen


def _break(out: np.ndarray, batch, seen: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Some rows broken by one of five faults, each an edit a buggy verifier could make."""
    out = out.copy()
    v = seen.shape[-1]
    for row in rng.choice(len(out), size=len(out) // 4, replace=False):
        fault, k = int(rng.integers(5)), int((out[row] >= 0).sum())
        if fault == 0:
            out[row, rng.integers(k)] = v + int(rng.integers(3))  # an id past V
        elif fault == 1 and k >= 2:
            out[row, 0] = -1  # a hole before emitted tokens
        elif fault == 2:
            out[row] = -1  # nothing emitted
        elif fault == 3 and k >= 2:
            out[row, 0] = (out[row, 0] + 1) % v  # an accepted draft that is not the draft
        else:
            zeros = np.flatnonzero(seen[row, k - 1] <= 0)
            if zeros.size:
                out[row, k - 1] = zeros[0]  # a token of probability 0
    return out


def _plain(s: S.Scenario, calls) -> dict:
    """The counts, row by row."""
    sv, v, g = s.target.shape[0], s.vocab_size, s.gamma
    strata = sv * v if s.point_mass else sv
    c = {"first": np.zeros((sv, v), np.int64), "correction": np.zeros((strata, v), np.int64),
         "bonus": np.zeros((sv, v), np.int64), "length": np.zeros((sv, g + 1, g + 1), np.int64),
         "reached": np.zeros(g, np.int64), "rejected": np.zeros(g, np.int64), "pairs": np.zeros((v, v), np.int64),
         "violations": dict.fromkeys(T0_CHECKS[:4], 0)}  # fmt: skip
    for batch, out, seen in calls:
        good = []
        for r, o in enumerate(out.tolist()):
            nd, d, st = int(batch.num_draft[r]), batch.draft_tokens[r].tolist(), batch.states[r].tolist()
            k = next((i for i, x in enumerate(o) if x < 0), len(o))
            a = min(max(k - 1, 0), g)
            broken = [
                not all(x == -1 or 0 <= x < v for x in o),
                sum(x >= 0 for x in o) != k or not 1 <= k <= nd + 1,
                any(o[i] != d[i] for i in range(a)),
                any(x >= 0 and seen[0][r, i, min(x, v - 1) if x < v else 0] <= 0 for i, x in enumerate(o)),
            ]
            if any(broken):
                c["violations"][T0_CHECKS[broken.index(True)]] += 1
                good.append(False)
                continue
            good.append(True)
            c["first"][st[0], o[0]] += 1
            c["length"][st[0], nd, a] += 1
            if a < nd:
                c["correction"][st[a] * v + d[a] if s.point_mass else st[a], o[a]] += 1
            else:
                c["bonus"][st[a], o[a]] += 1
            for i in range(g):
                c["reached"][i] += nd > i and a >= i
                c["rejected"][i] += nd > i and a == i
        for r in range(0, len(out) - 1, 2):
            if s.identical_rows and good[r] and good[r + 1]:
                c["pairs"][out[r, 0], out[r + 1, 0]] += 1
    return c


@pytest.mark.parametrize("name", NAMES)
def test_columnar_tally_is_the_per_row_count(name):
    s = S.get(name).given(torch.float32)
    rng = np.random.default_rng(len(name))
    calls = []
    for chunk in range(3):
        batch, out, seen = _call(s, 5, chunk)
        calls.append((batch, out if chunk == 0 else _break(out, batch, seen[0], rng), seen))
    tally = Tally(s)
    for batch, out, seen in calls:
        tally.add(batch, out, seen, {"scenario": name, "chunk": 0})
    plain = _plain(s, calls)
    assert {k: tally.violations[k] for k in T0_CHECKS[:4]} == plain["violations"]
    assert sum(plain["violations"].values()) > 0
    for array in ("first", "correction", "bonus", "length", "reached", "rejected"):
        assert np.array_equal(getattr(tally, array), plain[array]), array
    if s.identical_rows:
        assert np.array_equal(tally.pairs, plain["pairs"])
        assert tally.pairs.sum() > 0
