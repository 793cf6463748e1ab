"""T1: the rule comparison's exact expected tokens agree with the chain closed form and with block >= token."""

from __future__ import annotations

from fractions import Fraction

import pytest

from specref import rules_tau, theory

pytestmark = pytest.mark.exact


def test_chain_rows_match_closed_forms_and_block_is_never_worse(tmp_path):
    rows = rules_tau.compare(names=["close", "far"], shapes=["chain g=1", "chain g=2", "chain g=3"])
    assert len(rows) == 6
    for row in rows:
        a, g = Fraction(row["acceptance"]), row["depth"]
        assert row["tau"]["token verification"] == theory.expected_tau(a, g)  # (1 - a^(g+1)) / (1 - a)
        assert row["tau"]["block verification"] >= row["tau"]["token verification"]
        assert 1 <= row["tau"]["sample-and-match"] <= row["tau"]["token verification"]
    assert rows[0]["tau"]["block verification"] == rows[0]["tau"]["token verification"]  # g = 1: the same rule
    rules_tau.write_report(rows, tmp_path)
    report = (tmp_path / "rules.md").read_text()
    assert "| close | 0.900 | chain g=2 | 2 | 2.7100 |" in report


def test_random_sibling_order_never_beats_index_order_on_the_compared_trees():
    """The trees compared put the largest subtree first (or have equal subtrees): random order accepts no more, and
    exactly as much on stars and the binary tree; strictly less on the EAGLE-like tree."""
    rows = rules_tau.compare(names=["far", "context-dependent V=3"], shapes=["star K=3", "binary depth 2",
                                                                          "EAGLE-like 3+2+1"])  # fmt: skip
    for row in rows:
        index, random = row["tau"]["MSS, i.i.d. children"], row["tau"]["MSS, random sibling order"]
        assert random < index if row["shape"].startswith("EAGLE") else random == index, row
    assert rows[2]["tau"]["MSS, random sibling order"] == Fraction(16921, 9375)  # far, EAGLE-like: 1.8049 vs 1.8720
