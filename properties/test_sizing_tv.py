"""Rows by the evidence asked for (issue 33): --tv sizes every scenario from its own probabilities, the same N on
every run; an uninformative law check is never counted as passed, in any of the five outputs.

Exact tests: the N of --tv is a function of the plan alone (no run, no clock), and the sizing bound is checked against
the detectable distance the real checks state. The runs below use fixed rows or --tv at a large distance (a few
thousand rows): they assert counts and words, never a p-value, except that every check of a correct engine passes.
False alarms: each run is at family-wise alpha 1e-9 (5 runs: 5e-9 for this file), negligible against the CI budget's
TOTAL of 1e-3, so it takes no share of properties/budget.py.
"""

from __future__ import annotations

import json
import math

import pytest

from specref import arguments
from specref.conformance import run
from specref.conformance.chain.adapters import as_adapter, builtin_adapters
from specref.conformance.chain.contract import CONTRACT
from specref.conformance.engine.plan_rows import tv_rows
from specref.conformance.engine.report import RESOLUTION_FLOOR
from specref.conformance.engine.run_plan import make_plan
from specref.conformance.engine.sizing import allocate, rows_for_tv, tv_demand, worst
from specref.conformance.report.render import render_markdown
from specref.errors import BadArgument
from specref.stats.power import min_count_thinned, min_num_samples_thinned

pytestmark = pytest.mark.exact

ALPHA = 1e-9
SMALL = ["cf_dense_g4", "markov_g5", "joint_markov_g2"]


def _batched():
    return builtin_adapters()["batched"]()


def _plan(alpha=1e-3, scenarios=None):
    adapter = as_adapter(_batched())
    return adapter, make_plan(adapter, scenarios, alpha, CONTRACT)


def test_tv_rows_are_a_function_of_the_plan_alone():
    """--tv 0.01 on the batched engine: the same N per scenario every time it is computed (no clock, no call), and
    at that N every demand's bound detects 0.01."""
    adapter, plan = _plan()
    first, again = tv_rows(CONTRACT, adapter, plan, 0.01), tv_rows(CONTRACT, *_plan(), 0.01)
    assert first == again
    demands = {s.name: CONTRACT.demands(adapter, s, plan.checks[s.name], plan.alphas) for s in plan.scenarios}
    for name, rows in first.items():
        assert worst(demands[name], rows) <= 0.01, name
        if demands[name]:
            assert worst(demands[name], int(0.99 * rows)) > 0.01 or rows == 256, name  # not oversized


def test_thinned_counts_and_their_inverse():
    for draws, fraction in ((2_500, 0.0008), (10_000, 0.3), (1, 1.0), (400, 0.99)):
        rows = min_num_samples_thinned(draws, fraction, 5.0)
        assert min_count_thinned(rows, fraction, 5.0) >= draws > min_count_thinned(rows - 1, fraction, 5.0)


def test_the_bound_is_never_below_what_the_checks_state():
    """A run at the --tv rows: every tested T2 check (law and rule) states a detectable distance at most tv."""
    tv = 0.3
    report = run(_batched(), tv=tv, scenarios=SMALL, alpha=ALPHA)
    t2 = [r for r in report.checks if r.details.get("tier") == "T2" and r.tested]
    assert t2 and all(r.passed for r in report.checks)
    assert all(r.detectable_tv <= tv for r in t2), [(r.name, r.detectable_tv) for r in t2 if r.detectable_tv > tv]
    again = run(_batched(), tv=tv, scenarios=SMALL, alpha=ALPHA)
    assert {k: s["rows"] for k, s in report.scenarios.items()} == {k: s["rows"] for k, s in again.scenarios.items()}
    assert report.sizing["mode"] == "tv" and "should take about" in report.sizing["words"]


def test_allocation_minimises_the_worst_distance():
    """Two law checks, one fed by every row and one by 1% of them, at equal cost: the allocation equalises their
    distances (both within 2% of each other), where equal rows would leave the rare one 10x worse."""
    common = tv_demand("first_token_law[a]", 1.0, 1e-5, 10)
    rare = tv_demand("first_token_law[b]", 0.01, 1e-5, 10)
    costs = {"a": ([common], [common], 1e-5), "b": ([rare], [rare], 1e-5)}
    allocation = allocate(costs, 10.0, RESOLUTION_FLOOR)
    a, b = worst([common], allocation.rows["a"]), worst([rare], allocation.rows["b"])
    assert allocation.seconds <= 10.0 and abs(a - b) / max(a, b) < 0.02
    equal = sum(allocation.rows.values()) // 2
    assert worst([rare], equal) > 5 * worst([common], equal)


def test_tv_and_resolution_are_checked_by_name():
    for bad in (0, 1, -0.1, "0.1", True):
        with pytest.raises(BadArgument, match="tv="):
            arguments.tv(bad)
    with pytest.raises(BadArgument, match="resolution="):
        arguments.resolution(0)
    with pytest.raises(BadArgument, match="tv=.*rows="):
        run(_batched(), tv=0.1, rows=100, scenarios=["cf_dense_g4"])


def _uninformative_everywhere(report_dict: dict, markdown: str) -> None:
    counts = report_dict["counts"]
    names = [c["name"] for c in report_dict["checks"] if c["status"] == "uninformative"]
    assert names and counts["uninformative"] == len(names)
    assert counts["passed"] == sum(c["status"] == "passed" for c in report_dict["checks"])
    for c in report_dict["checks"]:
        if c["status"] == "uninformative":
            assert c["detectable_tv"] is None or c["detectable_tv"] > report_dict["resolution_floor"]
    assert f"{counts['uninformative']} uninformative at this N" in markdown
    assert all(f"UNINFORMATIVE {name}" in markdown for name in names)
    assert report_dict["resolution"] is None or report_dict["resolution"] <= report_dict["resolution_floor"]


def test_no_output_counts_an_uninformative_check_as_passed(tmp_path, capsys):
    """300 rows: the first-token laws detect only TV ~0.25 > 0.1. Terminal, report.md, report.json, the pytest
    plugin's item outcome and a merge of two shards all count them uninformative, never passed."""
    from specref.cli import main
    from specref.pytest_plugin import CheckItem

    report = run(_batched(), rows=300, scenarios=["cf_dense_g4", "markov_g5"], alpha=ALPHA)
    record = report.to_dict()
    _uninformative_everywhere(record, render_markdown(record))
    first = report.summary().splitlines()[0]  # the terminal's first line states the resolution
    assert "no law check passed, so no deviation of the output law is ruled out" in first
    assert "uninformative at this N" in report.summary() and "UNINFORMATIVE first_token_law[cf_dense_g4]" in (
        report.summary()
    )

    # pytest plugin: an uninformative check is skipped (counted apart), never passed
    skipped = []

    class Item:
        record_of_check = lambda self: next(c for c in record["checks"] if c["name"] == self.name)  # noqa: E731

    item = Item()
    item.name, item.error, item.record = "first_token_law[cf_dense_g4]", None, record
    with pytest.raises(pytest.skip.Exception) as skip:
        CheckItem.runtest(item)
    skipped.append(str(skip.value))
    assert "UNINFORMATIVE" in skipped[0]

    # the CLI's terminal and files, and merged shards
    folders = []
    for k in range(2):
        out = tmp_path / f"shard{k}"
        code = main(["conform", "batched", "--rows", "300", "--scenarios", "cf_dense_g4,markov_g5", "--alpha",
                     str(ALPHA), "--shard", f"{k}/2", "--report", str(out), "--no-plots"])  # fmt: skip
        assert code == 0
        folders.append(str(out))
    capsys.readouterr()
    assert main(["merge", *folders, "--out", str(tmp_path / "merged"), "--no-plots"]) == 0
    terminal = capsys.readouterr().out
    merged = json.loads((tmp_path / "merged" / "report.json").read_text())
    _uninformative_everywhere(merged, (tmp_path / "merged" / "report.md").read_text())
    assert merged["counts"] == record["counts"]
    assert "no law check passed" in terminal.splitlines()[0] and "uninformative at this N" in terminal


def test_a_resolution_floor_of_one_counts_them_passed():
    report = run(_batched(), rows=300, scenarios=["cf_dense_g4"], alpha=ALPHA, resolution=1.0)
    assert report.counts()["uninformative"] == 0
    tv = report.resolution
    assert tv is not None and not math.isnan(tv)
    assert (
        report.summary()
        .splitlines()[0]
        .startswith(
            f"{report.adapter.name}: CONFORMING: no deviation above TV {tv:.3g} in any law check (power 0.999)  ("
        )
    )


def test_rows_for_tv_grows_as_one_over_tv_squared():
    demand = tv_demand("first_token_law[a]", 1.0, 1e-5, 10)
    assert 3.9 < rows_for_tv([demand], 0.05) / rows_for_tv([demand], 0.1) < 4.1


def test_a_budget_too_small_for_tv_stops_before_the_main_pass_naming_both():
    from specref.conformance.engine.plan_rows import BudgetTooSmall

    with pytest.raises(BudgetTooSmall, match=r"tv=0.01: the rows that detect TV 0.01 .* the budget leaves"):
        run(_batched(), tv=0.01, budget_seconds=5, scenarios=["cf_dense_g4"], alpha=ALPHA)


def test_cost_per_row_reads_a_fixed_cost_per_call_apart():
    from specref.conformance.engine.passes import _cost_per_row

    # 0.1 s a call plus 1 ms a row: two calls of 8 and 64 rows; a 64-row main-pass call costs 1 ms + 0.1 / 64 a row
    points = [(8, 0.1 + 8e-3), (64, 0.1 + 64e-3)]
    assert _cost_per_row(points, 64) == pytest.approx(1e-3 + 0.1 / 64)
    assert _cost_per_row(points[:1], 64) == pytest.approx((0.1 + 8e-3) / 8)  # one call: its own rate


def test_one_costly_scenario_does_not_drag_the_others_below_the_floor():
    """Two cheap scenarios and one whose rows cost 1,000x: with time for the cheap ones' floor but not the costly
    one's, the cheap ones reach the floor (0.1) and the costly one gets the rest, where a common distance would have
    left all three uninformative."""
    law = tv_demand("first_token_law[x]", 1.0, 1e-5, 10)
    cheap, costly = 1e-6, 1e-3
    need = rows_for_tv([law], RESOLUTION_FLOOR)
    costs = {"a": ([law], [law], cheap), "b": ([law], [law], cheap), "c": ([law], [law], costly)}
    seconds = 2 * need * cheap + 0.5 * need * costly  # the costly one can have half its floor rows
    allocation = allocate(costs, seconds, RESOLUTION_FLOOR)
    assert allocation.rows["a"] >= need and allocation.rows["b"] >= need
    assert worst([law], allocation.rows["c"]) > RESOLUTION_FLOOR and allocation.seconds <= seconds * 1.001


def test_the_stated_power_is_the_checks_own():
    """Every "power 0.999" specref prints (report.POWER, the rule fit's words, the sizing) is 1 - the beta its stats
    tests compute their detectable distances at."""
    import inspect

    from specref.conformance.engine import fit, report, sizing
    from specref.stats import gof, rates, strata

    tests = (gof.chisquare_gof, gof.discrete_law, rates.binomial_rate, rates.binomial_positions,
             strata.chisquare_strata)  # fmt: skip
    assert {inspect.signature(t).parameters["beta"].default for t in tests} == {sizing.BETA}
    assert report.POWER == 1 - sizing.BETA
    assert f"power {1 - sizing.BETA:g})" in fit.fit_words({"k": {"distance": "TV", "worst": 0.05}})
