"""T2 teeth: deliberately wrong samplers fail the check designed to catch them, at CI sample sizes.

These runs assert a failure, so they spend no false-alarm budget; their risk is a miss. The seeds are fixed, so each
run is deterministic; for five of these samplers (lenient, residual floor, softmax residual, bonus from the wrong
row, uniforms shared across positions) reports/calibration.md measures the miss rate over 100 seeds at 8,192 rows
per scenario, a twelfth of the rows used here: 0/100 runs missed.
"""

from __future__ import annotations

import pytest

from specref.conformance import as_adapter, run
from specref.mutants import CATALOGUE

pytestmark = pytest.mark.statistical

CASES = [
    # mutant, scenarios to run it on, the check kind that must catch it
    ("softmax_residual", ["cf_dense_g4"], "correction_law"),
    ("bonus_wrong_row", ["markov_g5"], "bonus_law"),
    ("shared_uniform_positions", ["cf_dense_g4"], "accepted_length_law"),
    ("lenient_acceptance", ["cf_dense_g4"], "first_token_law"),
    ("residual_floor_eps", ["cf_zero_support_g3"], "t0_zero_prob_emitted"),
    ("continue_after_reject", ["cf_dense_g4"], "t0_prefix_is_drafts"),
    ("greedy_verification", ["cf_dense_g4"], "first_token_law"),
    ("shared_uniform_rows", ["identical_rows_g2"], "row_independence"),
    ("batch_composition", ["mixed_batch_g3"], "batch_composition"),
]


@pytest.mark.parametrize("mutant, scenarios, expected", CASES, ids=[c[0] for c in CASES])
def test_wrong_sampler_is_caught_by_its_check(mutant, scenarios, expected):
    report = run(as_adapter(CATALOGUE[mutant]), seed=3, alpha=1e-4, budget_seconds=300, rows=100_000,
                 scenarios=scenarios)  # fmt: skip
    assert expected in report.caught_by(), report.summary()
