"""The pytest plugin (specref/pytest_plugin.py), run inside pytester as an engine developer's CI would run it.

specref is not installed in the test environment, so the `pytest11` entry point is not active here: every inner run
loads the plugin with `-p specref.pytest_plugin`, and one test checks that pyproject.toml declares the entry point.
Each inner run uses fixed rows (--specref-rows) and one or two scenarios, so it takes seconds.

False alarms: three inner runs must pass their statistical checks (the batched engine through --specref-impl with
settings from [tool.specref], with --specref-tv, and through the specref_conformance fixture). They run at
family-wise alpha 1e-9 each, so this file's false-alarm probability is at most 3e-9; it takes no share of
properties/budget.py (whose "conformance" share is spent by test_conformance_cli.py) and is negligible against its
TOTAL of 1e-3.

Power: the failing verifiers are caught by certain events (a token of target probability 0, a correction outside
the residual's support), except the first-token law of `qsampler`, whose TV from p (0.53 on cf_dense_g4) is asserted
to exceed the TV the failing check reports it detects with probability 0.999.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from specref.conformance.chain.scenarios import get

pytest_plugins = ["pytester"]

PLUGIN = ("-p", "specref.pytest_plugin")
ALPHA = "1e-9"  # family-wise, per passing inner run (see the module docstring)

P_ZERO = """
import torch


def verify(target_probs, draft_probs, draft_tokens, generator):
    # emits one token, the least likely under p: a token of target probability 0 wherever p has zeros
    out = torch.full((draft_tokens.shape[0], draft_tokens.shape[1] + 1), -1, dtype=torch.int64)
    out[:, 0] = target_probs[:, 0].argmin(-1)
    return out
"""

Q_SAMPLER = """
import torch


def verify(target_probs, draft_probs, draft_tokens, generator):
    # emits one token drawn from the draft law q_1 instead of the target law p_1
    out = torch.full((draft_tokens.shape[0], draft_tokens.shape[1] + 1), -1, dtype=torch.int64)
    out[:, 0] = torch.multinomial(draft_probs[:, 0], 1, generator=generator)[:, 0]
    return out
"""


@pytest.fixture(autouse=True, scope="module")
def _import_builtins_once():
    """Import what resolving IMPL and a run import (the harness, scipy, transformers and its lazy submodules) in this
    process first: pytester's in-process runs drop the modules they import, and a C extension (scipy's) or
    transformers' lazy imports cannot be loaded again in the next run. builtin_adapters() imports none of them."""
    import importlib
    import importlib.util

    for module in (
        "specref.conformance.runner",
        "specref.conformance.contracts",
        "specref.conformance.tree.contract",
        "specref.conformance.pipeline.contract",
        "specref.conformance.report.render",
    ):
        importlib.import_module(module)
    if importlib.util.find_spec("transformers") is not None:
        importlib.import_module("specref.hf.pipelines")


def snippet_of(text: str) -> str:
    match = re.search(r"```python\n(.*?)```", text, re.S)
    assert match, text
    return match.group(1)


# --- exact ---------------------------------------------------------------------------------------------------------


@pytest.mark.exact
def test_entry_point_is_declared():
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    entry_points = pyproject["project"]["entry-points"]["pytest11"]
    assert entry_points == {"specref.pytest_plugin": "specref.pytest_plugin"}


@pytest.mark.exact
def test_without_impl_the_plugin_adds_no_items(pytester):
    pytester.makepyfile("def test_one():\n    pass\n")
    result = pytester.runpytest(*PLUGIN)
    result.assert_outcomes(passed=1)
    out = result.stdout.str()  # an installed specref shows in the header's plugin list, nothing more
    assert "specref[" not in out and "specref:" not in out and "conformance" not in out


@pytest.mark.exact
def test_usage_errors_name_the_setting(pytester):
    result = pytester.runpytest(*PLUGIN, "--specref-impl", "no_such_module:verify")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*specref: cannot import 'no_such_module'*"])

    result = pytester.runpytest(*PLUGIN, "--specref-impl", "batched", "--specref-alpha", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*specref: alpha=2.0 must lie in (0, 1)*"])

    pytester.makepyprojecttoml('[tool.specref]\nimpl = "batched"\nbudget = 10\n')
    result = pytester.runpytest(*PLUGIN)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "unknown keys ['budget']; known: ['impl', 'seed', 'budget-seconds'" in result.stderr.str()


@pytest.mark.exact
def test_tv_goes_through_the_argument_check_run_and_the_cli_use(pytester):
    result = pytester.runpytest(*PLUGIN, "--specref-impl", "batched", "--specref-tv", "2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*specref: tv=2.0 must lie in (0, 1)*"])
    result = pytester.runpytest(*PLUGIN, "--specref-impl", "batched", "--specref-tv", "0.3", "--specref-rows", "500")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*specref: tv=0.3 and rows=500: give one (tv sizes the rows itself)*"])
    pytester.makepyfile(bad_verifier=P_ZERO)
    pytester.makepyfile(
        test_mine="""
        from bad_verifier import verify


        def test_bad(specref_conformance):
            report = specref_conformance(verify, scenarios="cf_zero_support_g3", tv=0.3)
            assert report.sizing["mode"] == "tv" and report.sizing["tv"] == 0.3, report.sizing
            assert report.verdict == "non-conforming"
        """
    )
    pytester.runpytest(*PLUGIN, "--specref-alpha", ALPHA).assert_outcomes(passed=1)


@pytest.mark.exact
def test_a_p_zero_token_fails_with_check_p_value_tv_and_a_snippet_that_reproduces_it(pytester):
    pytester.makepyfile(bad_verifier=P_ZERO)
    result = pytester.runpytest(*PLUGIN, "--specref-impl", "bad_verifier.py:verify", "--specref-rows", "500",
                                "--specref-scenarios", "cf_zero_support_g3", "--specref-alpha", ALPHA)  # fmt: skip
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    result.stdout.fnmatch_lines([
        "*verify: NON-CONFORMING*",
        "FAILED specref[[]bad_verifier.verify[]]::t0_zero_prob_emitted[[]cf_zero_support_g3[]]*",
    ])  # fmt: skip
    assert ("t0_zero_prob_emitted[cf_zero_support_g3] failed (law check, T0): p-value 0, a certain failure "
            "(500 violations in 500 rows); detectable TV: any") in out  # fmt: skip
    assert "verdict of the run: non-conforming" in out
    # its report folder, as `specref conform` writes it (was: none), at the default place, and the summary says where
    folder = pytester.path / "specref-reports" / "bad_verifier.verify"
    record = json.loads((folder / "report.json").read_text())
    assert record["verdict"] == "non-conforming" and (folder / "report.md").is_file()
    assert f"report: {folder / 'report.md'}" in out or "report: specref-reports/bad_verifier.verify/report.md" in out

    # the snippet rebuilds the failing batch and calls the verifier: its first row emits a token with p = 0
    namespace: dict = {}
    code = snippet_of(out).replace("print(", "shown = (")
    exec(compile(code, "snippet", "exec"), namespace)  # noqa: S102 -- the snippet is what a user would paste
    batch, tokens = namespace["batch"], namespace["tokens"]
    assert batch.target_probs[0, 0, int(tokens[0, 0])] == 0


@pytest.mark.exact
def test_the_fixture_runs_a_verify_function_with_the_session_settings(pytester):
    pytester.makepyfile(bad_verifier=P_ZERO)
    pytester.makepyfile(
        test_mine="""
        from bad_verifier import verify


        def test_bad(specref_conformance):
            report = specref_conformance(verify, scenarios="cf_zero_support_g3", rows=300)
            assert report.alpha == 1e-9  # from --specref-alpha
            assert report.verdict == "non-conforming"
            assert "t0_zero_prob_emitted" in report.caught_by()
        """
    )
    result = pytester.runpytest(*PLUGIN, "--specref-alpha", ALPHA)
    result.assert_outcomes(passed=1)


# --- statistical ---------------------------------------------------------------------------------------------------


@pytest.mark.statistical
def test_a_wrong_first_token_law_fails_with_its_p_value_and_detectable_tv(pytester):
    """A T2 failure; certain T0 failures come with it (t0_residual_support), the law check is the one asserted."""
    pytester.makepyfile(qsampler=Q_SAMPLER)
    result = pytester.runpytest(*PLUGIN, "--specref-impl", "qsampler:verify", "--specref-rows", "3000",
                                "--specref-scenarios", "cf_dense_g4", "--specref-alpha", ALPHA)  # fmt: skip
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    head = re.search(r"first_token_law\[cf_dense_g4\] failed \(law check\): p-value (\S+) <= alpha (\S+); "
                     r"detectable TV (\S+) \(power 0.999 at N = 3,000\)", out)  # fmt: skip
    assert head, out
    p_value, alpha, detectable = (float(x) for x in head.groups())
    assert p_value <= alpha < 1e-9
    s = get("cf_dense_g4").given(torch.float32)
    assert 0.5 * np.abs(s.target - s.draft).sum() > detectable  # the power statement covers this verifier
    assert "from qsampler import verify as verify" in snippet_of(out[head.start() :])
    result.stdout.fnmatch_lines(["FAILED specref[[]qsampler.verify[]]::first_token_law[[]cf_dense_g4[]]*"])


@pytest.mark.statistical
def test_a_conforming_engine_passes_with_settings_from_pyproject_and_untested_checks_skipped(pytester):
    """Settings from [tool.specref]; --specref-rows overrides its rows (a run of 10^6 rows would blow the budget)."""
    pytester.makepyprojecttoml(
        f"""
        [tool.specref]
        impl = "batched"
        scenarios = ["cf_dense_g4", "cf_equal_g8"]
        rows = 1000000
        alpha = {ALPHA}
        budget-seconds = 120
        """
    )
    result = pytester.runpytest(*PLUGIN, "--specref-rows", "1000", "-rs")
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    outcomes = result.parseoutcomes()
    assert outcomes["passed"] >= 10 and outcomes["skipped"] >= 1 and "failed" not in outcomes
    result.stdout.fnmatch_lines([
        "*batched: CONFORMING*2,000 rows*family-wise alpha 1e-09*",
        "SKIPPED*not tested: no rejection is possible (Z = 0)*",
    ])  # fmt: skip


@pytest.mark.statistical
def test_a_run_sized_by_tv_reaches_it_with_the_rows_its_plan_gives(pytester):
    """--specref-tv 0.3 on one cheap scenario: N is the plan's (plan_rows.tv_rows, no output seen), and every passed
    T2 check detects at most 0.3 in its own unit (TV for laws, |p - p0| for rates)."""
    from specref.conformance.chain.adapters import builtin_adapters
    from specref.conformance.chain.contract import CONTRACT
    from specref.conformance.engine.plan_rows import tv_rows
    from specref.conformance.engine.run_plan import make_plan

    result = pytester.runpytest(*PLUGIN, "--specref-impl", "batched", "--specref-tv", "0.3", "--specref-scenarios",
                                "cf_dense_g4", "--specref-alpha", ALPHA, "--specref-report", "out")  # fmt: skip
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    result.stdout.fnmatch_lines(["*batched (sized to detect TV 0.3, no time cap*", "*batched: CONFORMING*"])
    record = json.loads((pytester.path / "out" / "report.json").read_text())
    adapter = CONTRACT.wrap(builtin_adapters()["batched"]())
    planned = tv_rows(CONTRACT, adapter, make_plan(adapter, ["cf_dense_g4"], 1e-9, CONTRACT), 0.3)
    assert record["sizing"]["mode"] == "tv" and record["sizing"]["rows"] == planned
    assert record["scenarios"]["cf_dense_g4"]["rows"] == planned["cf_dense_g4"]
    passed = [c for c in record["checks"] if c["details"].get("tier") == "T2" and c["status"] == "passed"]
    assert passed and all(c["detectable_tv"] <= 0.3 for c in passed), passed


@pytest.mark.statistical
def test_the_fixture_returns_a_report_of_a_conforming_engine(pytester):
    pytester.makepyfile(
        test_mine="""
        def test_batched(specref_conformance):
            report = specref_conformance("batched", scenarios="cf_dense_g4", rows=1000)
            assert report.passed, report.summary()
            assert report.verdict == "conforming" and report.scenarios["cf_dense_g4"]["rows"] == 1000
        """
    )
    result = pytester.runpytest(*PLUGIN, "--specref-alpha", ALPHA)
    result.assert_outcomes(passed=1)
