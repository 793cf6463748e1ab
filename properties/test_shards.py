"""Shards and merge (specref.conformance.shards): N shards of a run, merged, give the report of one unsharded run.

All exact: every call's inputs and generator seed derive from (seed, scenario, chunk), so a fixed-seed run is
deterministic and the merged report must equal the unsharded one bit for bit (statistics, p-values, Holm, verdict;
wall times aside). No alpha is spent here: the verdicts compared are those of fixed-seed runs, and the test is their
equality, not their value. Wall time ~30 s on one core.
"""

from __future__ import annotations

import copy
import json

import pytest

from specref.cli import main
from specref.conformance import run
from specref.conformance.chain.adapters import builtin_adapters
from specref.conformance.engine.report import CONFORMING, NON_CONFORMING
from specref.conformance.shards import PARTIAL, MergeError, Shard, merge_records
from specref.mutants import CATALOGUE

pytestmark = pytest.mark.exact

# joint_markov_g2 at 9000 rows runs three batches of the joint loop; cf_dense_g4 three main-pass chunks.
SCENARIOS = ["cf_dense_g4", "joint_markov_g2", "identical_rows_g2", "ragged_g6", "probe_zero_ratio_g1"]
ROWS = 9000


def comparable(report) -> dict:
    """report.json without what depends on the clock (wall time, rows per second, the summed budgets)."""
    record = json.loads(json.dumps(report.to_dict()))
    for key in ("wall_seconds", "budget_seconds", "timings"):
        record.pop(key)
    for scenario in record["scenarios"].values():
        scenario.pop("rows_per_second")
    record["checks"] = clockless(record["checks"])
    return record


def clockless(checks: list[dict]) -> list[dict]:
    """Checks without the forced edge probe's wall time."""
    for check in checks:
        check["details"].get("forced_probe", {}).pop("seconds", None)
    return checks


def shards_of(verify, count: int, **kwargs) -> list[tuple[str, dict]]:
    return [(f"shard-{k}", json.loads(json.dumps(run(verify, shard=(k, count), **kwargs).to_dict())))
            for k in range(count)]  # fmt: skip


@pytest.mark.parametrize(
    "impl, scenarios, verdict",
    [
        ("batched", SCENARIOS, CONFORMING),
        ("verify_ignores_temperature", ["cf_dense_g4", "joint_markov_g2"], NON_CONFORMING),
    ],
)
def test_three_merged_shards_equal_one_run_bit_for_bit(impl, scenarios, verdict):
    verify = builtin_adapters()[impl]() if impl in builtin_adapters() else CATALOGUE[impl]
    kwargs = {"seed": 5, "rows": ROWS, "scenarios": scenarios, "budget_seconds": 3600.0}
    one = run(verify, **kwargs)
    shards = shards_of(verify, 3, **kwargs)
    # a shard decides only certain checks: partial, or non-conforming by certain failures the whole run has too
    # (the temperature mutant draws corrections outside the residual's support on joint_markov_g2's rows)
    certain = {c.name for c in one.checks if c.details.get("tier") == "T0" and not c.passed}
    for _, record in shards:
        failed = {c["name"] for c in record["checks"] if not c["passed"]}
        assert record["verdict"] == (NON_CONFORMING if failed else PARTIAL) and failed <= certain, failed
    assert sum(record["shard"]["calls"]["cf_dense_g4"]["count"] for _, record in shards) == 4  # chunks 0..3
    merged, _ = merge_records(shards[::-1])  # in any order
    assert one.verdict == merged.verdict == verdict
    assert comparable(merged) == comparable(one)
    t2 = [c for c in merged.checks if c.details.get("tier") == "T2"]
    assert t2 and [(c.statistic, c.p_value, c.passed) for c in t2] == [
        (c.statistic, c.p_value, c.passed) for c in one.checks if c.details.get("tier") == "T2"
    ]


def test_a_certain_failure_is_already_the_shards_verdict():
    """A T0 violation decides the verdict wherever it is seen: the shard that sees it is non-conforming."""
    kwargs = {"seed": 1, "rows": 3000, "scenarios": ["cf_zero_support_g3"], "budget_seconds": 3600.0}
    shards = shards_of(CATALOGUE["verify_ignores_top_k"], 2, **kwargs)
    assert {record["verdict"] for _, record in shards} == {NON_CONFORMING}
    assert all(not c["details"].get("tier") == "T2" for _, record in shards for c in record["checks"])
    merged, _ = merge_records(shards)
    assert merged.verdict == NON_CONFORMING and "t0_zero_prob_emitted" in merged.caught_by()


def test_shard_ownership_partitions_the_units():
    for count in (1, 2, 3, 7):
        owners = [[k for k in range(count) if Shard(k, count).owns(unit)] for unit in range(50)]
        assert all(len(o) == 1 for o in owners)
    assert Shard.of("2/3") == Shard.of((2, 3)) == Shard(2, 3)
    for bad in ("3/3", "-1/2", "1", "a/b", (1,)):
        with pytest.raises(ValueError, match="shard="):
            Shard.of(bad)


def test_a_shard_needs_fixed_rows_for_every_scenario():
    batched = builtin_adapters()["batched"]()
    with pytest.raises(ValueError, match=r"needs a fixed number of rows.*cf_dense_g4"):
        run(batched, shard=(0, 2), scenarios=["cf_dense_g4"])
    with pytest.raises(ValueError, match=r"none for \['markov_g5'\]"):
        run(batched, shard=(0, 2), scenarios=["cf_dense_g4", "markov_g5"], rows={"cf_dense_g4": 500})


@pytest.fixture(scope="module")
def two_shards():
    kwargs = {"seed": 0, "rows": 600, "scenarios": ["cf_dense_g4"], "budget_seconds": 3600.0}
    return shards_of(builtin_adapters()["batched"](), 2, **kwargs)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda s: s[1][1].update(seed=1), r"shard-1: seed 1 differs from 0 in shard-0"),
        (lambda s: s[1][1].update(alpha=0.01), r"shard-1: alpha 0.01 differs"),
        (lambda s: s[1][1]["shard"].update(count=3), r"shard-1: N \(shard count\) 3 differs"),
        (lambda s: s[1][1]["shard"].update(plan="0"), r"shard-1: plan '0' differs"),
        (lambda s: s[1][1].update(impl="other"), r"shard-1: impl 'other' differs"),
        (lambda s: s.pop(), r"shards \[1\] of 2 are missing"),
        (lambda s: s.append(copy.deepcopy(s[0])), r"shard-0 and shard-0 are both shard 0/2"),
        (lambda s: s[0][1].pop("shard"), r"shard-0: its report.json is not a shard's"),
        (lambda s: [r["shard"].update(plan="0") for _, r in s], r"shard-0: the shards' plan differs from this"),
    ],
)
def test_merge_refuses_shards_of_different_runs(two_shards, edit, message):
    shards = copy.deepcopy(two_shards)
    edit(shards)
    with pytest.raises(MergeError, match=message):
        merge_records(shards)


def test_cli_shards_then_merge(tmp_path, monkeypatch, capsys):
    """`conform --shard` (exit 0, partial), `merge` (exit as conform, the checks of the API's unsharded run)."""
    monkeypatch.chdir(tmp_path)
    common = ["conform", "batched", "--rows", "5000", "--scenarios", "cf_dense_g4,markov_g1", "--no-plots"]
    for k in range(2):
        assert main([*common, "--shard", f"{k}/2", "--report", f"s{k}"]) == 0
        assert "PARTIAL" in capsys.readouterr().out
    assert main(["merge", "s1", "s0", "--out", "merged", "--no-plots"]) == 0
    assert "CONFORMING" in capsys.readouterr().out
    one = run(builtin_adapters()["batched"](), rows=5000, scenarios=["cf_dense_g4", "markov_g1"])
    merged = json.loads((tmp_path / "merged" / "report.json").read_text())
    assert clockless(merged["checks"]) == clockless(json.loads(json.dumps(one.to_dict()))["checks"])
    assert "## Statistical checks (T2)" in (tmp_path / "merged" / "report.md").read_text()

    assert main(common[:2] + ["--shard", "0/2"]) == 2
    assert "--shard='0/2' needs --rows" in capsys.readouterr().err
    assert main(["merge", "s0", "--out", "merged"]) == 2
    assert "shards [1] of 2 are missing" in capsys.readouterr().err
