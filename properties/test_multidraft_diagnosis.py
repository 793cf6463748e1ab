"""The tree rule diagnosis names SpecTr's K-SEQ and traversal verification for verifiers that follow them.

The reference engine under each rule, declared as the rule it extends (K-SEQ as SpecInfer's MSS on i.i.d. children,
traversal as RSD on children drawn without replacement), keeps the law, fails the declared rule's checks, and the
diagnosis finds the rule it follows. Statistical tier. False alarm: the true rule's checks failing in the diagnosis,
at most each run's alpha, alpha_for("multidraft", 2) (budget.py). Power: the declared rule's acceptance is far from
the true one on these scenarios (K-SEQ against MSS on tree_eagle_markov: depth_acceptance p ~ 1e-174 at 20,000
rows; traversal against RSD on tree_chain_cf, where traversal is block verification: p ~ 1e-17 at 60,000 rows),
so a miss has probability far below 1e-6.
"""

from __future__ import annotations

import dataclasses

import pytest
from budget import alpha_for

from specref.conformance.engine.report import NON_CONFORMING
from specref.conformance.tree import run_tree
from specref.conformance.tree.adapters import reference_tree_adapter

pytestmark = pytest.mark.statistical

ALPHA_RUN = alpha_for("multidraft", 2)


@pytest.mark.parametrize("rule, declared, rows, scenario", [("kseq", "mss", 20_000, "tree_eagle_markov"),
                                                            ("traversal", "rsd", 60_000, "tree_chain_cf")])  # fmt: skip
def test_the_diagnosis_names_the_rule_a_verifier_follows(rule, declared, rows, scenario):
    follows = dataclasses.replace(reference_tree_adapter(rule), name=f"{rule}-declared-{declared}", rule=declared)
    report = run_tree(follows, seed=0, rows=rows, scenarios=[scenario], alpha=ALPHA_RUN)
    assert report.verdict == NON_CONFORMING and report.law_kept, report.summary()
    fit = report.rule_diagnosis["rules"]
    assert fit[rule]["matches"] and fit[rule]["checks"] > 0, fit
    assert f"it matches rule {rule!r}" in report.summary()
