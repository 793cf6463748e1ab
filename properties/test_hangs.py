"""Hangs are declared from the rate of the call's own scenario, within a ceiling tied to the budget; slow is not hung.

Exact tier: every assertion is a certain event (a hang is a sleep; a slow verifier is a sleep per row that answers).
The two end-to-end cases of the issue run for real: the reference engine that stops answering on its 17th call in
a 60 s run (verdict "hang" within 3 minutes, on a loaded 2-core machine), and a row loop at V = 151,936 that slows
down 3x mid-run past the run's ceiling (never declared hung).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from specref.conformance import run
from specref.conformance.chain.adapters import Adapter, batched_adapter
from specref.conformance.chain.scenarios import get
from specref.conformance.contracts import contract
from specref.conformance.engine import run as runner
from specref.conformance.engine.calls import Caller
from specref.conformance.engine.hangs import CEILING_BUDGETS, OWN_SLACK, SLACK, UNBUDGETED_FLOORS, HangLimits

pytestmark = pytest.mark.exact
MISBEHAVING = Path(__file__).parent / "external_impls" / "misbehaving.py"
LARGE_V = 151_936 * 2  # row elements of large_v151936_g1: (g+1) x V


def test_a_slow_scenario_does_not_lengthen_another_s_limit():
    """Was 25+ minutes: the slowest seconds-per-row of any scenario (a small call at V = 151,936) times the rows of
    a large call at V = 4, times 10. Now a measured scenario's limit comes from its own rate."""
    limits = HangLimits(budget_seconds=60, floor=30)
    limits.record("large_v151936_g1", rows=64, elements=LARGE_V, seconds=6.4)  # 0.1 s a row
    limits.record("cf_dense_g4", rows=256, elements=5 * 16, seconds=0.01)
    assert limits.limit("cf_dense_g4", rows=65_536, elements=5 * 16) == 30  # 2.6 s expected: the floor
    assert limits.limit("large_v151936_g1", rows=64, elements=LARGE_V) == 64.0  # SLACK x 6.4 s


def test_an_unmeasured_scenario_is_capped_at_the_ceiling():
    limits = HangLimits(budget_seconds=60, floor=30)
    assert limits.limit("a", rows=256, elements=80) == CEILING_BUDGETS * 60  # nothing measured: the ceiling
    limits.record("large_v151936_g1", rows=64, elements=LARGE_V, seconds=6.4)  # 0.1 s a row
    assert limits.limit("b", rows=256, elements=80) == CEILING_BUDGETS * 60  # 25.6 s: rows no larger cost no more
    limits.record("c", rows=256, elements=80, seconds=0.256)  # 1 ms a row
    assert limits.limit("b", rows=256, elements=80) == 30  # now bounded by c's rate: 0.26 s
    assert limits.limit("c", rows=256, elements=80) == 30  # measured: its own rate, the floor
    # unmeasured: the tightest bound: c's rate for rows no larger than c's, scaled by the ratio for larger ones
    assert limits.expected("d", rows=1000, elements=24) == pytest.approx(1.0)
    assert limits.expected("e", rows=1000, elements=800) == pytest.approx(10.0)
    assert limits.expected("f", rows=10, elements=LARGE_V * 2) == pytest.approx(0.1 * 10 * 2)
    unbudgeted = HangLimits(budget_seconds=None, floor=30)
    assert unbudgeted.limit("a", rows=256, elements=80) == UNBUDGETED_FLOORS * 30


def test_a_slow_call_is_never_cut_below_its_own_slack():
    """The ceiling caps the slack, never the expected time itself: a row loop slower than the budget is slow. Both
    for a measured scenario, and for a first call bounded from another one (the reference engine at load 18: 81 ms a
    row at V = 8193, 1.8 s a row at V = 151,936, 64 rows)."""
    limits = HangLimits(budget_seconds=10, floor=1)
    limits.record("large_v151936_g1", rows=64, elements=LARGE_V, seconds=12.8)
    assert limits.limit("large_v151936_g1", rows=64, elements=LARGE_V) == OWN_SLACK * 12.8 > 2 * 10
    assert SLACK > OWN_SLACK
    loaded = HangLimits(budget_seconds=60, floor=30)
    loaded.record("large_v8193_g2", rows=64, elements=3 * 8193, seconds=64 * 0.081)
    assert loaded.limit("large_v151936_g1", rows=64, elements=LARGE_V) > 64 * 1.8 * 2  # twice what it took


def test_the_caller_measures_each_scenario_on_its_own():
    def verify(target_probs, draft_probs, draft_tokens, generator=None):
        time.sleep(0.004 * len(draft_tokens))  # a slow row loop: 4 ms a row
        return batched_adapter().verify(target_probs, draft_probs, draft_tokens, generator)

    s = get("cf_dense_g4").given(torch.float32)
    with Caller(Adapter("slow", verify), contract("chain"), limits=HangLimits(budget_seconds=1, floor=1)) as caller:
        caller(s.inputs(128, 0, 0), 1, where={"scenario": s.name})  # 0.5 s: the rate is measured
        assert caller.hang_limit(1024, 5 * 16, where={"scenario": s.name}) >= OWN_SLACK * 1024 * 0.004
        tokens, _, seconds = caller(s.inputs(1024, 0, 1), 2, where={"scenario": s.name})  # ~4 s, ceiling 2 s
    assert tokens.shape == (1024, 5) and seconds > 2.0


def test_a_reference_engine_hung_on_its_17th_call_in_a_60_s_run_is_declared_hung_within_3_minutes(tmp_path):
    """The issue's case, via the CLI with its default hang floor (30 s): was no verdict after 1500 s."""
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "specref.cli", "conform", f"{MISBEHAVING}:reference_hangs_on_17th",
         "--budget-seconds", "60", "--no-plots", "--report", str(tmp_path / "r")],
        capture_output=True, text=True, timeout=600, env={**os.environ, "SPECREF_MIN_CALL_TIMEOUT": "30"},
    )  # fmt: skip
    wall = time.perf_counter() - started
    assert result.returncode == 1, result.stdout + result.stderr
    record = json.loads((tmp_path / "r" / "report.json").read_text())
    hung = [c for c in record["checks"] if c["details"].get("kind") == "hang"]
    assert len(hung) == 1 and "misbehaving.py" in (hung[0]["details"]["raised_at"] or ""), result.stdout
    assert wall < 180, f"the hang took {wall:.0f} s to declare (load {os.getloadavg()[0]:.1f})"


def _slowing_row_loop(per_row: float, slower_after: int, factor: float):
    """A verifier that answers after per_row seconds a row, `factor` times slower from call `slower_after` on (a
    machine whose load rises mid-run)."""
    calls = []

    def verify(target_probs, draft_probs, draft_tokens, generator=None):
        calls.append(1)
        time.sleep(per_row * len(draft_tokens) * (factor if len(calls) >= slower_after else 1.0))
        return batched_adapter().verify(target_probs, draft_probs, draft_tokens, generator)

    return verify


def test_a_slow_row_loop_at_v151936_slowing_down_past_the_ceiling_is_not_hung():
    """transformers' row loop at V = 151,936 under load: ~20 ms a row, here 30 ms a row, 3x slower from the second
    call on. Its call outlasts the run's ceiling (2 s: twice a 1 s budget); its own measured rate keeps it alive."""
    s = get("large_v151936_g1").given(torch.float32)
    verify = _slowing_row_loop(0.03, slower_after=2, factor=3.0)
    with Caller(Adapter("slow", verify), contract("chain"), limits=HangLimits(budget_seconds=1, floor=1)) as caller:
        caller(s.inputs(16, 0, 0), 1, where={"scenario": s.name})  # 0.5 s, within the ceiling
        assert caller.limits.ceiling == 2.0
        tokens, _, seconds = caller(s.inputs(64, 0, 1), 2, where={"scenario": s.name})  # 5.8 s
    assert tokens.shape == (64, 2) and seconds > 3 * caller.limits.ceiling - 1


@pytest.mark.slow
def test_the_transformers_row_loop_at_v151936_is_not_hung(monkeypatch):
    """The real thing, on this (loaded) machine, with a 10 s floor: every limit past the run's first call comes from
    measured rates (its first call at V = 151,936 is bounded from cf_dense_g4's rate, scaled by the row size)."""
    pytest.importorskip("transformers")
    from specref.conformance.chain.adapters import transformers_adapter

    monkeypatch.setattr(runner, "MIN_CALL_TIMEOUT", 10.0)  # the run's first call imports transformers in the worker
    report = run(transformers_adapter(), scenarios=["cf_dense_g4", "large_v151936_g1"], rows=192)
    assert not [r for r in report.checks if r.details.get("kind") == "hang"], report.summary()
    assert report.scenarios["large_v151936_g1"]["rows"] == 192  # 3 calls of 64 rows


def test_the_first_call_limit_is_what_docs_contract_says():
    """docs/contract.md: the first call of a run gets twice the budget, never less than twice the floor (60 s on a
    20 s budget with the default 30 s floor); without a budget, 10 times the floor."""
    from specref.conformance.engine.hangs import HangLimits

    assert HangLimits(20, 30).limit("cf_dense_g4", rows=256, elements=80) == 60
    assert HangLimits(300, 30).limit("cf_dense_g4", rows=256, elements=80) == 600
    assert HangLimits(None, 30).limit("cf_dense_g4", rows=256, elements=80) == 300
    text = " ".join((Path(__file__).resolve().parents[1] / "docs" / "contract.md").read_text().split())
    assert "gets the ceiling: twice the budget, and never less than twice the floor (so 60 s on a 20 s budget" in text
