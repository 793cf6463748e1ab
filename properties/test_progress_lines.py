"""Progress a CI log can read (issue 34): without a terminal, `specref conform` prints one line per scenario on
stderr, with its rows, the time elapsed and the expected end."""

from __future__ import annotations

import fcntl
import os
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path
from types import SimpleNamespace

import pytest

from specref.cli import main
from specref.conformance.engine.passes import Calls, Sizing, _progress
from specref.conformance.engine.progress import ProgressBar

pytestmark = pytest.mark.exact

REPO = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def test_without_a_terminal_one_line_per_scenario(tmp_path, capsys):
    code = main(["conform", "batched", "--rows", "300", "--scenarios", "cf_dense_g4,markov_g1", "--no-plots",
                 "--report", str(tmp_path / "r")])  # fmt: skip
    assert code == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("specref: batched: ")]
    assert len(lines) == 2, lines
    for line, scenario in zip(lines, ["cf_dense_g4", "markov_g1"]):
        assert re.fullmatch(rf"specref: batched: {scenario}: 300 rows \(\d+%\), \d+ s elapsed, expected end in ~\d+ s",
                            line), line  # fmt: skip


def test_the_expected_end_is_the_budget_left_or_the_rate_so_far():
    assert ProgressBar("x", 300.0).line("a: 5 rows", 0.5, 100.0).endswith("expected end in ~200 s")
    assert ProgressBar("x", None).line("a: 5 rows", 0.25, 30.0).endswith("expected end in ~90 s")


def test_a_fixed_n_run_reports_its_share_done_by_expected_seconds():
    """A --tv run's N differ by 1,000x between scenarios: the share done after each is its expected seconds' (rows
    left after the warm-up x seconds a row), not its count; a run without fixed N keeps the count."""
    a, b, c = (SimpleNamespace(name=n, joint=False) for n in "abc")
    calls = Calls({}, {}, warmup={"a": 1e-3, "b": 1e-3, "c": 2e-3}, first_rows={"a": 100, "b": 100, "c": 100})
    assert _progress([a, b, c], calls, Sizing(0.0, rows={"a": 100_100, "b": 1_100, "c": 50_100})) == [
        pytest.approx(100 / 201), pytest.approx(101 / 201), 1.0]  # fmt: skip
    assert _progress([a, b, c], calls, Sizing(60.0)) == [1 / 3, 2 / 3, 1.0]


def test_on_a_terminal_the_bar_is_shown_before_torch_loads(tmp_path):
    """Was: the bar appeared once the run started, 8-10 s in (torch, the subject, the scenarios first). The order of
    the bar's first frame and torch's first imported module on one terminal (-X importtime writes a line as each
    module is imported) holds on any machine, unlike a time."""
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))  # a terminal has a size
    command = [sys.executable, "-X", "importtime", "-m", "specref.cli", "conform", "batched", "--rows", "200",
               "--scenarios", "cf_dense_g4", "--no-plots", "--report", str(tmp_path / "r")]  # fmt: skip
    process = subprocess.Popen(command, stdin=follower, stdout=follower, stderr=follower, cwd=tmp_path, env=ENV)
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the command is done
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    assert process.wait(timeout=120) == 0, seen[-2000:]
    text = seen.decode(errors="replace")
    bar = text.find("%|")
    torch_line = re.search(r"\|\s+torch(\.\S+)?\r?$", text, re.MULTILINE)
    assert bar >= 0 and torch_line is not None, text[-2000:]
    assert bar < torch_line.start(), text[max(0, bar - 500) : bar + 200]
