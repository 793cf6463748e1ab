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
