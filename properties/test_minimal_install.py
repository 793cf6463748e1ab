"""What `pip install specref` plus torch gives a user: a venv with the core dependencies and torch only.

The core dependencies and torch (pinned to the CPU build, TORCH_CPU, so that pip never fetches a CUDA build) come
from the running interpreter when it has them at the pinned versions, which nox's and CI's environments do: their
installed copies and everything they require are linked, read-only, into a folder (installed_closure.py), so that
no second torch is unpacked and byte-compiled. Elsewhere (or with SPECREF_TEST_ENV_FROM=pip) pip installs them from
its configured sources into a cached folder (core_packages). A fresh `python -m venv` sees that folder through a
.pth file, and specref goes into the venv from a copy of this checkout with --no-deps: no extra, so no matplotlib,
tqdm or transformers (asserted). In it, `specref conform` on a certainly-broken implementation
with a fixed --rows must print its verdict, exit 1 and write report.md and report.json, saying once, before the
verdict, that plots need the `plots` extra; `specref conform transformers` must exit 2 naming the `transformers`
extra without importing torch. The verdict asserted is certain (a T0 violation on row 0), so this test spends no
false-alarm budget. Measured on the 2-core machine under a load average of ~11: 31 s with the packages cached
(specref's install 10 s, the conformance run 18 s, mostly importing torch and scipy.stats), 230 s for the one cold
pip build (unpacking and byte-compiling torch), which linking the installed copies replaces (about 1 s).

Skips (with the reason) only when the venv cannot be built for a reason outside the project: no pip or venv module,
no writable cache folder, or no source offering the pinned wheels. Any other failure, including installing specref
itself, fails.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from installed_closure import link_closure

from specref import cache as specref_cache

REPO = Path(__file__).resolve().parents[1]
TORCH_CPU = "torch==2.13.0+cpu"  # the local CPU build; noxfile pins the same torch 2.13.0
CORE = ["numpy>=1.24", "scipy>=1.10", "setuptools>=68"]  # pyproject's dependencies, and its build backend
PIP_INSTALL = ["install", "--disable-pip-version-check", "-q"]  # compiled: PYTHONDONTWRITEBYTECODE may be set
COMPLETE = ".specref-complete"
EXTRAS = ("matplotlib", "tqdm", "transformers", "hypothesis")
BROKEN = "broken.py:ids_out_of_range"  # emits token id V on row 0: t0_valid_ids fails with certainty
# pip's words for "no source offers this wheel here" (no network, no index, another platform)
UNAVAILABLE = re.compile(r"No matching distribution|Could not find a version|NewConnectionError|Network is unreachable|"
                         r"Temporary failure in name resolution|ProxyError")  # fmt: skip


def _run(args, *, cwd: Path, timeout: float = 300, merge: bool = False) -> subprocess.CompletedProcess:
    """args run outside this checkout's environment; merge: stderr into stdout, interleaved as a terminal shows them."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return subprocess.run([str(a) for a in args], cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT if merge else subprocess.PIPE, text=True, timeout=timeout,
                          env=env)  # fmt: skip


def _pip_supports_python_option() -> bool:
    """pip >= 22.3 installs into another interpreter (--python): the venv needs no pip of its own (saves ~10 s)."""
    result = _run([sys.executable, "-m", "pip", "--version"], cwd=REPO)
    if result.returncode != 0:
        pytest.skip(f"pip is not available to {sys.executable}: {result.stderr.strip()[-300:]}")
    version = tuple(int(x) for x in re.findall(r"pip (\d+)\.(\d+)", result.stdout)[0])
    return version >= (22, 3)


def core_packages() -> tuple[Path, float]:
    """(a folder with the core dependencies and torch, seconds spent building it).

    pip installs them (--target) once per Python and requirement set, under $SPECREF_CACHE/test-envs (default
    ~/.cache/specref/test-envs); later runs reuse the folder (0 s). pip byte-compiles it once (a run with
    PYTHONDONTWRITEBYTECODE would otherwise compile torch on every import). Built in a private folder and renamed
    into place, so that concurrent runs never see a half-built one.
    """
    key = hashlib.sha256(repr((sys.version, sys.platform, CORE, TORCH_CPU)).encode()).hexdigest()[:16]
    cache = specref_cache.root() / "test-envs"
    folder = cache / f"core-torch-{key}"
    if (folder / COMPLETE).is_file():
        return folder, 0.0
    try:
        cache.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=".building-", dir=cache))
    except OSError as error:
        pytest.skip(f"no writable cache folder for the venv's packages ({cache}): {error}")
    started = time.perf_counter()
    try:
        deps = _run([sys.executable, "-m", "pip", *PIP_INSTALL, "--target", building, "--only-binary", ":all:", *CORE,
                     TORCH_CPU], cwd=cache, timeout=900)  # fmt: skip
        if deps.returncode != 0:
            if UNAVAILABLE.search(deps.stderr):
                pytest.skip(f"no source offers the core wheels and {TORCH_CPU} here: {deps.stderr.strip()[-400:]}")
            pytest.fail(f"pip install of the core dependencies failed:\n{deps.stderr[-3000:]}")
        (building / COMPLETE).write_text(f"{CORE} {TORCH_CPU}\n")
        try:
            building.rename(folder)
        except OSError:  # another run finished first: use its folder
            pass
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return folder, time.perf_counter() - started


def linked_packages(root: Path) -> tuple[Path | None, str]:
    """(a folder of links to this interpreter's core dependencies and torch, what it holds), or (None, why not)."""
    if os.environ.get("SPECREF_TEST_ENV_FROM") == "pip":
        return None, "SPECREF_TEST_ENV_FROM=pip"
    folder = root / "core-links"
    linked, why = link_closure([*CORE, TORCH_CPU], folder)
    return (folder, ", ".join(linked)) if linked else (None, why)


def build_minimal_venv(root: Path) -> tuple[Path, dict[str, float]]:
    """A fresh venv seeing the core packages (a .pth file) and specref installed without extras: (its python,
    seconds per step); skips when an outside cause prevents it."""
    seconds = {}
    started = time.perf_counter()
    packages, held = linked_packages(root)
    if packages is not None:
        seconds["core + torch linked from this interpreter"] = time.perf_counter() - started
    else:
        print(f"core + torch from pip: {held}")
        packages, seconds["core + torch from pip (0 when cached)"] = core_packages()
    started = time.perf_counter()
    venv = root / "venv"
    own_pip = not _pip_supports_python_option()
    made = _run([sys.executable, "-m", "venv", *([] if own_pip else ["--without-pip"]), venv], cwd=root)
    if made.returncode != 0:
        pytest.skip(f"python -m venv failed here: {made.stderr.strip()[-300:]}")
    python = venv / "bin" / "python"
    site = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=root)
    Path(site.stdout.strip(), "core-and-torch.pth").write_text(f"{packages}\n")
    seconds["venv"] = time.perf_counter() - started

    started = time.perf_counter()
    source = root / "src"  # a copy, so that the build writes nothing into the checkout
    shutil.copytree(REPO / "specref", source / "specref", ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, source / name)
    pip = [python, "-m", "pip"] if own_pip else [sys.executable, "-m", "pip", "--python", python]
    own = _run([*pip, *PIP_INSTALL, "--no-deps", "--no-build-isolation", source], cwd=root)
    assert own.returncode == 0, f"pip install of specref (no extras) failed:\n{own.stderr[-3000:]}"
    seconds["specref"] = time.perf_counter() - started
    return python, seconds


@pytest.fixture
def drop_venv(tmp_path):
    yield
    shutil.rmtree(tmp_path / "venv", ignore_errors=True)  # pytest keeps the last three runs' tmp_path


@pytest.mark.exact
@pytest.mark.install
def test_core_and_torch_only_install_runs_a_conformance_check(tmp_path, drop_venv):
    started = time.perf_counter()
    python, seconds = build_minimal_venv(tmp_path)
    bin_dir = python.parent
    present = _run([python, "-c", f"import importlib.util as u; print([m for m in {EXTRAS!r} if u.find_spec(m)])"],
                   cwd=tmp_path)  # fmt: skip
    assert present.stdout.strip() == "[]", f"the venv is not minimal (a polluted cache? delete it): {present.stdout}"

    # a missing adapter package: exit 2 at once, naming the extra, before torch is imported
    code = ("import sys\nfrom specref.cli import main\nstatus = main(['conform', 'transformers'])\n"
            "print('torch' in sys.modules)\nsys.exit(status)")  # fmt: skip
    clock = time.perf_counter()
    missing = _run([python, "-c", code], cwd=tmp_path)
    seconds["conform transformers"] = time.perf_counter() - clock
    assert missing.returncode == 2, missing.stdout + missing.stderr
    assert "pip install 'specref[transformers]'" in missing.stderr and missing.stdout.split() == ["False"]

    # a conformance run through the console script: the verdict, exit 1, the report, one note about plots
    shutil.copytree(REPO / "properties" / "external_impls", tmp_path / "impls")
    clock = time.perf_counter()
    result = _run([bin_dir / "specref", "conform", tmp_path / "impls" / BROKEN, "--scenarios", "cf_dense_g4",
                   "--rows", "1024", "--budget-seconds", "60", "--report", tmp_path / "report"], cwd=tmp_path,
                  merge=True)  # fmt: skip
    seconds["conform run"] = time.perf_counter() - clock
    output = result.stdout
    assert result.returncode == 1, output
    assert "Traceback" not in output and "internal error" not in output, output
    assert output.count("matplotlib not installed") == 1 and "pip install 'specref[plots]'" in output, output
    verdict_line = "ids_out_of_range: NON-CONFORMING"
    assert verdict_line in output, output
    assert output.index("matplotlib not installed") < output.index(verdict_line)  # said at the start
    record = json.loads((tmp_path / "report" / "report.json").read_text())
    assert record["verdict"] == "non-conforming" and "t0_valid_ids" in record["caught_by"]
    assert (tmp_path / "report" / "report.md").read_text().startswith("# Conformance report")
    assert not list((tmp_path / "report").glob("*.png"))

    seconds["total"] = time.perf_counter() - started
    print("minimal venv, seconds per step: " + ", ".join(f"{k} {v:.1f}" for k, v in seconds.items()))
