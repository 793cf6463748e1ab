"""The drafts of a scenario's batch, drawn by its fast paths (every position at once for one-state scenarios, one
[B, V] comparison per position for small Markov ones), are the tokens the plain loop draws: an inverse CDF per
position and state on the same uniforms, stepped off a zero-probability token (chain/scenarios.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specref.conformance.chain import scenarios as S
from specref.conformance.chain.token_laws import seeded_rng

pytestmark = pytest.mark.exact


def _loop_drafts(s: S.Scenario, rows: int, seed: int, chunk) -> tuple[np.ndarray, np.ndarray]:
    rng = seeded_rng("inputs", seed, s.name, chunk)
    states = np.empty((rows, s.gamma + 1), dtype=np.int64)
    states[:, 0] = s.starts[rng.integers(len(s.starts), size=rows)]
    if s.identical_rows:
        draws = np.broadcast_to(seeded_rng("identical", seed, s.name).random(s.gamma), (rows, s.gamma))
    else:
        draws = rng.random((rows, s.gamma))
    cdf, tokens = np.cumsum(s.draft, 1), np.empty((rows, s.gamma), dtype=np.int64)
    for i in range(s.gamma):
        for state in np.unique(states[:, i]):
            here = np.flatnonzero(states[:, i] == state)
            picked = np.searchsorted(cdf[state], draws[here, i] * cdf[state, -1], side="right")
            tokens[here, i] = S._positive(s.draft[state], np.minimum(picked, s.vocab_size - 1))
        states[:, i + 1] = s.next_state[states[:, i], tokens[:, i]]
    return tokens, states


@pytest.mark.parametrize("name", [n for n, s in S.SCENARIOS.items() if not s.probe])
def test_fast_draft_paths_draw_the_loops_tokens(name):
    scenario = S.get(name).given(torch.bfloat16)  # rounded rows: zero-probability tokens where there were tiny ones
    for seed, chunk in ((0, 1), (3, 7)):
        batch = scenario.inputs(2000, seed, chunk)
        tokens, states = _loop_drafts(scenario, 2000, seed, chunk)
        if scenario.ragged:
            tokens[np.arange(scenario.gamma)[None, :] >= batch.num_draft[:, None]] = -1
        assert np.array_equal(batch.draft_tokens, tokens) and np.array_equal(batch.states, states)
