"""`specref demo`, the README's first command: its exit-code logic and fallback exactly, then one short real run.

Exact tests: the exit code for every pair of verdicts, the fallback to the batched engine without transformers, usage
errors, and the stated catch probability against a bound it must meet.

The statistical test runs the demo on a 20 s budget into tmp_path. False alarms: the kernel's run must pass its
statistical checks, at family-wise alpha ALPHA = 1e-9 (passed with --alpha), and one binomial test of the mutant's
violation rate against the stated row probability r runs at ALPHA too, so this file's false-alarm probability is at
most 2e-9. Like test_pytest_plugin.py it takes no share of properties/budget.py (whose "conformance" share is spent
by test_conformance_cli.py); 2e-9 is negligible against budget.TOTAL = 1e-3, asserted below.
Power: the mutant is caught by a certain check (t0_residual_support) that misses all of the >= 256 rows of
cf_dense_g4 with probability (1 - r)^256 < 1e-50 (asserted; 3.6e-59 on its rows); the binomial test detects
|rate - r| >= 0.2 with probability 0.999 at 256 rows (the TV it detects at the rows reached is asserted below 0.2).
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
from budget import TOTAL

from specref import demo, extras
from specref.cli import main
from specref.conformance.peers.findings import known_verdict
from specref.stats import binomial_rate

ALPHA = 1e-9  # per statistical check in this file (two of them)


def fake(name: str, verdict: str) -> SimpleNamespace:
    return SimpleNamespace(adapter=SimpleNamespace(name=name), verdict=verdict, passed=verdict == "conforming",
                           alpha=1e-3)  # fmt: skip


@pytest.mark.exact
@pytest.mark.parametrize(
    ("kernel", "mutant", "code", "words"),
    [
        ("conforming", "non-conforming", 0, "the yardstick works"),
        ("non-conforming: rare edge", "non-conforming", 0, "keeps the target law except one rare edge, named"),
        ("non-conforming: rare edge", "conforming", 1, "the mutant softmax_residual was not flagged"),
        ("non-conforming", "non-conforming", 1, "transformers was not found conforming (non-conforming)"),
        ("conforming", "conforming", 1, "the mutant softmax_residual was not flagged"),
        ("non-conforming", "conforming", 1, "was not found conforming"),
    ],
)
def test_exit_code_is_0_only_when_the_kernel_conforms_and_the_mutant_is_flagged(kernel, mutant, code, words):
    got, message = demo.outcome(fake("transformers", kernel), fake("softmax_residual", mutant))
    assert got == code
    assert words in message
    assert message.startswith("demo: NOT demonstrated (exit 1)") == (code == 1)


@pytest.mark.exact
def test_without_transformers_the_demo_conforms_the_batched_engine_and_says_so(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "transformers", None)
    impl, note = demo.choose_impl()
    assert impl == "batched"
    assert "transformers is not installed" in note and extras.TRANSFORMERS.install in note


@pytest.mark.exact
def test_with_transformers_the_demo_conforms_its_kernel():
    pytest.importorskip("transformers")
    assert demo.choose_impl() == ("transformers", None)


@pytest.mark.exact
@pytest.mark.parametrize(
    ("args", "message"),
    [(["--budget-seconds", "0"], "--budget-seconds=0.0 must be > 0"), (["--alpha", "1"], "--alpha=1.0 must lie")],
)
def test_usage_errors_exit_2_before_any_run(tmp_path, capsys, args, message):
    assert main(["demo", "--out", str(tmp_path / "out"), *args]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.exact
def test_the_mutant_escapes_the_fewest_rows_with_negligible_probability():
    r = demo.row_catch_probability()
    assert 0.3 < r < 0.7, r  # half the rows of cf_dense_g4 show the bug
    assert demo.miss_probability(256) < 1e-50


@pytest.mark.exact
def test_this_files_false_alarm_probability_is_negligible_in_the_ci_budget():
    assert 2 * ALPHA <= 1e-5 * TOTAL


@pytest.mark.statistical
def test_demo_conforms_the_kernel_flags_the_mutant_and_writes_both_reports(tmp_path, capsys):
    threads = torch.get_num_threads()
    code = main(["demo", "--out", str(tmp_path), "--budget-seconds", "20", "--alpha", str(ALPHA), "--no-plots"])
    assert torch.get_num_threads() == threads  # the demo's one thread does not leak into the caller
    out = capsys.readouterr().out
    assert code == 0, out
    impl, _ = demo.choose_impl()
    records = {}
    for name in (impl, demo.MUTANT):
        assert (tmp_path / name / "report.md").is_file()
        records[name] = json.loads((tmp_path / name / "report.json").read_text())
    # transformers up to 5.24.0: `r_i <= probability_ratio`, named; 5.25.0 made it strict (peers/findings.py)
    kernel_verdict = known_verdict("transformers") if impl == "transformers" else "conforming"
    assert records[impl]["verdict"] == kernel_verdict
    assert records[demo.MUTANT]["verdict"] == "non-conforming"
    assert "t0_residual_support" in records[demo.MUTANT]["caught_by"]
    header, verdicts = out.splitlines()[3:5]  # after the two progress lines and a blank one
    assert header.split() == ["transformers" if impl == "transformers" else "batched", demo.MUTANT, "(mutant)"]
    assert verdicts.split() == ["verdict", *kernel_verdict.upper().split(), "NON-CONFORMING"]
    flat = " ".join(out.split())  # the prose wraps at demo.WIDTH columns
    if kernel_verdict == "non-conforming: rare edge":
        assert (
            "Rare edge of transformers: accepts a zero-probability draft" in flat and "r_i <= probability_ratio" in flat
        )
    assert "the yardstick works" in flat and str(tmp_path / demo.MUTANT / "report.md") in out
    shown = out[: out.index("Reports:")].splitlines()  # the paths after it are as long as the folder given
    assert max(map(len, shown)) <= demo.WIDTH == 100, max(shown, key=len)  # was 152-163 columns

    # the stated row probability r agrees with the violations the run counted
    wanted = f"t0_residual_support[{demo.CATCH_SCENARIO}]"
    check = next(c for c in records[demo.MUTANT]["checks"] if c["name"] == wanted)
    result = binomial_rate(int(check["statistic"]), check["n"], demo.row_catch_probability(), alpha=ALPHA)
    # 256 rows, the least a run gives a scenario (a slow machine's 20 s gives the mutant no more), detect 0.28
    assert check["n"] >= 256 and result.detectable_tv < 0.3, result
    assert result.passed, result
