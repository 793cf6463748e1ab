"""The sampling contract, statistical parts: the reference and batched sampling built-ins conform (false alarm at most
the "sampling" share of the CI budget, properties/budget.py, split over the two runs: each run's family-wise alpha,
Holm within it), and each sampling mutant is flagged by the check meant for it at fixed rows (these assert a
failure, so they spend no budget; their risk is a miss).

Power: the mutants move the laws their checks test by 0.05 to 0.5 in TV (0.52 with min_p and the bias skipped, 0.21
with the top-k renormalised, 0.05 to 0.18 per drafted token for the penalties and 1 for the penalised greedy
request); at the rows below each was caught by its check on seeds 0..4 (5 of 5 each).
"""

from __future__ import annotations

import pytest
from budget import alpha_for

from specref.conformance import run
from specref.conformance.sampling.adapters import batched_sampling_adapter, reference_sampling_adapter
from specref.mutants.sampling import CATALOGUE

pytestmark = pytest.mark.statistical

ALPHA = alpha_for("sampling", 2)
SCENARIOS = ["mixed_params_g3", "masked_logits_g3", "min_p_bias_g2", "top_k_top_p_g3", "penalties_drafts_g2",
             "point_mass_g3"]  # fmt: skip


def test_the_batched_sampling_verifier_conforms():
    report = run(batched_sampling_adapter(), seed=5, alpha=ALPHA, rows=4096, scenarios=SCENARIOS)
    assert report.verdict == "conforming", report.summary()


def test_the_reference_sampling_verifier_conforms():
    report = run(reference_sampling_adapter(), seed=6, alpha=ALPHA, rows=1024, scenarios=SCENARIOS[:3])
    assert report.verdict == "conforming", report.summary()


CASES = [
    ("processors_skipped_on_verified_rows", ["min_p_bias_g2"], "first_token_law", 4096),
    ("top_k_renormalised_before_top_p", ["top_k_top_p_g3"], "first_token_law", 4096),
    ("penalties_before_the_step", ["penalties_drafts_g2"], "penalty_draft_law", 4096),
    ("raw_logprobs_as_processed", ["mixed_params_g3"], "logprob_value", 256),
]


@pytest.mark.parametrize("mutant, scenarios, expected, rows", CASES, ids=[c[0] for c in CASES])
def test_each_sampling_mutant_is_caught_by_its_check(mutant, scenarios, expected, rows):
    report = run(CATALOGUE[mutant], seed=3, alpha=1e-4, rows=rows, scenarios=scenarios)
    assert expected in report.caught_by(), report.summary()
