"""`--rows N` is honoured (no time cap unless a budget is also given, and then every scenario it cut short is named),
and a run's wall time stays within 1.15 x its budget + 15 s, start-up included.

Exact tier: the row counts are certain; the wall-time bound is a property of the harness's clock (it counts from
the process's start, sizes every call by the measured rates, and keeps time for the run-level checks), measured
here on whatever load the machine has (stated in the failure message).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from specref.conformance import run
from specref.conformance.chain.adapters import batched_adapter
from specref.conformance.engine import run as runner
from specref.conformance.report.render import render_markdown

pytestmark = pytest.mark.exact


def _slow(seconds_per_call: float):
    def verify(target_probs, draft_probs, draft_tokens, generator=None):
        time.sleep(seconds_per_call)
        return batched_adapter().verify(target_probs, draft_probs, draft_tokens, generator)

    return verify


def test_rows_without_a_budget_are_honoured(monkeypatch):
    """Was: --rows 20000 silently cut by the default 300 s budget (two scenarios got 256 rows)."""
    monkeypatch.setattr(runner, "DEFAULT_BUDGET", 0.5)  # a run sized by time would stop after its first calls
    report = run(_slow(0.2), scenarios=["cf_dense_g4", "markov_g1"], rows=9000)  # 3 calls each: 1.2 s
    assert report.budget_seconds is None and report.passed, report.summary()
    assert {name: s["rows"] for name, s in report.scenarios.items()} == {"cf_dense_g4": 9000, "markov_g1": 9000}
    assert "cut short" not in report.summary()


def test_rows_cut_by_an_explicit_budget_are_named_in_every_output():
    report = run(_slow(0.4), scenarios=["cf_dense_g4"], rows=20_000, budget_seconds=1)
    scenario = report.scenarios["cf_dense_g4"]
    assert scenario["rows"] < 20_000 and scenario["rows_planned"] == 20_000
    line = f"cf_dense_g4 ({scenario['rows']:,} of 20,000 planned)"
    assert f"cut short by the time budget (rows run of the fixed N planned): {line}" in report.summary()
    record = json.loads(json.dumps(report.to_dict()))
    assert record["scenarios"]["cf_dense_g4"]["rows_planned"] == 20_000
    cut = f"cf_dense_g4 ({scenario['rows']:,} of 20,000)"
    assert f"cut short by the time budget** (rows run of the fixed N planned): {cut}" in render_markdown(record)


@pytest.mark.parametrize("impl", ["batched", "reference"])
def test_a_run_stays_within_its_budget(tmp_path, impl):
    """Was 68-80 s for 60 s budgets (light load), 120 s at load 11; at load 17-20 here, 125 s (batched) and 207 s
    (the reference engine, with a false hang on V = 151,936). The reference engine then still took 98-102 s beside
    3 busy loops on 2 cores (load 5-6): a call of V = 151,936 kept a floor of 64 rows (0.7 s each) past its slice;
    now 65-66 s there (load 4-16). The command's wall time, imports included; a 15 s budget here, to keep the
    suite's time: its bound (32 s) is still below what one oversized call of the slow engine, the bug above, costs
    alone (45 s)."""
    budget = 15
    load = os.getloadavg()[0]
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "specref.cli", "conform", impl, "--budget-seconds", str(budget),
                             "--no-plots", "--report", str(tmp_path / "r")], capture_output=True, text=True,
                            timeout=600)  # fmt: skip
    wall = time.perf_counter() - started
    assert result.returncode in (0, 1) and (tmp_path / "r" / "report.json").is_file(), result.stderr
    record = json.loads((tmp_path / "r" / "report.json").read_text())
    words = (
        f"{impl}: {wall:.1f} s for a {budget} s budget, {record['wall_seconds']:.1f} s to the verdict (load {load:.1f})"
    )
    assert wall <= 1.15 * budget + 15, words
    assert not [c for c in record["checks"] if c["details"].get("kind") == "hang"], words
