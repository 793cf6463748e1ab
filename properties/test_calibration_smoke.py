"""Smoke test of the calibration meta-test (`nox -s calibration`): its code path end to end on 3 seeds.

Exact tier: nothing here is a statistical claim. It checks that every seed is an ordinary `specref.conformance.run`,
structure (every check of every run is accounted for, untested checks are never p-values), the files (and their
graceful degradation without matplotlib), determinism, the verdict rule (the upper bound decides), Holm over the
KS findings, and one certain fact: a correct engine never violates a T0 invariant.
"""

from __future__ import annotations

import importlib
import json
import math
import sys

import pytest

from specref.calibration import Settings, analysis, calibrate, render, rerender, sizes
from specref.calibration.sweep import make_plan, run_seed
from specref.calibration.sweep import sweep as sweep_seeds

sweep = importlib.import_module("specref.calibration.sweep")  # the module (the package exports a function of that name)

pytestmark = pytest.mark.exact

SMOKE = Settings(
    seeds=3,
    reference_seeds=2,
    mutant_seeds=2,
    rows=256,
    large_rows=(("large_v8193_g2", 64), ("large_v151936_g1", 16)),
    reference_rows=64,
    mutants=("lenient_acceptance", "bonus_wrong_row"),
    curve_seeds=1,
    curve_rows=(256,),
    sizes=False,
)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("calibration")
    calls = []
    original = sweep.run

    def counting_run(*args, **kwargs):
        calls.append(kwargs.get("seed"))
        return original(*args, **kwargs)

    sweep.run = counting_run
    try:
        result = calibrate(SMOKE, out, argv=["--smoke"])
    finally:
        sweep.run = original
    return result, out, calls


def test_every_seed_is_one_conformance_run(smoke):
    result, _, calls = smoke
    nulls = SMOKE.seeds + SMOKE.reference_seeds
    assert calls[:nulls] == [0, 1, 2, 0, 1]
    assert len(calls) >= nulls + SMOKE.mutant_seeds * len(SMOKE.mutants)


def test_writes_report_files(smoke):
    result, out, _ = smoke
    names = {"calibration.md", "calibration.json", "calibration_qq.png", "calibration_power.png"}
    assert names <= {p.name for p in out.iterdir()}
    loaded = json.loads((out / "calibration.json").read_text())
    assert [n["engine"] for n in loaded["null"]] == ["batched", "reference"]
    text = (out / "calibration.md").read_text()
    assert "False alarms: `batched` engine, 3 seeds" in text and "lenient_acceptance" in text


def test_rerender_from_json_rebuilds_the_same_report(smoke, tmp_path):
    _, out, _ = smoke
    rerender(out / "calibration.json", tmp_path)
    assert (tmp_path / "calibration.md").read_text() == (out / "calibration.md").read_text()
    with pytest.raises(ValueError, match="json_path"):
        rerender(tmp_path / "missing.json", tmp_path)


def test_plots_degrade_without_matplotlib(smoke, tmp_path, monkeypatch, capsys):
    result, out, _ = smoke
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    again = rerender(out / "calibration.json", tmp_path)
    assert not list(tmp_path.glob("*.png"))
    assert "skipping the PNG plots" in capsys.readouterr().out
    assert "Plots: skipped" in (tmp_path / "calibration.md").read_text()
    assert again["plots_skipped"]


def test_every_check_is_accounted_for_and_untested_ones_are_no_p_values(smoke):
    result, _, _ = smoke
    for null in result["null"]:
        counts = {kind: k["n"] + k["untested"] for kind, k in null["kinds"].items()}
        assert sum(counts.values()) == null["family_size"] * null["seeds"]
        p_values = [p for values in result["p_values"][null["engine"]].values() for p in values]
        assert all(0.0 <= p <= 1.0 for p in p_values)
        assert len(p_values) == sum(k["n"] for k in null["kinds"].values())
        assert math.isclose(null["bonferroni_alpha"], SMOKE.alpha / null["family_size"])


def test_correct_engines_never_violate_t0(smoke):
    result, _, _ = smoke
    for null in result["null"]:
        assert null["t0_violations"] == 0 and null["adapter_failures"] == 0


def test_seed_run_is_a_function_of_the_seed():
    plan = make_plan("batched", None, ["cf_dense_g4"], rows=512, seeds=1, alpha=1e-3)
    first, again = (run_seed(plan, 7) for _ in range(2))
    other = run_seed(plan, 8)
    assert [r.p_value for r in first.t2] == [r.p_value for r in again.t2]
    assert [r.p_value for r in first.t2] != [r.p_value for r in other.t2]


def test_worker_processes_give_the_seeds_one_process_gives():
    """Forked pool workers hung in torch's first parallel op (OpenMP does not survive fork); workers are spawned."""
    plan = make_plan("batched", None, ["cf_dense_g4"], rows=512, seeds=2, alpha=1e-3, dtype="bfloat16")
    pooled = sweep_seeds(plan, first_seed=3, jobs=2)
    alone = [run_seed(plan, seed) for seed in (3, 4)]
    assert [[r.p_value for r in run_.t2] for run_ in pooled.runs] == [[r.p_value for r in run_.t2] for run_ in alone]


def _null(count: int, trials: int, kinds: dict | None = None) -> dict:
    return {"engine": "e", "skipped": {}, "t0_violations": 0, "adapter_failures": 0, "kinds": kinds or {},
            "family_wise": [{"alpha": 1e-3, **analysis.rate(count, trials)}]}  # fmt: skip


def test_run_level_verdict_reads_the_upper_bound():
    one = analysis.findings({"null": [_null(1, 2000)], "power": []})
    assert "consistent with the sweep's design" in one[0] and "not shown at or below the nominal" in one[0]
    clean = analysis.findings({"null": [_null(0, 4000)], "power": []})  # upper bound 9.2e-4
    assert "validated on the sweep's design" in clean[0]
    five = analysis.findings({"null": [_null(5, 2000)], "power": []})
    assert "not confirmed" in five[0]  # lower bound below alpha, upper above 3e-3: not "consistent"
    many = analysis.findings({"null": [_null(30, 2000)], "power": []})
    assert "ABOVE the design" in many[0]


def test_ks_findings_are_holm_corrected():
    def kind(p):
        levels = {str(a): analysis.rate(0, 100) for a in analysis.LEVELS}
        return {"n": 100, "levels": levels, "ks_anti_p_value": p, "ks_anti_statistic": 0.1}

    # 1e-4 alone would pass KS_FLAG = 1e-3, but not after Holm over 20 tests (threshold 5e-5)
    kinds = {f"k{i}": kind(0.5) for i in range(19)} | {"bad": kind(1e-4)}
    assert not [f for f in analysis.findings({"null": [_null(0, 2000, kinds)], "power": []}) if "KS" in f]
    kinds["bad"] = kind(1e-6)
    assert [f for f in analysis.findings({"null": [_null(0, 2000, kinds)], "power": []}) if "KS" in f]


def test_size_table_renders():
    table = sizes.size_table(alphas=(1e-5,), dfs=(2,))
    assert table["worst_ratio"] <= 1.0
    lines = render._sizes_section({"sizes": table})
    assert any("Exact size" in line for line in lines)
