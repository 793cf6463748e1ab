"""Smoke test of the calibration meta-test (`nox -s calibration`): its code path end to end on 3 seeds.

Exact tier: nothing here is a statistical claim. It checks structure (every planned p-value is accounted for,
every rate sits inside its interval, the files are written), determinism (a seed's p-values are a function of
the seed), the parts of the analysis with closed forms (Clopper-Pearson at zero successes, the pooled distance of
an exact law), and one certain fact: a correct engine never violates a T0 invariant.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from specref.calibration import REFERENCE_SCENARIOS, SCENARIOS, Settings, analysis, calibrate, curves, rerender
from specref.calibration.sweep import make_plan, run_seed
from specref.conformance import checks
from specref.conformance.adapters import as_adapter, builtin_adapters
from specref.conformance.scenarios import SCENARIOS as ALL_SCENARIOS
from specref.mutants import CATALOGUE

pytestmark = pytest.mark.exact

SMOKE = Settings(
    seeds=3,
    mutant_seeds=2,
    rows=512,
    reference_rows=64,
    mutants=("lenient_acceptance", "bonus_wrong_row"),
    curve_seeds=2,
    curve_rows=(256, 512),
)


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    out = tmp_path_factory.mktemp("calibration")
    return calibrate(SMOKE, out, argv=["--smoke"]), out


def test_writes_report_files(smoke):
    result, out = smoke
    names = {"calibration.md", "calibration.json", "calibration_qq.png", "calibration_power.png"}
    names.add("calibration_power_curves.png")
    assert names <= {p.name for p in out.iterdir()}
    assert (out / "calibration_qq.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    loaded = json.loads((out / "calibration.json").read_text())
    assert [n["engine"] for n in loaded["null"]] == ["batched", "reference"]
    assert [m["engine"] for m in loaded["power"]] == list(SMOKE.mutants)
    text = (out / "calibration.md").read_text()
    assert "False alarms: `batched` engine, 3 seeds" in text and "lenient_acceptance" in text


def test_rerender_from_json_rebuilds_the_same_report(smoke, tmp_path):
    _, out = smoke
    rerender(out / "calibration.json", tmp_path)
    assert (tmp_path / "calibration.md").read_text() == (out / "calibration.md").read_text()
    with pytest.raises(ValueError, match="json_path"):
        rerender(tmp_path / "missing.json", tmp_path)


def test_every_planned_p_value_is_accounted_for(smoke):
    result, _ = smoke
    for null, names in zip(result["null"], (SCENARIOS, REFERENCE_SCENARIOS), strict=True):
        ran = [ALL_SCENARIOS[n] for n in null["scenarios"]]
        assert set(null["scenarios"]) | set(null["skipped"]) == set(names)
        planned: dict[str, int] = {}
        for s in ran:
            for kind in checks.t2_plan(s):
                planned[kind] = planned.get(kind, 0) + SMOKE.seeds
        assert {kind: k["n"] + k["untested"] for kind, k in null["kinds"].items()} == planned
        assert null["family_size"] == sum(len(checks.t2_plan(s)) for s in ran)
        assert math.isclose(null["bonferroni_alpha"], SMOKE.alpha / null["family_size"])
        p_values = [p for values in result["p_values"][null["engine"]].values() for p in values]
        assert all(0.0 <= p <= 1.0 for p in p_values)
        assert len(p_values) == sum(k["n"] for k in null["kinds"].values())


def test_rates_lie_inside_their_intervals(smoke):
    result, _ = smoke
    entries = [fw for null in result["null"] for fw in null["family_wise"]]
    entries += [lv for null in result["null"] for k in null["kinds"].values() for lv in k.get("levels", {}).values()]
    entries += [m[key] for m in result["power"] for key in ("flagged", "flagged_by_t0", "flagged_by_t2")]
    entries += [c["detected"] for m in result["power"] for c in m["checks"]]
    entries += [p["detected"] for curve in result["curves"] for p in curve["points"]]
    assert entries
    for e in entries:
        assert 0 <= e["count"] <= e["trials"]
        assert e["ci_low"] <= e["rate"] <= e["ci_high"]


def test_power_curves_follow_the_catalogue(smoke):
    result, _ = smoke
    expected = [(m, f"{k}[{s}]") for m, s, k in curves.CURVES if m in SMOKE.mutants]
    assert [(c["mutant"], c["check"]) for c in result["curves"]] == expected
    for curve in result["curves"]:
        assert [p["rows"] for p in curve["points"]] == list(SMOKE.curve_rows)
        assert all(p["detected"]["trials"] == SMOKE.curve_seeds for p in curve["points"])


def test_correct_engines_never_violate_t0(smoke):
    result, _ = smoke
    for null in result["null"]:
        assert null["t0_violations"] == 0 and null["adapter_failures"] == 0


def test_mutant_plans_respect_capabilities(smoke):
    result, _ = smoke
    for m in result["power"]:
        assert "ragged_g6" in m["skipped"] and "point_mass_g4" in m["skipped"]
        assert set(m["caught_by"]) == set(CATALOGUE[m["engine"]].caught_by)


def test_seed_run_is_a_function_of_the_seed():
    plan = make_plan("batched", builtin_adapters()["batched"](), ["cf_dense_g4"], rows=512, seeds=1, alpha=1e-3)
    first, again = (run_seed(plan, 7, {}) for _ in range(2))
    other = run_seed(plan, 8, {})
    assert [r.p_value for r in first.t2] == [r.p_value for r in again.t2]
    assert [r.p_value for r in first.t2] != [r.p_value for r in other.t2]


def test_clopper_pearson_at_zero_successes():
    low, high = analysis.clopper_pearson(0, 200)
    assert low == 0.0
    assert math.isclose(high, 1 - 0.025 ** (1 / 200), rel_tol=1e-9)


def test_pooled_distance_of_exact_counts():
    s = ALL_SCENARIOS["cf_dense_g4"]
    exact = {"first": np.rint(s.target * 1e6).astype(np.int64)}
    assert analysis.pooled_distance(s, "first_token_law", exact) < 1e-5
    shifted = s.target[0].copy()
    shifted[shifted.argmin()] += 0.1  # TV 0.1: moved from the largest token (p = 0.24)
    shifted[shifted.argmax()] -= 0.1
    assert shifted.min() >= 0
    moved = {"first": np.rint(shifted[None, :] * 1e6).astype(np.int64)}
    assert math.isclose(analysis.pooled_distance(s, "first_token_law", moved), 0.1, abs_tol=1e-5)


def test_bad_settings_are_value_errors():
    with pytest.raises(ValueError, match="mutants"):
        calibrate(Settings(seeds=1, mutants=("no_such_mutant",)))
    with pytest.raises(ValueError, match="rows"):
        make_plan("m", as_adapter(CATALOGUE["lenient_acceptance"]), ["cf_dense_g4"], rows=511, seeds=1, alpha=1e-3)
