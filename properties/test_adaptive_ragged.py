"""Adaptive, variable-length verification passes as ragged drafts: a verifier that chooses how many of its drafts to
verify per row (properties/external_impls/adaptive_confidence.py: a confidence rule on the target's law at the prefix)
declares `adaptive`, returns the drafts it used, and the harness holds its laws to those rows.

Statistical tier. False alarm: the conforming run failing, at most its alpha, alpha_for("adaptive", 1) (budget.py).
Power: the same verifier without the declaration verifies 1 draft of cf_dense_g4's 4 and is flagged (accepted_length_law
sees accepted drafts ~0.3x the expected at 20,000 rows: p far below 1e-6). Certain: a verifier
claiming more drafts used than it was given is malformed.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
from budget import alpha_for

from specref.conformance import run
from specref.conformance.adapters import as_adapter
from specref.conformance.engine.report import CONFORMING, NON_CONFORMING

sys.path.insert(0, str(Path(__file__).parent / "external_impls"))
from adaptive_confidence import VERIFIER  # noqa: E402

SCENARIOS = ["cf_dense_g4", "cf_equal_g8", "mixed_batch_g3", "ragged_g6", "markov_g5", "joint_markov_g2"]


@pytest.mark.statistical
def test_adaptive_verifier_conforms_on_the_drafts_it_used():
    report = run(VERIFIER, seed=0, rows=20_000, scenarios=SCENARIOS, alpha=alpha_for("adaptive", 1))
    assert report.verdict == CONFORMING, report.summary()
    assert report.scenarios["joint_markov_g2"]["rows"] > 0


@pytest.mark.statistical
def test_undeclared_it_is_flagged():
    undeclared = dataclasses.replace(as_adapter(VERIFIER), adaptive=False, name="adaptive-undeclared")
    report = run(undeclared, seed=0, rows=20_000, scenarios=["cf_dense_g4"])
    assert report.verdict == NON_CONFORMING and report.law_kept, report.summary()


class _Overclaims:
    name = "adaptive-overclaims"
    ragged = adaptive = True

    def verify(self, target_probs, draft_probs, draft_tokens, generator, *, num_draft=None, return_num_draft=False):
        tokens, used = VERIFIER.verify(target_probs, draft_probs, draft_tokens, generator, num_draft=num_draft,
                                       return_num_draft=True)  # fmt: skip
        return tokens, used + draft_tokens.shape[1]


@pytest.mark.exact
def test_more_drafts_used_than_given_is_malformed():
    report = run(_Overclaims(), seed=0, rows=256, scenarios=["cf_dense_g4"])
    assert report.verdict == NON_CONFORMING and not report.law_kept
    assert any("num_draft_used" in str(c.details) for c in report.failures), report.summary()
