"""`specref conform ...` run by specref.cli.main in the test's own process: the same parsing, run, report files and
exit code as the command, without a new interpreter's imports (about 5 s of CPU each here: torch 2.3 s, scipy.stats
1.2 s). Tests of what only a process shows (signals, os._exit, what is imported where, start-up) start the command."""

from __future__ import annotations

import os
from pathlib import Path

from specref.cli import main


def conform(*args: str, cwd: Path, capsys) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `specref conform *args` run from cwd."""
    here = os.getcwd()
    os.chdir(cwd)
    try:
        code = main(["conform", *args])
    finally:
        os.chdir(here)
    out, err = capsys.readouterr()
    return code, out, err
