"""The vocabulary's edge: the large scenarios put real mass, target and residual, on the last tokens and on the last
partial tile of every tile size from 1,024 to 8,192 (chain/scenarios.py: tail_tokens), so a blocked kernel that
drops or mis-masks the tail fails a law check. The mutant `recovered_whole_tiles_only` (a recovered-token sampler
that scans only whole 8,192-token tiles, as vLLM's Triton tiles) moves 0.31 of the residual, and fails
correction_law and first_token_law in both large scenarios at 512 rows, where they detect TV 0.19 (power 0.999):
the miss probability is below 1e-3 per check. The run asserts a failure, so it spends no false-alarm budget."""

from __future__ import annotations

import numpy as np
import pytest

from specref.conformance import as_adapter, run
from specref.conformance.chain.scenarios import TILES, get, tail_tokens
from specref.mutants import CATALOGUE

LARGE = ("large_v8193_g2", "large_v151936_g1")


@pytest.mark.exact
@pytest.mark.parametrize("name", LARGE)
def test_the_large_scenarios_put_target_and_residual_mass_on_every_tiles_tail(name):
    scenario = get(name)
    target, draft = scenario.target[0], scenario.draft[0]
    vocab = target.size
    residual = np.clip(target - draft, 0, None)
    for tile in TILES:
        partial = slice((vocab // tile) * tile, vocab)  # the last, partial tile of this size
        assert vocab % tile and target[partial].sum() >= 0.07, (tile, target[partial].sum())
        assert residual[partial].sum() / residual.sum() >= 0.07, tile
    last = [vocab - 1, vocab - 2]
    assert target[last].min() > 0.05 and (residual[last] > 0).all()
    assert set(last) <= set(tail_tokens(vocab))


@pytest.mark.statistical
def test_a_sampler_that_scans_only_whole_8192_token_tiles_is_non_conforming():
    report = run(as_adapter(CATALOGUE["recovered_whole_tiles_only"]), scenarios=list(LARGE), rows=512)
    failed = {c.name for c in report.failures}
    assert report.verdict == "non-conforming", report.summary()
    for name in LARGE:
        assert {f"correction_law[{name}]", f"first_token_law[{name}]"} <= failed, report.summary()
