"""Tree conformance, statistical tier: every correct tree built-in passes `run_tree`, every tree mutant is flagged
by a check designed for it.

False alarms: the passing runs share the "trees" budget (budget.py): each run gets alpha_for("trees", runs), which
the harness splits over its T2 checks (Bonferroni, then Holm). T0 checks are certain and spend nothing.
Power: ROWS rows per scenario; each T2 check's detectable TV (or rate shift) at power 0.999 is in its record, and
test_power_is_stated asserts the bounds below (0.11 TV for the law, length and correction checks). A mutant run
spends no false-alarm budget (its failure is expected): each mutant's bug moves the law or the acceptance by far
more than its checks' detectable shift at MUTANT_ROWS (for rsd_raw_q the exact TV of its cycle law on
tree_duplicates_cf is 0.19, by enumeration); accept_le_fp32's edge is shown by the forced probe alone (certain).
"""

from __future__ import annotations

import math

import pytest
from budget import alpha_for

from specref.conformance.engine.report import LOSSY, NON_CONFORMING, RARE_EDGE
from specref.conformance.tree import builtin_tree_adapters, run_tree
from specref.mutants.trees import CAUGHT_BY, MUTANTS, SCENARIOS_FOR

pytestmark = pytest.mark.statistical

BUILTINS = list(builtin_tree_adapters())
ALPHA_RUN = alpha_for("trees", len(BUILTINS))
ROWS = 3000
MUTANT_ROWS = 4000
#: The detectable shift at power 0.999 each kind of check states at ROWS rows (measured: the chi-square checks
#: 0.079-0.10 TV; depth_acceptance 0.05-0.32 in rate, the larger at the least-reached depth of a scenario).
DETECTABLE_BOUND = {"depth_acceptance": 0.35}
DETECTABLE_TV = 0.11
_reports: dict = {}


def _run(name):
    if name not in _reports:
        _reports[name] = run_tree(builtin_tree_adapters()[name](), seed=5, alpha=ALPHA_RUN, rows=ROWS,
                                  budget_seconds=600)  # fmt: skip
    return _reports[name]


@pytest.mark.parametrize("name", BUILTINS)
def test_correct_builtin_passes(name):
    report = _run(name)
    assert report.passed, report.summary()
    assert report.verdict == f"lossless (declared rule {report.adapter.rule})"


@pytest.mark.parametrize("name", BUILTINS)
def test_power_is_stated(name):
    tested = [r for r in _run(name).checks if r.details.get("tier") == "T2"]
    assert tested
    for r in tested:
        bound = DETECTABLE_BOUND.get(r.name.split("[")[0], DETECTABLE_TV)
        assert math.isfinite(r.detectable_tv) and r.detectable_tv < bound, (r.name, r.detectable_tv)


@pytest.mark.parametrize("name", list(MUTANTS))
def test_mutant_is_flagged_by_its_check(name):
    mutant = MUTANTS[name]()
    report = run_tree(mutant, seed=1, rows=MUTANT_ROWS, scenarios=SCENARIOS_FOR[name], budget_seconds=600)
    assert not report.passed
    assert set(report.caught_by()) & CAUGHT_BY[name], (name, report.caught_by())
    if CAUGHT_BY[name] == {"rare_edge"}:  # a rare edge alone (the forced probe, edge_probe.py): its own verdict
        assert report.verdict == RARE_EDGE and report.caught_by() == ["rare_edge"]
        return
    assert report.verdict == (LOSSY if mutant.lossy and "reproducibility" not in report.caught_by()
                              else NON_CONFORMING)  # fmt: skip
