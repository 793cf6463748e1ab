"""T3: Hypothesis-generated p/q through the harness's checks on the batched engine: P_SD = p, reject rate = Z,
accepted-length law and tau, for every relation between p and q (equal, disjoint, nested, near-equal, independent).

Each example is one harness run at its own alpha, a share of the "hypothesis" budget: the examples are
derandomized (conftest), so the number of runs is fixed at MAX_EXAMPLES and the family-wise false-alarm rate of
this file is at most the share. Power: 20k rows per example; with about six checks per run the first-token check
detects TV 0.028 (df 1) to 0.041 (df 63), and about 0.052 at V = 8193 (df ~230), with power 0.999; the test
asserts <= FIRST_TOKEN_TV whenever the check has a degree of freedom.
"""

from __future__ import annotations

import numpy as np
import pytest
from budget import alpha_for
from hypothesis import given, settings
from hypothesis import strategies as st

from specref import strategies as sst
from specref.conformance import builtin_adapters, run
from specref.conformance.chain.scenarios import context_free

pytestmark = pytest.mark.hypothesis_stat

MAX_EXAMPLES = 12
ROWS = 20_000
FIRST_TOKEN_TV = 0.07


@settings(max_examples=MAX_EXAMPLES)
@given(st.data())
def test_generated_pairs_keep_the_target_law(data):
    vocab_size = data.draw(sst.vocab_sizes(1, 8193), label="vocab_size")
    target_probs, draft_probs = data.draw(sst.pairs(vocab_size), label="target_probs, draft_probs")
    gamma = data.draw(sst.gammas(max_gamma=8), label="gamma")
    seed = data.draw(sst.seeds(), label="seed")
    scenario = context_free("generated", "Hypothesis-generated p/q", target_probs, draft_probs, gamma)
    report = run(builtin_adapters()["batched"](), seed=seed, alpha=alpha_for("hypothesis", MAX_EXAMPLES),
                 budget_seconds=600, rows=ROWS, scenarios=[scenario])  # fmt: skip
    first = next(r for r in report.checks if r.name == "first_token_law[generated]")
    assert first.df == 0 or first.detectable_tv <= FIRST_TOKEN_TV, first.summary()
    assert report.passed, (
        f"{report.summary()}\nreproduce: scenario = context_free('generated', '', {np.asarray(target_probs).tolist()},"
        f" {np.asarray(draft_probs).tolist()}, {gamma}); run(batched, seed={seed}, rows={ROWS}, scenarios=[scenario])"
    )
