"""`specref conform` as a user runs it, on implementations written outside the project (properties/external_impls/).

Exact tests first (listing, usage errors, adapter robustness: each a certain verdict), then statistical ones.

False alarms: three runs are expected to pass their statistical checks (numpy_loop and torch_vectorised through the
CLI, torch_vectorised through the Python API). Each gets the family-wise alpha alpha_for("conformance", 3), passed
with `--alpha` (an extension of the public CLI), so this file's false-alarm probability is at most the conformance
share of the CI budget.

Power: the buggy implementations are caught by certain events (a token with p = 0 emitted; an accepted count the
law gives probability 0), and the sample sizes are fixed with `--rows` (an extension) so that the chance of seeing
none is stated and asserted below. Wall time ~60 s on one core; the hang test sets SPECREF_MIN_CALL_TIMEOUT=3 so
that a hung call is abandoned after 3 s rather than the default 30 s.
"""

from __future__ import annotations

import json
import math
import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from budget import alpha_for

from specref.cli import main
from specref.conformance import run
from specref.conformance.chain.scenarios import get
from specref.conformance.cli import resolve
from specref.conformance.report.render import write_index, write_report
from specref.outputs import REPORTS
from specref.stats import min_num_samples_chisquare

IMPLS = Path(__file__).parent / "external_impls"
PASSING_RUNS = 3  # statistical runs that must pass: numpy_loop (CLI), torch_vectorised (CLI), torch_vectorised (API)
ALPHA = alpha_for("conformance", PASSING_RUNS)
_script = shutil.which("specref", path=str(Path(sys.executable).parent))
SPECREF = [_script] if _script else [sys.executable, "-m", "specref.cli"]


def conform(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*SPECREF, "conform", *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env=None if env is None else {**os.environ, **env})  # fmt: skip


def impl(name: str) -> str:
    return f"{IMPLS / name}"


# --- exact: listing, usage errors ------------------------------------------------------------------------------


@pytest.mark.exact
def test_list_names_the_builtins(tmp_path):
    result = conform("--list", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for name in ("reference", "batched", "transformers"):
        assert f"  {name} " in result.stdout


@pytest.mark.exact
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["no-such-engine"], "is not a built-in"),
        (["no_such_package_xyz.verifiers:verify"], "cannot import 'no_such_package_xyz.verifiers'"),
        ([impl("numpy_loop.py:verify"), "--budget-seconds", "-1"], "--budget-seconds=-1.0 must be > 0"),
    ],
)
def test_usage_errors_exit_2_through_the_cli(tmp_path, args, message):
    result = conform(*args, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in result.stderr
    assert not (tmp_path / REPORTS).exists()


@pytest.mark.exact
@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "IMPL is required"),
        ([impl("missing.py:verify")], "does not exist"),
        ([impl("numpy_loop.py:nope")], "has no attribute 'nope'"),
        ([impl("torch_vectorised.py:TorchVerifier")], "is a class"),
        ([impl("numpy_loop.py:_draw")], "cannot be called as verify("),
        ([impl("numpy_loop.py:verify"), "--scenarios", "cf_dense_g4,nope"], "'nope' is unknown"),
        ([impl("numpy_loop.py:verify"), "--scenarios", "ragged_g6"], "needs a capability"),
        ([impl("numpy_loop.py:verify"), "--alpha", "2"], "--alpha=2.0 must lie in (0, 1)"),
    ],
)
def test_usage_errors_exit_2_in_process(capsys, args, message):
    assert main(["conform", *args]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.exact
def test_unknown_flag_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["conform", "batched", "--budget", "x"])
    assert exit_info.value.code == 2


# --- exact: adapter robustness ---------------------------------------------------------------------------------


@pytest.mark.exact
@pytest.mark.parametrize(
    ("attr", "failed_check", "message"),
    [
        ("wrong_shape", "adapter", "returned shape (512, 4), expected [B, g+1] = [512, 5]"),
        ("wrong_dtype", "adapter", "returned dtype torch.int32, expected torch.int64"),
        ("nan_float_output", "adapter", "returned dtype torch.float64, expected torch.int64"),
        ("raises", "adapter", "exception: RuntimeError: CUDA error: an illegal memory access"),
        ("ids_out_of_range", "t0_valid_ids", "violations in 512 rows"),
        ("prefix_differs", "t0_prefix_is_drafts", "violations in 512 rows"),
    ],
)
def test_broken_adapters_get_a_verdict_naming_the_problem(attr, failed_check, message):
    adapter, _ = resolve(impl(f"broken.py:{attr}"))
    report = run(adapter, seed=1, budget_seconds=20, scenarios=["cf_dense_g4"], rows=512)
    assert report.verdict == "non-conforming"
    assert failed_check in report.caught_by()
    assert f"FAIL {failed_check}[cf_dense_g4]" in report.summary()
    assert message in report.summary()


@pytest.mark.exact
def test_a_hang_is_abandoned_and_reported_through_the_cli(tmp_path):
    result = conform(impl("broken.py:hangs"), "--budget-seconds", "1", "--scenarios", "cf_dense_g4", "--no-plots",
                     cwd=tmp_path, env={"SPECREF_MIN_CALL_TIMEOUT": "3"})  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAIL adapter[cf_dense_g4]" in result.stdout and "hang: no result within" in result.stdout
    record = json.loads((tmp_path / REPORTS / "broken.hangs" / "report.json").read_text())
    assert record["verdict"] == "non-conforming" and record["caught_by"][0] == "adapter"


# --- statistical: correct implementations pass, buggy ones are caught ---------------------------------------


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("spec", "folder", "rows"),
    [("numpy_loop.py:verify", "numpy_loop.verify", 1024), ("torch_vectorised.py:VERIFIER", "torch-vectorised", 1024)],
)
def test_correct_external_impls_conform(tmp_path, spec, folder, rows):
    """All scenarios the impl's capabilities allow, at a fixed N per scenario; family-wise alpha ALPHA per run."""
    args = ["--seed", "7", "--rows", str(rows), "--budget-seconds", "120", "--alpha", f"{ALPHA:.6g}"]
    if folder == "numpy_loop.verify":
        args.append("--no-plots")
    result = conform(impl(spec), *args, "--json", "verdict.json", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert ": CONFORMING" in result.stdout
    out = tmp_path / REPORTS / folder
    record = json.loads((out / "report.json").read_text())
    assert json.loads((tmp_path / "verdict.json").read_text())["verdict"] == record["verdict"] == "conforming"
    assert record["alpha"] == pytest.approx(ALPHA, rel=1e-5)
    assert (
        "| check | what it tests | statistic (kind) | df | p-value | alpha | N | detectable TV | verdict |"
        in (out / "report.md").read_text()
    )
    if folder == "torch-vectorised":  # ragged and point-mass scenarios ran; plots were drawn
        assert {"ragged_g6", "point_mass_g4"} <= set(record["scenarios"])
        assert {"first_token.png", "accepted_length.png", "reject_rate.png"} <= {p.name for p in out.iterdir()}
    first = next(c for c in record["checks"] if c["name"] == "first_token_law[cf_dense_g4]")
    assert first["n"] >= rows and first["guaranteed_tv"] < 0.27  # df 15 at the far-tail critical value, alpha ~1e-6


#: P(a 8-bit coin is 0) for buggy.accept_le_coarse_coins.
COIN_ZERO = 1 / 256


@pytest.mark.statistical
@pytest.mark.parametrize(
    ("attr", "scenario", "rows", "caught_by"),
    [
        ("softmax_residual", "cf_zero_support_g3", 4096, "t0_zero_prob_emitted"),
        ("bonus_missing", "cf_equal_g8", 256, "reject_rate"),
        ("accept_le_coarse_coins", "cf_zero_support_g3", 20_000, "t0_zero_prob_emitted"),
    ],
)
def test_buggy_external_impls_are_caught(tmp_path, attr, scenario, rows, caught_by):
    """Each bug shows as a certain event. accept_le: a p = 0 draft at position 1 (probability m = q(p = 0)) meets a
    zero coin (1/256) in a row with probability m/256; missing it in every row has probability exp(-rows m/256),
    asserted < 1e-12. softmax: each rejection puts weight 1 on each p = 0 token (exp 0), so a p = 0 correction has
    probability > 0.3 per rejection. bonus_missing: with p == q every row accepts all g drafts; 7 accepted has
    probability 0 under the law."""
    if attr == "accept_le_coarse_coins":
        sc = get(scenario)
        m = float(sc.draft[0][sc.target[0] == 0].sum())
        assert math.exp(-rows * m * COIN_ZERO) < 1e-12
    args = ["--scenarios", scenario, "--rows", str(rows), "--budget-seconds", "60", "--no-plots"]
    result = conform(impl(f"buggy.py:{attr}"), *args, cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "NON-CONFORMING" in result.stdout
    record = json.loads((tmp_path / REPORTS / f"buggy.{attr}" / "report.json").read_text())
    assert caught_by in record["caught_by"]
    assert "Reproduce:" in (tmp_path / REPORTS / f"buggy.{attr}" / "report.md").read_text()


@pytest.mark.statistical
def test_python_api_from_pytest(tmp_path):
    """The adopters' use: run() on an adapter object inside their own test, assert on the Report."""
    verifier = runpy.run_path(str(IMPLS / "torch_vectorised.py"))["VERIFIER"]  # as `from their_engine import ...`
    scenarios = ["cf_dense_g4", "cf_zero_support_g3", "markov_g5", "ragged_g6", "point_mass_g4"]
    report = run(verifier, seed=11, budget_seconds=60, alpha=ALPHA, scenarios=scenarios, rows=12_000)
    assert report.passed, report.summary()
    first = next(r for r in report.checks if r.name == "first_token_law[cf_dense_g4]")
    need = min_num_samples_chisquare(0.05, first.alpha, 1e-3, max(first.df, 1))
    assert first.n >= need, f"N={first.n} < {need}: the check could not promise TV >= 0.05 at power 0.999"
    assert first.guaranteed_tv <= 0.05
    assert np.isfinite([r.p_value for r in report.checks]).all()
    assert report.to_dict()["verdict"] == "conforming"
    write_report(report, tmp_path / "torch-vectorised", spec="torch_vectorised.py:VERIFIER", plots=False)
    index = write_index(tmp_path).read_text()
    assert "| [torch-vectorised](torch-vectorised/report.md) | conforming |" in index
