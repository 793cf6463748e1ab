"""Ctrl-C and the verifier's own processes (issue 34): SIGINT during a run writes a partial report that says it is
partial and why, and exits 130 without a traceback; a verifier that ignores SIGINT at import does not disable
Ctrl-C; the subprocesses a verifier starts end with its worker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.exact

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}

SLOW = """
import pathlib, signal, time
from specref.batched import verify as _verify
{at_import}

def verify(target_probs, draft_probs, draft_tokens, generator):
    pathlib.Path("called").touch()
    time.sleep(0.3)
    return _verify(target_probs, draft_probs, draft_tokens, generator)
"""


def wait_for(path: Path, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.1)


def _ctrl_c_as_in_a_terminal() -> None:
    """The command starts with SIGINT at its default, as typed in a terminal. A process started in the background
    by a shell without job control (`cmd &` in a script) inherits SIGINT ignored, and Python keeps it so: there
    Ctrl-C never reaches specref, as it reaches no other program."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("at_import", ["", "signal.signal(signal.SIGINT, signal.SIG_IGN)"])
def test_ctrl_c_writes_a_partial_report_and_exits_130_without_a_traceback(tmp_path, at_import):
    (tmp_path / "slow.py").write_text(SLOW.format(at_import=at_import))
    command = [sys.executable, "-m", "specref.cli", "conform", "slow.py:verify", "--rows", "1000000", "--scenarios",
               "cf_dense_g4", "--no-plots", "--report", "out"]  # fmt: skip
    process = subprocess.Popen(command, cwd=tmp_path, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, preexec_fn=_ctrl_c_as_in_a_terminal)  # fmt: skip
    wait_for(tmp_path / "called", 120)
    time.sleep(1.0)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 130, (process.returncode, out, err)
    assert "Traceback" not in err and "Traceback" not in out, err
    record = json.loads((tmp_path / "out" / "report.json").read_text())
    assert record["verdict"] == "interrupted (partial report)"
    assert record["interrupted"].startswith("interrupted by SIGINT (Ctrl-C) after")
    assert "partial report: interrupted by SIGINT" in out and "exit 130" in out
    assert not (tmp_path / "out" / ".specref-writing").exists()


SPAWNS = """
import pathlib, subprocess
from specref.batched import verify as _verify


def verify(target_probs, draft_probs, draft_tokens, generator):
    if not pathlib.Path("child.pid").exists():
        child = subprocess.Popen(["sleep", "300"])
        pathlib.Path("child.pid").write_text(str(child.pid))
    return _verify(target_probs, draft_probs, draft_tokens, generator)
"""


def test_the_subprocesses_a_verifier_starts_end_with_its_worker(tmp_path):
    (tmp_path / "spawns.py").write_text(SPAWNS)
    command = [sys.executable, "-m", "specref.cli", "conform", "spawns.py:verify", "--rows", "300", "--scenarios",
               "cf_dense_g4", "--no-plots", "--report", "out"]  # fmt: skip
    result = subprocess.run(command, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    pid = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        stat = Path(f"/proc/{pid}/stat").read_text() if Path(f"/proc/{pid}/stat").exists() else ""
        if stat and stat[stat.rindex(")") + 2] == "Z":  # a zombie is dead, waiting for its reaper
            break
        time.sleep(0.1)
    alive = Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    if alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive, f"the verifier's subprocess {pid} outlived the run"
