"""Where a run's time goes (engine/timings.py): report.json's "timings" holds every phase, the verifier's seconds
and the shares outside them, consistently with the run's wall time; nested phases count once. No absolute time is
asserted (the machine is shared): only how the figures relate within one run."""

from __future__ import annotations

import time

import pytest

from specref.conformance import builtin_adapters, run
from specref.conformance.engine.timings import PHASES, Timings

pytestmark = pytest.mark.exact


def test_nested_phases_count_in_the_innermost_only():
    timings = Timings()
    with timings.phase("checks"):
        time.sleep(0.02)
        with timings.phase("inputs"):
            time.sleep(0.05)
    assert timings.wall["inputs"] >= 0.05 and 0.02 <= timings.wall["checks"] < 0.05
    record = timings.record(0.2)
    assert record["phases_wall_seconds"]["other"] == pytest.approx(0.2 - sum(timings.wall.values()), abs=1e-3)


def test_a_runs_timings_add_up_and_name_the_verifiers_share():
    report = run(builtin_adapters()["batched"](), scenarios=["cf_dense_g4", "markov_g5"], rows=20_000)
    t = report.to_dict()["timings"]
    assert set(t["phases_wall_seconds"]) == {*PHASES, "other"} and set(t["phases_cpu_seconds"]) == set(PHASES)
    assert t["verifier_calls"] >= 2 * 5 and 0 < t["verifier_seconds"] <= t["in_flight_seconds"] <= t["wall_seconds"]
    rounding = 1e-4 + 1e-3 / t["wall_seconds"]  # the share's rounding, and the ms rounding of both seconds
    assert t["outside_verifier_share"] == pytest.approx(1 - t["verifier_seconds"] / t["wall_seconds"], abs=rounding)
    assert 0 <= t["outside_calls_share"] <= t["outside_verifier_share"] < 1
    assert t["phases_wall_seconds"]["tally"] > 0 and t["phases_wall_seconds"]["checks"] > 0
    assert t["verifier_cpu_seconds"] > 0  # read in the worker, around verify alone
