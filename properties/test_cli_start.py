"""The first minutes with the command line: fast usage errors and --list, errors that name what was wrong, and runs
that leave a git checkout clean (all exact).

Times are ratios to `python -c pass` in the same test (the interpreter's own start on this machine, under the same
load), never absolute: importing torch alone costs about 25 times that start, so a bound of RATIO times it fails
whenever a usage error or --list imports torch, while leaving room for specref's own modules and a loaded machine.
Each time is the best of REPEATS runs. The same answers are also checked for what they import (no torch, no
transformers), which does not depend on the machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specref import outputs
from specref.cli import main
from specref.conformance.resolve import resolve
from specref.outputs import REPORTS

pytestmark = pytest.mark.exact

REPO = Path(__file__).resolve().parents[1]
IMPLS = REPO / "properties" / "external_impls"
BROKEN = f"{IMPLS / 'broken.py'}:ids_out_of_range"  # emits token id V on row 0: a certain verdict, no alpha spent
RATIO = 10.0
REPEATS = 3
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def specref(*args: str, cwd: Path, env: dict | None = None) -> tuple[float, subprocess.CompletedProcess]:
    """(best wall seconds of REPEATS, the last result) of `python -m specref.cli ARGS`."""
    return best([sys.executable, "-m", "specref.cli", *args], cwd, env)


def best(command: list[str], cwd: Path, env: dict | None = None, repeats: int = REPEATS):
    seconds, result = float("inf"), None
    for _ in range(repeats):
        started = time.perf_counter()
        result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120, env=env or ENV)
        seconds = min(seconds, time.perf_counter() - started)
    return seconds, result


@pytest.fixture(scope="module")
def python_start(tmp_path_factory) -> float:
    seconds, _ = best([sys.executable, "-c", "pass"], tmp_path_factory.mktemp("start"), repeats=5)
    return seconds


def imports_after(args: list[str], cwd: Path) -> list[str]:
    """Which of torch and transformers `specref ARGS` imported (in-process main, in a fresh interpreter)."""
    code = ("import sys\nfrom specref.cli import main\ntry:\n    main(" + repr(args) + ")\nexcept SystemExit:\n"
            "    pass\nprint(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")  # fmt: skip
    result = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120,
                            env=ENV)  # fmt: skip
    return eval(result.stdout.splitlines()[-1])  # noqa: S307 -- a list of names printed by the line above


# --- fast answers --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["conform", "missing/my_verifier.py:verify"], "IMPL file 'missing/my_verifier.py' does not exist"),
        (["conform", "light.py:nope"], "has no attribute 'nope'"),
        (["conform", "light.py:draw"], "cannot be called as verify("),
        (["conform", "batched", "--alpha", "2"], "--alpha=2.0 must lie in (0, 1)"),
        (["conform", "batched", "--no-such-option"], "unrecognized arguments: --no-such-option"),
    ],
)
def test_a_usage_error_answers_at_once_without_importing_torch(tmp_path, python_start, args, message):
    """light.py imports nothing heavy (a user's module importing torch costs its import: that time is theirs)."""
    (tmp_path / "light.py").write_text("def draw(probs, u):\n    return 0\n")
    seconds, result = specref(*args, cwd=tmp_path)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert seconds < RATIO * python_start, f"{seconds:.2f} s = {seconds / python_start:.1f} x python's start"
    assert imports_after(args, tmp_path) == []
    assert not (tmp_path / REPORTS).exists()


@pytest.mark.parametrize("impl", ["batched", "tree-mss", "torchy.py:verify"])
def test_an_unknown_scenario_is_refused_before_torch_loads(tmp_path, python_start, impl):
    """For a built-in (its contract's names) and for a verifier file that imports torch (every verify-level
    contract's names: its kind is read when it loads): the names come from the catalogues' source
    (conformance/scenario_names.py), so neither the file nor torch is imported to refuse it."""
    (tmp_path / "torchy.py").write_text("import torch\n\n\ndef verify(target_probs, draft_probs, draft_tokens, "
                                        "generator):\n    return torch.zeros(1)\n")  # fmt: skip
    args = ["conform", impl, "--scenarios", "nope"]
    seconds, result = specref(*args, cwd=tmp_path)
    assert result.returncode == 2 and "--scenarios: 'nope' is unknown" in result.stderr, result.stderr
    assert ("tree_star_cf" in result.stderr) == (impl != "batched"), result.stderr  # the names it was held to
    assert seconds < RATIO * python_start, f"{seconds:.2f} s = {seconds / python_start:.1f} x python's start"
    assert imports_after(args, tmp_path) == []


def test_the_scenario_names_read_without_torch_are_the_built_catalogues():
    from specref.conformance.contracts import contract
    from specref.conformance.scenario_names import VERIFY_LEVEL, names

    assert set(VERIFY_LEVEL) == {"chain", "tree", "sampling"}
    for name in VERIFY_LEVEL:
        assert names(name) == tuple(contract(name).catalogue()), name


def test_list_answers_at_once_without_warnings_or_engines(tmp_path, python_start):
    env = {**ENV, "PYTHONWARNINGS": "always"}  # any warning raised would be shown
    seconds, result = specref("conform", "--list", cwd=tmp_path, env=env)
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert "  transformers " in result.stdout and "  tree-mss " in result.stdout
    assert seconds < RATIO * python_start, f"{seconds:.2f} s = {seconds / python_start:.1f} x python's start"
    assert imports_after(["conform", "--list"], tmp_path) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["conform", "transformers-generate", "--rows", "10", "--shard", "0/2"], "pipeline runs cannot be sharded"),
        (["conform", "transformers-generate", "--scenarios", "cf_dense_g4"], "not to pipelines"),
    ],
)
def test_an_option_a_pipeline_cannot_take_is_refused_before_the_pipeline_loads(tmp_path, args, message):
    """The kind is the built-in's row (a file's: its declaration, read in the rehearsal): no model, no transformers."""
    result = subprocess.run([sys.executable, "-m", "specref.cli", *args], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120, env=ENV)  # fmt: skip
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert "transformers" not in imports_after(args, tmp_path)


# --- errors that name what was wrong -------------------------------------------------------------------------------


def test_a_wrong_signature_says_what_was_expected_and_what_was_given(tmp_path, capsys):
    (tmp_path / "mine.py").write_text(
        "def verify(target_probs, draft_tokens):\n    return None\n"
        "def make_verifier():\n    return verify\n"
        "def tree(target_probs, draft_probs, draft_tokens, parents, generator, extra):\n    return None\n"
    )
    assert main(["conform", f"{tmp_path / 'mine.py'}:verify"]) == 2
    err = capsys.readouterr().err
    assert ("verify(target_probs, draft_tokens) cannot be called as verify(target_probs, draft_probs, draft_tokens, "
            "generator): it takes 2 positional arguments, not 4") in err  # fmt: skip
    assert "factory" not in err and "builds the verifier" not in err
    assert main(["conform", f"{tmp_path / 'mine.py'}:make_verifier"]) == 2
    err = capsys.readouterr().err
    assert "it takes 0 positional arguments, not 4; if it builds the verifier, point IMPL at what it returns" in err
    assert main(["conform", "--tree", f"{tmp_path / 'mine.py'}:tree"]) == 2
    err = capsys.readouterr().err
    assert (
        "cannot be called as verify(target_probs, draft_probs, draft_tokens, parents, generator): it requires 6 "
        in (err)
    )


def test_a_misspelt_builtin_or_scenario_gets_the_close_names(capsys):
    assert main(["conform", "tree-mms"]) == 2
    assert "IMPL='tree-mms' is not a built-in (did you mean 'tree-mss'" in capsys.readouterr().err
    assert main(["conform", "batched", "--scenarios", "cf_dense_g5"]) == 2
    assert "--scenarios: 'cf_dense_g5' is unknown (did you mean 'cf_dense_g4'?)" in capsys.readouterr().err


def test_the_subject_is_named_by_module_and_attribute():
    """Every function called `verify` used to print as `verify:`; the name now carries the module."""
    adapter, label = resolve(f"{IMPLS / 'numpy_loop.py'}:verify")
    assert adapter.name == label == "numpy_loop.verify"
    adapter, label = resolve(f"{IMPLS / 'torch_vectorised.py'}:VERIFIER")  # an object naming itself keeps its name
    assert adapter.name == label == "torch-vectorised"


def test_merge_with_a_missing_shard_leaves_no_out_folder(tmp_path, capsys):
    shard = tmp_path / "shard-0"
    args = ["--scenarios", "cf_dense_g4", "--rows", "256", "--no-plots", "--report", str(shard)]
    assert main(["conform", BROKEN, "--shard", "0/2", *args]) == 1
    capsys.readouterr()
    out = tmp_path / "merged"
    assert main(["merge", str(shard), "--out", str(out)]) == 2
    assert "shards [1] of 2 are missing" in capsys.readouterr().err
    assert not out.exists()
    assert main(["merge", str(tmp_path / "empty"), "--out", str(out)]) == 2 and not out.exists()


# --- a clean checkout ----------------------------------------------------------------------------------------------


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


@pytest.fixture
def checkout(tmp_path) -> Path:
    """A fresh git repository with one commit, as a user's clone is (no .gitignore of ours in it)."""
    if subprocess.run(["git", "--version"], capture_output=True).returncode != 0:
        pytest.skip("git is not installed")
    git("init", "-q", cwd=tmp_path)
    (tmp_path / "README.md").write_text("a clone\n")
    git("add", ".", cwd=tmp_path)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "first", cwd=tmp_path)
    return tmp_path


def test_the_default_report_folder_is_ignored_here():
    inside = f"{REPORTS}/batched/report.md"
    assert git("check-ignore", inside, cwd=REPO).strip() == inside  # this repository's .gitignore lists the folder


def test_conform_writes_to_an_ignored_folder_says_where_and_leaves_the_checkout_clean(checkout):
    result = subprocess.run([sys.executable, "-m", "specref.cli", "conform", BROKEN, "--scenarios", "cf_dense_g4",
                             "--rows", "256", "--no-plots"], cwd=checkout, capture_output=True, text=True,
                            timeout=300, env=ENV)  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    where = Path(REPORTS) / "broken.ids_out_of_range" / "report.md"
    assert f"report: {where}" in result.stdout
    assert (checkout / where).is_file()
    assert git("status", "--porcelain", "--ignored=no", cwd=checkout) == ""


def test_the_demo_writes_to_the_ignored_folder_and_says_checking(checkout, monkeypatch, capsys):
    """The demo up to its first run (stopped there: the run itself is test_demo.py's): its folder is the ignored
    default, and its progress line says 'checking', not a verdict-like 'conforming'."""
    import specref.conformance

    def stop(*args, **kwargs):
        raise RuntimeError("stopped by the test")

    monkeypatch.chdir(checkout)
    monkeypatch.setattr(specref.conformance, "run", stop, raising=False)
    assert main(["demo", "--no-plots"]) == 3
    out = capsys.readouterr().out
    assert out.startswith("specref demo: checking ") and "conforming" not in out
    assert (checkout / REPORTS / "demo").is_dir() and (checkout / REPORTS / ".gitignore").is_file()
    assert git("status", "--porcelain", cwd=checkout) == ""
    assert outputs.default_folder("x") == str(Path(REPORTS) / "x")
