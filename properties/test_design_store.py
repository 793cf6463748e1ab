"""The design calibration's saved p-values (specref/calibration/design_store.py): a seed is flagged exactly when
Holm over the family would flag it, files over different scenarios join per seed, a re-verdict follows the family
the plan defines (a demoted check leaves it, a new one is an error), and scenarios that ran different seeds are
bounded by a union over their groups."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from specref.calibration import design_store
from specref.calibration.analysis import clopper_pearson
from specref.stats import ErrorBudget
from specref.stats.record import CheckResult


@pytest.mark.exact
def test_flagged_is_holm_over_the_family():
    rng = np.random.default_rng(5)
    for _ in range(400):
        m = int(rng.integers(1, 12))
        ps = [None if rng.random() < 0.2 else float(rng.random() ** 6) for _ in range(m)]
        level = float(rng.choice([1e-3, 1e-2, 5e-2]))
        results = [CheckResult(f"c{i}", 0.0, 1, 1.0 if p is None else p, 1, level / m, 0.1, True, tested=p is not None)
                   for i, p in enumerate(ps)]  # fmt: skip
        holm = not all(r.passed for r in ErrorBudget(level).holm(results, family_size=m))
        assert design_store.flagged(ps, False, level, m) == holm, (ps, level)
        assert design_store.flagged(ps, True, level, m)


def _plan(checks: dict[str, list[str]]):
    scenarios = [SimpleNamespace(name=n, probe=False) for n in checks]
    return SimpleNamespace(scenarios=scenarios, alphas={f"{k}[{n}]": 1e-3 for n, ks in checks.items() for k in ks})


def _write(path, scenarios: dict[str, list[str]], lines):
    header = {"design": "default", "scenarios": {n: {"rows": 10, "digest": "0", "checks": ks} for n, ks in
                                                 scenarios.items()}}  # fmt: skip
    writer = design_store.Writer(path, header)
    for seed, failed, pvalues in lines:
        writer.add(seed, failed, pvalues)
    return writer


@pytest.mark.exact
def test_parts_join_per_seed_and_the_family_follows_the_plan(tmp_path):
    _write(tmp_path / "a.jsonl", {"s1": ["law", "tau"]}, [(1, [], {"s1": [0.5, 1e-4]}), (2, [], {"s1": [0.3, 0.9]})])
    _write(tmp_path / "b.jsonl", {"s2": ["law"]}, [(1, [], {"s2": [0.7]}), (2, ["s2"], {"s2": [None]})])
    assert _write(tmp_path / "b.jsonl", {"s2": ["law"]}, []).done == {1, 2}  # resumes
    with pytest.raises(ValueError, match="another run"):
        _write(tmp_path / "b.jsonl", {"s2": ["law", "other"]}, [])
    headers, seeds = design_store.load(tmp_path)
    full = design_store.verdicts(_plan({"s1": ["law", "tau"], "s2": ["law"]}), headers, seeds, levels=(1e-2,))
    assert full["family_size"] == 3 and full["seeds"] == 2
    assert full["family_wise"][0]["flagged"] == 2  # seed 1: 1e-4 <= 1e-2 / 3; seed 2: a certain failure
    demoted = design_store.verdicts(_plan({"s1": ["law"], "s2": ["law"]}), headers, seeds, levels=(1e-2,))
    assert demoted["family_size"] == 2 and demoted["family_wise"][0]["flagged"] == 1
    assert demoted["unplanned_saved"] == ["tau[s1]"]
    with pytest.raises(ValueError, match="not saved"):
        design_store.verdicts(_plan({"s1": ["law", "new"], "s2": ["law"]}), headers, seeds)


@pytest.mark.exact
def test_scenarios_on_different_seeds_are_bounded_by_a_union(tmp_path):
    _write(tmp_path / "a.jsonl", {"s1": ["law"], "s2": ["law"]},
           [(seed, [], {"s1": [0.5], "s2": [0.5]}) for seed in range(100)])  # fmt: skip
    _write(tmp_path / "b.jsonl", {"s3": ["law"]}, [(seed, [], {"s3": [0.5]}) for seed in range(10)])
    headers, seeds = design_store.load(tmp_path)
    plan = _plan({"s1": ["law"], "s2": ["law"], "s3": ["law"]})
    rate = design_store.verdicts(plan, headers, seeds, levels=(0.05,))["family_wise"][0]
    assert [g["scenarios"] for g in rate["groups"]] == [["s1", "s2"], ["s3"]]  # 2 x 100 seeds, not 3 x 10
    _write(tmp_path / "c.jsonl", {"s4": ["law"]}, [(seed, [], {"s4": [0.5]}) for seed in range(98)])
    headers, seeds = design_store.load(tmp_path)
    plan4 = _plan({"s1": ["law"], "s2": ["law"], "s3": ["law"], "s4": ["law"]})
    four = design_store.verdicts(plan4, headers, seeds, levels=(0.05,))["family_wise"][0]["groups"]
    assert [(g["scenarios"], g["seeds"]) for g in four] == [(["s1", "s2", "s4"], 98), (["s3"], 10)]
    headers, seeds = design_store.load(tmp_path)
    expected = clopper_pearson(0, 100, 0.975)[1] + clopper_pearson(0, 10, 0.975)[1]
    assert rate["upper_95"] == pytest.approx(expected) and not rate["upper_at_or_below_level"]
    del seeds["s4"]
    sized = design_store.verdicts(plan, headers, seeds, levels=(0.05,), by_size=("s3",))["family_wise"][0]
    assert sized["upper_95"] == pytest.approx(clopper_pearson(0, 100, 0.95)[1] + 0.05 / 3)
    assert json.loads((tmp_path / "b.jsonl").read_text().splitlines()[1]) == [0, [], {"s3": [0.5]}]
