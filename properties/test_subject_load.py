"""The subject is loaded guarded (issue 34): an exit, a signal or an exception while importing the verifier is a
usage error (exit 2) saying what happened, never 0 (a pass), 1 (a verdict) or 3 (specref's own bug)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.exact

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
VERIFY = "\ndef verify(target_probs, draft_probs, draft_tokens, generator):\n    return None\n"


@pytest.mark.parametrize(
    ("at_import", "said"),
    [
        ("import sys; sys.exit(0)", "called sys.exit(0)"),
        ("import sys; sys.exit(3)", "called sys.exit(3)"),
        ("raise SystemExit('msg')", "called sys.exit('msg')"),
        ("import os; os._exit(0)", "ended the process with exit status 0"),
        ("import os; os._exit(1)", "ended the process with exit status 1"),
        ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", "was killed by SIGSEGV"),
        ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", "was killed by SIGTERM"),
        ("raise KeyboardInterrupt", "raised KeyboardInterrupt"),
        ("raise RuntimeError('boom')", "RuntimeError: boom"),
    ],
)
def test_an_exit_signal_or_exception_at_import_is_a_usage_error(tmp_path, at_import, said):
    (tmp_path / "v.py").write_text(at_import + "\n" + VERIFY)
    command = [sys.executable, "-m", "specref.cli", "conform", "v.py:verify", "--rows", "300", "--report", "out"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=ENV)
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert said in result.stderr and "v.py" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr and not (tmp_path / "out" / "report.json").exists()


def test_a_module_spec_that_exits_at_import_is_a_usage_error_too(tmp_path):
    (tmp_path / "quits.py").write_text("import os; os._exit(0)\n" + VERIFY)
    command = [sys.executable, "-m", "specref.cli", "conform", "quits:verify", "--rows", "300"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=ENV)
    assert result.returncode == 2 and "IMPL='quits:verify'" in result.stderr, result.stderr


def test_a_module_that_prints_at_import_prints_once(tmp_path):
    (tmp_path / "v.py").write_text("print('hello from v')\n" + VERIFY.replace("return None", "return 1"))
    command = [sys.executable, "-m", "specref.cli", "conform", "v.py:nope"]
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120, env=ENV)
    assert result.returncode == 2 and "has no attribute 'nope'" in result.stderr, result.stderr
    assert result.stdout.count("hello from v") <= 1


IMPORTS_LOGGED = """import os
with open(os.environ["PID_LOG"], "a") as log:
    log.write(f"{os.getpid()}\\n")
from specref.batched import verify as _batched


def verify(target_probs, draft_probs, draft_tokens, generator):
    return _batched(target_probs, draft_probs, draft_tokens, generator)


class Ragged:
    name = "ragged-object"
    ragged = True

    def verify(self, target_probs, draft_probs, draft_tokens, generator, num_draft=None):
        return _batched(target_probs, draft_probs, draft_tokens, generator, num_draft=num_draft)


RAGGED = Ragged()
"""
#: Prints specref's own pid, then runs the CLI in that same process.
IN_PROCESS = (
    "import os, sys; print('specref pid', os.getpid()); from specref.cli import main; sys.exit(main(sys.argv[1:]))"
)


@pytest.mark.parametrize(("attr", "scenarios", "name"), [("verify", "cf_dense_g4", "v.verify"),
                                                         ("RAGGED", "ragged_g6", "ragged-object")])  # fmt: skip
def test_the_subject_is_imported_in_the_worker_never_in_specrefs_own_process(tmp_path, attr, scenarios, name):
    (tmp_path / "v.py").write_text(IMPORTS_LOGGED)
    log = tmp_path / "pids"
    command = [sys.executable, "-c", IN_PROCESS, "conform", f"v.py:{attr}", "--rows", "200", "--scenarios", scenarios,
               "--report", "out", "--no-plots"]  # fmt: skip
    result = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                            env={**ENV, "PID_LOG": str(log)})  # fmt: skip
    assert result.returncode == 0 and f"{name}: CONFORMING" in result.stdout, (result.stdout, result.stderr)
    own = result.stdout.split("specref pid ", 1)[1].split()[0]
    importers = log.read_text().split()
    assert own not in importers and len(importers) >= 2, (own, importers)  # the rehearsal's child, then the worker
