"""A missing optional package never costs a run: it is named before the run starts, and plots never cost a report.

Every test here is exact: a missing package is simulated by `sys.modules[name] = None` (import raises ImportError,
find_spec answers None), and the runs whose verdict is asserted use an adapter that certainly fails a T0 check
(broken.py:ids_out_of_range emits id V on row 0), so no test spends false-alarm budget. Where a conforming
implementation runs, only the agreement of exit code, printed verdict and report.json is asserted, never the
verdict itself. The same behaviour in a real venv without the extras: test_minimal_install.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from specref import builtins, extras
from specref.builtins import BUILTINS, BY_NAME
from specref.cli import main
from specref.outputs import REPORTS

REPO = Path(__file__).resolve().parents[1]
BROKEN = str(REPO / "properties" / "external_impls" / "broken.py:ids_out_of_range")
PLOTS_INSTALL = "pip install 'specref[plots]'"
TRANSFORMERS_INSTALL = "pip install 'specref[transformers]'"


def run_blocked(blocked: list[str], code: str, cwd: Path) -> subprocess.CompletedProcess:
    """Python `code` in a fresh interpreter where the `blocked` modules cannot be imported."""
    prelude = f"import sys\nfor name in {blocked!r}:\n    sys.modules[name] = None\n"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", prelude + code], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=env)  # fmt: skip


def block(monkeypatch, *names: str) -> None:
    for name in names:
        monkeypatch.setitem(sys.modules, name, None)


# --- the table ------------------------------------------------------------------------------------------------


@pytest.mark.exact
def test_requirement_availability(monkeypatch):
    assert extras.Requirement("json", "-").available
    assert not extras.Requirement("no_such_module_xyz", "-").available
    block(monkeypatch, "json")
    assert not extras.Requirement("json", "-").available


@pytest.mark.exact
def test_every_transformers_builtin_is_registered():
    pytest.importorskip("transformers")
    from specref.conformance import builtin_adapters
    from specref.hf.pipelines import builtin_pipelines

    names = [n for n in builtin_adapters() if n.startswith("transformers")] + list(builtin_pipelines())
    assert len(names) >= 4
    for name in names:
        assert extras.TRANSFORMERS in BY_NAME[name].needs, name
        assert builtins.adapter_requirements(name) == (extras.TORCH, *BY_NAME[name].needs)
    assert builtins.adapter_requirements("my_file.py:verify") == (extras.TORCH,)


@pytest.mark.exact
def test_missing_dependency_names_module_and_command(monkeypatch):
    block(monkeypatch, "transformers")
    with pytest.raises(extras.MissingDependency) as info:
        extras.require("IMPL='transformers'", *builtins.adapter_requirements("transformers"))
    assert str(info.value) == (f"IMPL='transformers' needs transformers, not installed here; install with: "
                               f"{TRANSFORMERS_INSTALL}")  # fmt: skip
    extras.require("anything", extras.Requirement("json", "-"))  # present: no error


@pytest.mark.exact
def test_notice_names_the_extra_only_for_what_the_run_uses(monkeypatch):
    block(monkeypatch, "matplotlib", "tqdm")
    assert extras.notice(plots=False, progress=False) is None
    only_plots = extras.notice(plots=True, progress=False)
    assert "matplotlib" in only_plots and "no PNG plots" in only_plots and PLOTS_INSTALL in only_plots
    assert "tqdm" not in only_plots
    both = extras.notice(plots=True, progress=True)
    assert "no progress bar" in both and both.count(PLOTS_INSTALL) == 1
    monkeypatch.undo()
    pytest.importorskip("matplotlib")
    pytest.importorskip("tqdm")
    assert extras.notice(plots=True, progress=True) is None


# --- specref conform: missing packages are usage errors before anything runs -----------------------------------


@pytest.mark.exact
def test_missing_transformers_exits_2_at_once_without_importing_torch(tmp_path):
    code = ("import time\nstarted = time.perf_counter()\nfrom specref.cli import main\n"
            "status = main(['conform', 'transformers'])\n"
            "print('torch' in sys.modules, round(time.perf_counter() - started, 3))\nsys.exit(status)")  # fmt: skip
    result = run_blocked(["transformers"], code, tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"IMPL='transformers' needs transformers, not installed here; install with: {TRANSFORMERS_INSTALL}" in (
        result.stderr
    )
    torch_imported, seconds = result.stdout.split()
    assert torch_imported == "False", seconds  # torch's import alone takes seconds: "at once" means not importing it
    assert not (tmp_path / REPORTS).exists()


@pytest.mark.exact
@pytest.mark.parametrize("name", sorted(b.name for b in BUILTINS if b.needs))
def test_every_registered_builtin_exits_2_naming_its_install_command(monkeypatch, capsys, tmp_path, name):
    monkeypatch.chdir(tmp_path)
    requirements = BY_NAME[name].needs
    block(monkeypatch, *(r.module for r in requirements))
    assert main(["conform", name]) == 2
    err = capsys.readouterr().err
    for requirement in requirements:
        assert requirement.module in err and requirement.install in err, err
    assert not (tmp_path / REPORTS).exists()


@pytest.mark.exact
@pytest.mark.parametrize("args", [[BROKEN], ["batched"]])
def test_missing_torch_exits_2_naming_the_torch_extra(tmp_path, args):
    result = run_blocked(["torch"], f"from specref.cli import main\nsys.exit(main(['conform', *{args!r}]))", tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "needs torch, not installed here; install with: pip install 'specref[torch]'" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.exact
def test_version_and_worked_cases_import_no_torch(tmp_path):
    code = ("from specref.cli import main\nassert main(['worked', '-n', '50']) == 0\n"
            "print('torch' in sys.modules)")  # fmt: skip
    result = run_blocked([], code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-1] == "False"


@pytest.mark.exact
def test_list_names_what_unavailable_builtins_need(monkeypatch, capsys):
    block(monkeypatch, "transformers")
    assert main(["conform", "--list"]) == 0
    out = capsys.readouterr().out
    assert "  reference " in out and "  batched " in out
    line = next(line for line in out.splitlines() if line.startswith("  transformers "))
    assert line.endswith(f"[kernel]  (needs transformers: {TRANSFORMERS_INSTALL})"), line
    assert "  reference " in out and "(needs" not in next(x for x in out.splitlines() if x.startswith("  reference "))


@pytest.mark.exact
def test_list_works_without_torch_and_says_what_each_builtin_needs(tmp_path):
    """--list imports no torch: without it every built-in is listed with the torch extra's command."""
    result = run_blocked(["torch"], "from specref.cli import main\nsys.exit(main(['conform', '--list']))", tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    for b in BUILTINS:
        line = next(x for x in result.stdout.splitlines() if x.startswith(f"  {b.name} "))
        assert "(needs torch" in line and "pip install 'specref[torch]'" in line, line


@pytest.mark.exact
def test_unwritable_report_folder_is_a_usage_error_before_the_run(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["conform", BROKEN, "--report", str(blocker / "sub"), "--rows", "256"]) == 2
    assert "sub' cannot be created: " in capsys.readouterr().err


# --- plots are optional: the report is written first, and a plot failure costs only the plot -------------------


def conform_broken(out: Path, *extra: str) -> int:
    return main(["conform", BROKEN, "--scenarios", "cf_dense_g4", "--rows", "512", "--budget-seconds", "60",
                 "--report", str(out), *extra])  # fmt: skip


def assert_report(out: Path, verdict: str) -> dict:
    record = json.loads((out / "report.json").read_text())
    assert record["verdict"] == verdict
    markdown = (out / "report.md").read_text()
    assert markdown.startswith(f"# Conformance report: `{record['impl']}`")
    assert f"**Verdict: {verdict.upper()}**" in markdown
    return record


@pytest.mark.exact
def test_without_matplotlib_the_run_says_so_once_and_writes_its_report(monkeypatch, capsys, tmp_path):
    block(monkeypatch, "matplotlib")
    assert conform_broken(tmp_path / "r") == 1
    captured = capsys.readouterr()
    assert captured.err.count("matplotlib not installed") == 1 and PLOTS_INSTALL in captured.err, captured.err
    assert "NON-CONFORMING" in captured.out
    record = assert_report(tmp_path / "r", "non-conforming")
    assert record["files"] == ["report.json", "report.md"]
    assert not list((tmp_path / "r").glob("*.png"))
    assert "## Plots" not in (tmp_path / "r" / "report.md").read_text()


@pytest.mark.exact
def test_no_plots_stays_silent(monkeypatch, capsys, tmp_path):
    block(monkeypatch, "matplotlib", "tqdm")
    assert conform_broken(tmp_path / "r", "--no-plots") == 1
    captured = capsys.readouterr()
    assert "matplotlib" not in captured.err and "tqdm" not in captured.err and "specref[plots]" not in captured.err
    assert_report(tmp_path / "r", "non-conforming")


@pytest.mark.exact
def test_a_failing_plot_costs_only_the_plot(monkeypatch, capsys, tmp_path):
    """The bug of the issue: a plot failure after the run used to be exit 3 with no report."""
    pytest.importorskip("matplotlib")
    from specref.conformance.report import render

    def broken_plots(record, out):
        raise RuntimeError("drawing failed")

    monkeypatch.setattr(render, "write_plots", broken_plots)
    assert conform_broken(tmp_path / "r") == 1  # the verdict's exit code, not 3
    captured = capsys.readouterr()
    assert "NON-CONFORMING" in captured.out
    assert "RuntimeError: drawing failed" in captured.err and "internal error" not in captured.err
    assert assert_report(tmp_path / "r", "non-conforming")["files"] == ["report.json", "report.md"]


@pytest.mark.exact
def test_drawn_plots_are_listed_and_shown(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    assert conform_broken(tmp_path / "r") == 1
    record = assert_report(tmp_path / "r", "non-conforming")
    pngs = sorted(p.name for p in (tmp_path / "r").glob("*.png"))
    assert pngs and record["files"] == sorted(["report.json", "report.md", *pngs])
    markdown = (tmp_path / "r" / "report.md").read_text()
    assert all(f"![{name}]({name})" in markdown for name in pngs)


@pytest.mark.exact
def test_exit_code_printed_verdict_and_report_agree_for_a_conforming_impl(monkeypatch, capsys, tmp_path):
    """No verdict asserted (that would spend false-alarm budget): only that all three tell the same one."""
    block(monkeypatch, "matplotlib")
    status = main(["conform", "batched", "--scenarios", "cf_dense_g4", "--rows", "2000", "--report", str(tmp_path)])
    record = json.loads((tmp_path / "report.json").read_text())
    assert status == (0 if record["verdict"] == "conforming" else 1)
    assert f"batched: {record['verdict'].upper()}" in capsys.readouterr().out


# --- the other entry points -----------------------------------------------------------------------------------


@pytest.mark.exact
@pytest.mark.parametrize(
    ("module", "blocked", "install"),
    [
        ("specref.e2e", "transformers", TRANSFORMERS_INSTALL),
        ("specref.batched.bench", "transformers", TRANSFORMERS_INSTALL),
        ("specref.e2e", "torch", "pip install 'specref[torch]'"),
        ("specref.conformance.suite", "torch", "pip install 'specref[torch]'"),
    ],
)
def test_entry_points_exit_2_before_importing_what_they_lack(tmp_path, module, blocked, install):
    code = (f"import runpy\nsys.argv = [{module!r}, '--out', 'out']\n"
            f"try:\n    runpy.run_module({module!r}, run_name='__main__')\n"
            "finally:\n    print('torch' in sys.modules and sys.modules['torch'] is not None)")  # fmt: skip
    result = run_blocked([blocked], code, tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"needs {blocked}, not installed here; install with: {install}" in result.stderr
    assert result.stdout.split()[-1] == "False"  # stopped before torch was imported
    assert not (tmp_path / "out").exists()


@pytest.mark.exact
def test_suite_only_names_the_extra_of_a_missing_builtin(monkeypatch, capsys, tmp_path):
    from specref.conformance import suite

    block(monkeypatch, "transformers")
    with pytest.raises(SystemExit) as info:
        suite.main(["--only", "transformers", "--out", str(tmp_path)])
    assert info.value.code == 2
    assert TRANSFORMERS_INSTALL in capsys.readouterr().err


@pytest.mark.exact
def test_e2e_report_is_written_before_its_plot(monkeypatch, capsys, tmp_path):
    """hf.report.write_reports on the committed e2e record: a failing plot leaves e2e.json and e2e.md, unlinked."""
    from specref.hf import report as e2e_report

    def broken_plot(report, path):
        raise RuntimeError("drawing failed")

    record = json.loads((REPO / "reports" / "e2e" / "e2e.json").read_text())
    monkeypatch.setattr(e2e_report, "plot", broken_plot)
    e2e_report.write_reports(record, tmp_path)
    assert "RuntimeError: drawing failed" in capsys.readouterr().err
    assert json.loads((tmp_path / "e2e.json").read_text())["all_as_expected"] == record["all_as_expected"]
    markdown = (tmp_path / "e2e.md").read_text()
    assert markdown.startswith("# specref end-to-end report") and "e2e.png" not in markdown
    e2e_report.write_reports(record, tmp_path / "no-plots", plots=False)
    assert "e2e.png" not in (tmp_path / "no-plots" / "e2e.md").read_text()


# --- no reference to a path outside the repository ------------------------------------------------------------

# Built from pieces so that this file does not match itself.
OUTSIDE = ["../" + "shared", "/work/" + "shared", "DESIGN" + ".md", "VERIFIERS" + ".md"]


def outside_references(text: str) -> list[str]:
    # a whole name: reports/calibration-design.md is the repository's own file, not the design card
    if text.isascii():  # the same matches at str.find's speed (ASCII folds case by A-Z alone): 12 MB here, 4 s -> 0.1
        lowered = text.lower()
        return [pattern for pattern in OUTSIDE if _whole_name_in(lowered, pattern.lower())]
    return [pattern for pattern in OUTSIDE if re.search(r"(?<![\w-])" + re.escape(pattern), text, re.IGNORECASE)]


def _whole_name_in(text: str, pattern: str) -> bool:
    start = text.find(pattern)
    while start != -1:
        if start == 0 or not (text[start - 1].isalnum() or text[start - 1] in "_-"):
            return True
        start = text.find(pattern, start + 1)
    return False


def repository_text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True)  # fmt: skip
    if listed.returncode == 0:
        names = [n for n in listed.stdout.decode().split("\0") if n]
    else:  # not a git checkout (an sdist): every file but caches and build output
        skip = {".git", ".nox", ".venv", "__pycache__", ".hypothesis", ".pytest_cache", ".ruff_cache", "build", "dist"}
        names = [str(p.relative_to(REPO)) for p in REPO.rglob("*") if p.is_file() and not skip & set(p.parts)]
    files = []
    for name in names:
        path = REPO / name
        if path.is_file() and b"\0" not in path.read_bytes()[:8192]:  # text only: PNGs may match by chance
            files.append(path)
    return files


@pytest.mark.exact
def test_the_matcher_catches_each_pattern():
    for pattern in OUTSIDE:
        assert outside_references(f"see `{pattern.upper()}` for details") == [pattern]
    assert outside_references("specref/conformance/adapters.py") == []
    assert outside_references("reports/calibration-design.md") == []  # a name of its own, not the design card


@pytest.mark.exact
def test_no_file_refers_to_paths_outside_the_repository():
    files = repository_text_files()
    assert len(files) > 50 and REPO / "README.md" in files
    found = {str(p.relative_to(REPO)): outside_references(p.read_text("utf-8", "replace")) for p in files}
    offenders = {name: patterns for name, patterns in found.items() if patterns}
    assert not offenders, f"references to paths outside the repository: {offenders}"
