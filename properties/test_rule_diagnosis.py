"""The rule diagnosis tests every other rule on its own full plan, certain checks included, and never says
"matches" over zero checks.

Was: the other rule was tested only on the kinds the declared rule's plan had given alpha, so its certain checks
were skipped: a verifier that samples exactly everywhere except sample-and-match on p == q rows, declared `match`,
was told "it matches rule 'exact'" although exact sampling never rejects there (Z = 0) and it rejected thousands of
times. Both assertions below are failures to detect (power): the mixed verifier rejects on cf_equal_g8 with
probability 1 - sum p^2 per row, thousands of times in 20,000 rows, a certain failure of exact's reject_rate; and it
accepts as exact sampling does elsewhere, which differs from sample-and-match by more than 0.1 in the reject rate
of cf_dense_g4 (power 0.999 at 20,000 rows, docs/statistics.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from specref.conformance import run
from specref.conformance.chain.diagnosis import rule_fit
from specref.conformance.chain.scenarios import get
from specref.conformance.chain.tally import Tally
from specref.conformance.engine.report import NON_CONFORMING

IMPLS = Path(__file__).parent / "external_impls"
sys.path.insert(0, str(IMPLS))
import mixed_rule  # noqa: E402

SCENARIOS = ["cf_dense_g4", "cf_near_equal_g4", "cf_equal_g8", "markov_g5"]
ROWS = 20_000


@pytest.mark.statistical
@pytest.mark.parametrize("verifier", [mixed_rule.verify, mixed_rule.MATCH_DECLARED], ids=["exact", "match"])
def test_a_verifier_mixing_two_rules_is_told_no_known_rule_fits(verifier):
    report = run(verifier, seed=0, scenarios=SCENARIOS, rows=ROWS)
    assert report.verdict == NON_CONFORMING and report.law_kept, report.summary()
    other = report.rule_diagnosis["rules"]["exact" if report.adapter.rule == "match" else "match"]
    assert not any(fit["matches"] for fit in report.rule_diagnosis["rules"].values()), report.rule_diagnosis
    assert not other["matches"] and other["checks"] > 0 and other["failed"], report.rule_diagnosis
    if report.adapter.rule == "match":  # exact's certain check: a rejection where exact sampling has Z = 0
        assert "reject_rate[cf_equal_g8]" in other["failed"]
    else:
        assert "reject_rate[cf_equal_g8]" in {r.name for r in report.failures}
    assert "it matches no rule specref knows" in report.summary()


@pytest.mark.exact
def test_no_rule_matches_over_zero_checks():
    """Was all([]): 'matches' over 0 checks."""
    empty = {"cf_dense_g4": Tally(get("cf_dense_g4"), seed=0, rule="exact")}  # no rows: nothing tested
    fit = rule_fit(empty, "match", 1e-3)
    assert fit["checks"] == 0 and not fit["matches"]


@pytest.mark.statistical
def test_block_verification_declared_exact_is_told_it_follows_block():
    """The batched block engine, declared nothing (rule exact): the law is kept, the acceptance is block's, and it
    accepts more drafts than exact sampling (power: block's accepted-count law differs from the token rule's by TV
    > 0.05 on these scenarios, test_block_laws_exact.py; 20,000 rows detect 0.03 with power 0.999)."""
    from budget import alpha_for

    from specref.batched.block import verify_block

    alpha = alpha_for("block", 4)  # one of test_block_conformance.RUNS: block's fit must pass
    report = run(verify_block, seed=0, alpha=alpha, scenarios=SCENARIOS, rows=ROWS)
    assert report.verdict == NON_CONFORMING and report.law_kept, report.summary()
    rules = report.rule_diagnosis["rules"]
    assert rules["block"]["matches"] and rules["block"]["checks"] > 0, report.rule_diagnosis
    assert not rules["match"]["matches"], report.rule_diagnosis
    assert report.rule_diagnosis["acceptance_ratio"] > 1.02
    assert "it matches rule 'block': no deviation from its acceptance law detected above TV" in report.summary()
    assert rules["block"]["ruled_out"]["accepted_length_law"]["worst"] < 0.05  # what the match rules out (fit.py)
