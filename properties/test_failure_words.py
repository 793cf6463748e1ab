"""Failures a user can act on (issue 34): a certain failure prints its first violation in words, the offending token
with its p and q, not a raw dict; a failure that fits a known defect class names it with its fix."""

from __future__ import annotations

import re

import pytest

from specref.conformance import run
from specref.mutants import CATALOGUE

pytestmark = pytest.mark.exact


def summary_of(mutant: str) -> str:
    return run(CATALOGUE[mutant], rows=2000, scenarios=["cf_dense_g4"], budget_seconds=600).summary()


def test_a_residual_support_failure_names_the_token_its_p_and_q_and_the_fix():
    line = next(x for x in summary_of("softmax_residual").splitlines() if "FAIL t0_residual_support" in x)
    assert "{'scenario'" not in line, line
    assert re.search(r"emitted token \d+ \(p = [\d.e-]+, q = [\d.e-]+\) after rejecting draft \d+", line), line
    assert "draw it from the residual" in line


def test_a_non_strict_accept_test_is_named_with_its_fix():
    line = next(x for x in summary_of("accept_le_fp32").splitlines() if "FAIL rare_edge[accept]" in x)
    assert "a non-strict accept test; use `u < p/q`" in line, line
