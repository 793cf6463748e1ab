"""The vocabulary's edge: the large scenarios put real mass, target and residual, on the last tokens and on the last
partial tile of every tile size from 1,024 to 8,192 (chain/token_laws.py: tail_tokens), and the rest of p on one token
in every tile of spread_tile(V) tokens, p = 0 elsewhere, so a blocked kernel that drops or mis-masks the tail fails a
law check and an emission anywhere else is a certain failure. The mutant `recovered_whole_tiles_only` (a
recovered-token sampler that scans only whole 8,192-token tiles, as vLLM's sample_recovered_tokens_kernel tiles)
moves 26% (V = 8,193) and 57% (V = 151,936) of the residual; at the rows below, which a 60 s run gives both scenarios
and more, correction_law and first_token_law each detect less than the distance it moves their law (asserted from the
run's own power statements, power 0.999 each), so the miss probability is below 1e-3 per check. The run asserts a
failure, so it spends no false-alarm budget."""

from __future__ import annotations

import numpy as np
import pytest

from specref.conformance import as_adapter, run
from specref.conformance.chain.scenarios import get
from specref.conformance.chain.token_laws import TILES, spread_tile, tail_tokens
from specref.mutants import CATALOGUE
from specref.mutants.bugs import TILE
from specref.stats.size import MAX_DF

LARGE = ("large_v8193_g2", "large_v151936_g1")
#: Fewer rows than a default 60 s run allocates them (2,102 and about 2,900 on this machine).
ROWS = {"large_v8193_g2": 1536, "large_v151936_g1": 512}


def _laws(name):
    scenario = get(name)
    target, draft = scenario.target[0], scenario.draft[0]
    return target, draft, np.clip(target - draft, 0, None)


@pytest.mark.exact
@pytest.mark.parametrize("name", LARGE)
def test_the_large_scenarios_put_target_and_residual_mass_on_every_tiles_tail(name):
    target, draft, residual = _laws(name)
    vocab = target.size
    for tile in TILES:
        partial = slice((vocab // tile) * tile, vocab)  # the last, partial tile of this size
        assert vocab % tile and target[partial].sum() >= 0.07, (tile, target[partial].sum())
        assert residual[partial].sum() / residual.sum() >= 0.07, tile
    last = [vocab - 1, vocab - 2]
    assert target[last].min() > 0.05 and (residual[last] > 0).all()
    assert set(last) <= set(tail_tokens(vocab))


@pytest.mark.exact
@pytest.mark.parametrize("name", LARGE)
def test_the_large_scenarios_spread_a_sparse_support_over_the_whole_vocabulary(name):
    target, draft, residual = _laws(name)
    vocab, tile = target.size, spread_tile(target.size)
    starts = np.arange(0, vocab, tile)
    assert (np.add.reduceat(target, starts) > 0.005).all() and (np.add.reduceat(residual, starts) > 0).all()
    support = np.flatnonzero(target)
    assert support.size - 1 <= MAX_DF, "the law checks keep every token a bin of its own"
    assert support.size <= vocab // 100, "p = 0 almost everywhere: an emission there is a certain failure"
    assert (draft > 0).all(), "the draft reaches every token: the kernel's accept test sees the whole vocabulary"
    assert target.size == get(name).vocab_size and get(name).row_elements == (get(name).gamma + 1) * vocab


def _moved(name) -> dict[str, float]:
    """The TV the whole-tiles mutant moves each law by, exactly: (first_token_law, correction_law)."""
    target, draft, residual = _laws(name)
    cut = (target.size // TILE) * TILE
    kept = residual.copy()
    kept[cut:] = 0
    kept /= kept.sum()
    accepted = np.minimum(target, draft)
    first = accepted + (1 - accepted.sum()) * kept
    return {"first_token_law": 0.5 * np.abs(first - target).sum(),
            "correction_law": 0.5 * np.abs(kept - residual / residual.sum()).sum()}  # fmt: skip


@pytest.mark.statistical
def test_a_sampler_that_scans_only_whole_8192_token_tiles_is_non_conforming():
    report = run(as_adapter(CATALOGUE["recovered_whole_tiles_only"]), scenarios=list(LARGE), rows=ROWS)
    failed = {c.name: c for c in report.failures}
    assert report.verdict == "non-conforming", report.summary()
    for name in LARGE:
        for kind, distance in _moved(name).items():
            check = failed.get(f"{kind}[{name}]")
            assert check is not None, (kind, name, report.summary())
            assert check.detectable_tv < distance, (check.name, check.detectable_tv, distance)  # the design's power
