"""A tree verifier declaring its sibling order ("mss:random-order") is checked against that order's exact law, and
one that tests siblings in random order while declaring plain mss keeps the law, fails the rule checks, and is told
which rule it follows.

Statistical tier, 4,000 fixed rows per scenario on the two scenarios whose laws differ between the orders
(tree_eagle_markov, tree_ragged_markov), family-wise alpha 1e-3 per run. Error rates: a false failure of a correct
declaration, of the law checks, or of the diagnosis's match each has probability at most 1e-3 (each is tested at
an alpha split by Bonferroni from 1e-3); the assertions that a wrong rule is detected are power only (p-values
below 1e-100 at these rows).
"""

from __future__ import annotations

import dataclasses

import pytest

from specref.conformance.engine.report import NON_CONFORMING
from specref.conformance.tree import run_tree
from specref.conformance.tree.adapters import batched_tree_adapter, reference_tree_adapter

pytestmark = pytest.mark.statistical

RANDOM = "mss:random-order"
SCENARIOS = ["tree_eagle_markov", "tree_ragged_markov"]
ROWS = 4000


def test_random_order_declared_as_such_conforms():
    report = run_tree(reference_tree_adapter(RANDOM), seed=0, rows=ROWS, scenarios=SCENARIOS)
    assert report.passed, report.summary()
    assert "declared rule mss:random-order" in report.verdict.lower(), report.verdict


def test_random_order_declared_mss_keeps_the_law_and_is_told_it_matches_the_variant():
    declared = dataclasses.replace(reference_tree_adapter(RANDOM), name="random-order-declared-mss", rule="mss")
    report = run_tree(declared, seed=0, rows=ROWS, scenarios=SCENARIOS)
    assert report.verdict == NON_CONFORMING and report.law_kept, report.summary()
    d = report.rule_diagnosis
    assert d["against"] == "mss" and d["acceptance_ratio"] < 0.9, d  # exact ratio of the two laws here: 0.826
    assert d["rules"][RANDOM]["matches"] and d["rules"][RANDOM]["checks"] > 0, d
    assert not d["rules"]["sample_match"]["matches"], d
    assert "it matches rule 'mss:random-order'" in report.summary()


def test_index_order_declared_random_order_is_told_it_matches_mss():
    engine = batched_tree_adapter("mss")
    declared = dataclasses.replace(engine, name="mss-declared-random-order", rule=RANDOM, uniforms=False)
    report = run_tree(declared, seed=0, rows=ROWS, scenarios=SCENARIOS)
    assert report.verdict == NON_CONFORMING and report.law_kept, report.summary()
    d = report.rule_diagnosis
    assert d["against"] == RANDOM and d["acceptance_ratio"] > 1.1, d
    assert d["rules"]["mss"]["matches"] and not d["rules"]["sample_match"]["matches"], d
