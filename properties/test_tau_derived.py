"""The mean tokens per cycle tau is a derived number, not a check (issue 33 item 8, reports/one-table.md).

Exact tier: no check kind `mean_tau` is declared or planned, so no alpha goes to it; the derived tau's theory value is
the closed form (1 - a^(g+1)) / (1 - a) on a context-free scenario; its Hoeffding interval covers the true mean at
its level on seeded multinomial tables (a bound valid for every law, so its coverage is at least LEVEL; of 2,000
tables at coverage 0.95 fewer than 1,830 are covered with probability 2e-11); and a run's report.json and
report.md carry it beside the rule's value.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from specref.conformance import run
from specref.conformance.chain import laws, tau
from specref.conformance.chain.adapters import reference_adapter
from specref.conformance.chain.plan import plan_for
from specref.conformance.chain.scenarios import SCENARIOS
from specref.conformance.chain.tally import Tally
from specref.conformance.engine import registry
from specref.conformance.report.render import write_report

pytestmark = pytest.mark.exact


def _tally(sc, counts: np.ndarray) -> Tally:
    tally = Tally(sc)
    tally.length[0, sc.gamma] = counts
    tally.rows = int(counts.sum())
    return tally


def test_mean_tau_is_no_check_and_spends_no_alpha():
    assert "mean_tau" not in registry.kinds()
    for rule in ("exact", "block"):
        for sc in SCENARIOS.values():
            plan = plan_for(sc, rule)
            assert "mean_tau" not in plan.tested and "mean_tau" not in plan.skipped, (sc.name, rule)


def test_theory_is_the_closed_form_on_a_context_free_scenario():
    sc = SCENARIOS["cf_dense_g4"]
    a = 1.0 - float(laws.rejection_mass(sc, "exact")[0])
    g = sc.gamma
    law = laws.length_law(sc, 0, g, "exact")
    record = tau.estimate(sc, _tally(sc, np.round(law * 10_000).astype(np.int64)), "exact")
    assert record["theory"] == pytest.approx((1 - a ** (g + 1)) / (1 - a), rel=1e-12)
    assert record["formula"].startswith("(1 - a^(g+1))")
    lo, hi = record["ci"]
    half = g * np.sqrt(np.log(2 / (1 - tau.LEVEL)) / (2 * record["n"]))
    assert lo == pytest.approx(record["observed"] - half) and hi == pytest.approx(record["observed"] + half)


def test_the_interval_covers_the_true_mean_at_its_level():
    sc = SCENARIOS["cf_dense_g4"]
    law = laws.length_law(sc, 0, sc.gamma, "exact")
    mean = float(law @ np.arange(1, sc.gamma + 2))
    rng = np.random.Generator(np.random.PCG64(33))
    covered = 0
    for _ in range(2000):
        lo, hi = tau.estimate(sc, _tally(sc, rng.multinomial(200, law)), "exact")["ci"]
        covered += lo <= mean <= hi
    assert covered >= 1830, covered


def test_tau_does_not_apply_where_the_rows_have_no_one_start_or_fixed_num_draft():
    for sc in SCENARIOS.values():
        if sc.probe or sc.joint or sc.identical_rows or sc.ragged or len(sc.starts) > 1:
            assert not tau.applies(sc), sc.name
    sc = SCENARIOS["cf_dense_g4"]
    assert tau.estimate(sc, _tally(sc, np.zeros(sc.gamma + 1, np.int64)), "exact") is None


def test_a_run_reports_tau_beside_its_theory(tmp_path):
    report = run(reference_adapter(), seed=1, budget_seconds=20, scenarios=["cf_dense_g4"], rows=512)
    assert not any(r.id.kind == "mean_tau" for r in report.checks)
    record = report.scenarios["cf_dense_g4"]["tau"]
    assert record["n"] == report.scenarios["cf_dense_g4"]["rows"] and record["level"] == tau.LEVEL
    lo, hi = record["ci"]
    assert lo <= record["observed"] <= hi and 1 <= lo and hi <= 5
    write_report(report, tmp_path, plots=False)
    saved = json.loads((tmp_path / "report.json").read_text())
    assert saved["scenarios"]["cf_dense_g4"]["tau"]["theory"] == pytest.approx(record["theory"])
    assert f"vs {record['theory']:.3f}" in (tmp_path / "report.md").read_text()
