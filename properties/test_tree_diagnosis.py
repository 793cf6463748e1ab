"""Tree runs that keep the law but not the declared rule get the rule diagnosis, as chains do: every other tree rule
lossless on the adapter's drafting scheme tested on its own plan, and the acceptance ratio against the declared rule.

Statistical tier, power only (both assertions are failures to detect): specref's batched RSD engine on children drawn
without replacement, declared target_only. RSD accepts more than target_only on these scenarios (ratio well above
1 at 20,000 rows), so target_only's depth_acceptance fails, and the diagnosis finds RSD's own checks all pass
(a false alarm there, at the run's alpha 1e-3 split over its checks, would fail this test: at most 1e-3).
"""

from __future__ import annotations

import dataclasses

import pytest

from specref.conformance.engine.report import NON_CONFORMING
from specref.conformance.tree import run_tree
from specref.conformance.tree.adapters import batched_tree_adapter

pytestmark = pytest.mark.statistical


def test_rsd_declared_target_only_keeps_the_law_and_is_told_it_matches_rsd():
    rsd = batched_tree_adapter("rsd")  # without_replacement children
    declared = dataclasses.replace(rsd, name="rsd-declared-target-only", rule="target_only")
    report = run_tree(declared, seed=0, rows=20_000, scenarios=["tree_star_cf", "tree_eagle_markov"])
    assert report.verdict == NON_CONFORMING and report.law_kept, report.summary()
    d = report.rule_diagnosis
    assert d["against"] == "target_only" and d["acceptance_ratio"] > 1.05, d
    assert d["rules"]["rsd"]["matches"] and d["rules"]["rsd"]["checks"] > 0, d
    assert not d["rules"]["sample_match"]["matches"], d
    assert "it matches rule 'rsd'" in report.summary() and "those of rule 'target_only'" in report.summary()
    ruled = d["rules"]["rsd"]["ruled_out"]  # what the match rules out: a bound per kind, in its unit (fit.py)
    assert ruled and all(0 < e["worst"] < 1 and e["checks"] >= 1 for e in ruled.values()), ruled
    assert "it matches rule 'rsd': no deviation from its acceptance law detected above" in report.summary()
