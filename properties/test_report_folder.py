"""Reports are protected (issue 34): one run at a time writes a report folder (a second is refused at its start,
naming the first), a lock left by a run that is gone is taken over, each file is written atomically, and the files
of an earlier report that this one does not write (the PNGs before a --no-plots rerun) are removed."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from specref.cli import main
from specref.folders import LOCK, writing

pytestmark = pytest.mark.exact

REPO = Path(__file__).resolve().parents[1]
BROKEN = f"{REPO / 'properties' / 'external_impls' / 'broken.py'}:ids_out_of_range"  # a certain verdict, exit 1


def conform(folder: Path) -> int:
    return main(["conform", BROKEN, "--rows", "256", "--scenarios", "cf_dense_g4", "--no-plots", "--report",
                 str(folder)])  # fmt: skip


def test_a_second_run_into_a_folder_being_written_is_refused_naming_the_first(tmp_path, capsys):
    folder = tmp_path / "r"
    folder.mkdir()
    with writing(str(folder)):
        assert conform(folder) == 2
        err = capsys.readouterr().err
        assert f"is being written by another specref run (pid {os.getpid()}" in err, err
        assert not (folder / "report.json").exists()
    assert not (folder / LOCK).exists()  # released
    assert conform(folder) == 1 and (folder / "report.json").is_file() and not (folder / LOCK).exists()


def test_the_lock_of_a_run_that_is_gone_is_taken_over(tmp_path):
    folder = tmp_path / "r"
    folder.mkdir()
    dead = os.fork()
    if dead == 0:
        os._exit(0)
    os.waitpid(dead, 0)
    (folder / LOCK).write_text(json.dumps({"pid": dead, "host": socket.gethostname(), "since": 0, "command": "x"}))
    assert conform(folder) == 1 and (folder / "report.json").is_file() and not (folder / LOCK).exists()


def test_a_rerun_removes_the_files_of_the_earlier_report_it_does_not_write(tmp_path):
    folder = tmp_path / "r"
    folder.mkdir()
    earlier = ["first_token_law.png", "report.json", "report.md"]
    (folder / "report.json").write_text(json.dumps({"files": earlier}))
    (folder / "first_token_law.png").write_bytes(b"an earlier run's plot")
    (folder / "notes.txt").write_text("the user's own file, listed by no report")
    assert conform(folder) == 1
    assert not (folder / "first_token_law.png").exists()
    assert (folder / "notes.txt").is_file()
    assert json.loads((folder / "report.json").read_text())["files"] == ["report.json", "report.md"]
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]
