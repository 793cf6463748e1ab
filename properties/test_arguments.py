"""Every argument checked once (issue 34): specref.arguments has one function per argument, and the CLI, run() and
the pytest plugin all use it, so a bad value is a UsageError naming the argument and its value everywhere; a fixed
rows=N is honoured exactly, however small; scenarios are a list or a comma-separated string everywhere; and usage
errors that need no torch are found before torch loads. Exact: fixed seeds, and no statistical verdict is read."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from specref import arguments
from specref.conformance import run
from specref.conformance.chain.adapters import builtin_adapters
from specref.errors import UsageError

pytest_plugins = ["pytester"]  # the plugin tests below run pytest in pytest
pytestmark = pytest.mark.exact

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
PLUGIN = ("-p", "specref.pytest_plugin")
GOOD = "def verify(target_probs, draft_probs, draft_tokens, generator):\n    return None\n"


@pytest.fixture(scope="module")
def batched():
    return builtin_adapters()["batched"]()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rows": -1}, "rows=-1 must be an integer >= 1"),
        ({"rows": 0}, "rows=0 must be an integer >= 1"),
        ({"rows": 2.5}, "rows=2.5 must be an integer"),
        ({"rows": {"cf_dense_g4": 0}}, "rows['cf_dense_g4']=0 must be"),
        ({"alpha": 1.5}, "alpha=1.5 must lie in (0, 1)"),
        ({"budget_seconds": 0}, "budget_seconds=0 must be > 0"),
        ({"budget_seconds": float("nan")}, "budget_seconds=nan must be > 0"),
        ({"seed": -2}, "seed=-2 must be an integer >= 0"),
        ({"seed": "0"}, "seed='0' must be an integer >= 0"),
        ({"scenarios": []}, "scenarios=[] names no scenario"),
        ({"scenarios": " , "}, "scenarios=' , ' names no scenario"),
        ({"scenarios": "cf_dense_g4,nope"}, "'nope' is unknown"),
        ({"shard": "2/2", "rows": 300}, "shard='2/2' must have 0 <= K < N"),
    ],
)
def test_run_refuses_a_bad_argument_naming_it(batched, kwargs, message):
    with pytest.raises(UsageError) as error:
        run(batched, **kwargs)
    assert message in str(error.value)


def test_rows_is_honoured_exactly_however_small(batched):
    assert arguments.MIN_ROWS == 1
    for rows in (1, 7):
        report = run(batched, rows=rows, scenarios=["cf_dense_g4"], budget_seconds=600)
        assert report.scenarios["cf_dense_g4"]["rows"] == rows


def test_scenarios_as_a_comma_separated_string_are_names_not_characters(batched):
    report = run(batched, rows=300, scenarios="cf_dense_g4, markov_g1", budget_seconds=600)
    assert sorted(report.scenarios) == ["cf_dense_g4", "markov_g1"]


def test_the_fixture_takes_scenarios_as_a_list_or_a_string(pytester):
    pytester.makepyfile(
        test_mine="""
        from specref.conformance.chain.adapters import builtin_adapters


        def test_list(specref_conformance):
            report = specref_conformance(builtin_adapters()["batched"](), scenarios=["cf_dense_g4"], rows=300)
            assert list(report.scenarios) == ["cf_dense_g4"]


        def test_string(specref_conformance):
            report = specref_conformance(builtin_adapters()["batched"](), scenarios="cf_dense_g4,markov_g1", rows=300)
            assert sorted(report.scenarios) == ["cf_dense_g4", "markov_g1"]
        """
    )
    pytester.makepyprojecttoml('[tool.specref]\nscenarios = ["cf_dense_g4"]\nbudget-seconds = 600\n')
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(passed=2)


def test_the_plugin_refuses_bad_rows_with_the_same_words(pytester):
    result = pytester.runpytest(*PLUGIN, "--specref-impl", "batched", "--specref-rows", "0")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*specref: rows=0 must be an integer >= 1*"])


def conform(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, list[str]]:
    """`specref ARGS` in a fresh interpreter: its result and which of torch/transformers it imported."""
    code = ("import sys\nfrom specref.cli import main\ncode = main(" + repr(args) + ")\n"
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\nsys.exit(code)")  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120,
                            env=ENV)  # fmt: skip
    return result, eval(result.stdout.splitlines()[-1])  # noqa: S307 -- a list of names printed above


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["conform", "good.py:verify", "--rows", "0"], "--rows=0 must be an integer >= 1"),
        (["conform", "good.py:verify", "--seed", "-1"], "--seed=-1 must be an integer >= 0"),
        (["conform", "good.py:verify", "--scenarios", ","], "--scenarios=',' names no scenario"),
        (
            ["conform", "good.py:verify", "--report", "blocker/sub"],
            "--report: 'blocker/sub' cannot be created: 'blocker' is a file, not a folder",
        ),
        (
            ["conform", "good.py:verify", "--json", "blocker/r.json"],  # was: cannot create 'blocker'
            "--json='blocker/r.json': its folder 'blocker' cannot be created: 'blocker' is a file, not a folder",
        ),
        (
            ["conform", "good.py:verify", "--json", "blocker/sub/r.json"],
            "--json='blocker/sub/r.json': its folder 'blocker/sub' cannot be created: 'blocker' is a file",
        ),
        (["merge", "nowhere-a", "nowhere-b"], "nowhere-a: no report.json there"),
    ],
)
def test_a_usage_error_that_needs_no_torch_is_found_before_torch_loads(tmp_path, args, message):
    (tmp_path / "good.py").write_text(GOOD)
    (tmp_path / "blocker").write_text("a file where a folder is asked for")
    result, imported = conform(args, tmp_path)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert imported == [], imported
