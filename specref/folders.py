"""A report folder, written by one run at a time, holding only the files of its latest report.

    with writing(out_dir, "--report"):      # a second run into out_dir is refused at its start, naming this one
        ... run, write_report(...)

The lock is a file in the folder (LOCK) holding the writer's pid, host and command; a lock whose process is gone
(killed, crashed) is taken over. write_report (conformance/report/render.py) writes each file atomically, then
removes the files the folder's earlier report listed that this one does not write (the PNGs before a --no-plots
rerun). Standard library only: the CLI takes the lock before torch loads.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from pathlib import Path

from .errors import UsageError

LOCK = ".specref-writing"


def _alive(holder: dict) -> bool:
    if holder.get("host") != socket.gethostname():
        return True  # another machine's run: it cannot be checked from here, so it holds
    try:
        os.kill(int(holder["pid"]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, KeyError, TypeError, ValueError):
        return True
    return True


def _holder(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


@contextlib.contextmanager
def writing(folder: str, flag: str = "--report"):
    """Hold folder's lock for the block; UsageError naming the holder when another live run holds it."""
    path = Path(folder) / LOCK
    for _ in range(3):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            holder = _holder(path)
            if holder and _alive(holder):
                since = time.strftime("%H:%M:%S", time.localtime(holder.get("since", 0)))
                raise UsageError(f"{flag}: {folder!r} is being written by another specref run (pid {holder.get('pid')} "
                                 f"on {holder.get('host')}, since {since}: {holder.get('command')}); wait for it or "
                                 f"give another {flag}") from None  # fmt: skip
            with contextlib.suppress(FileNotFoundError):
                path.unlink()  # the lock of a run that is gone (or one being written this instant: retry)
            time.sleep(0.05)
            continue
        with os.fdopen(fd, "w") as lock:
            json.dump({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(),
                       "command": " ".join(sys.argv)}, lock)  # fmt: skip
        break
    else:
        raise UsageError(f"{flag}: cannot take the lock {str(path)!r}")
    try:
        yield
    finally:
        if _holder(path).get("pid") == os.getpid():
            with contextlib.suppress(FileNotFoundError):
                path.unlink()


def replace_files(out: Path, new: dict[str, str]) -> None:
    """Write {name: text} into out, each atomically (a reader never sees half a file)."""
    for name, text in new.items():
        tmp = out / f".{name}.{os.getpid()}.tmp"
        tmp.write_text(text)
        os.replace(tmp, out / name)


def remove_stale(out: Path, earlier: list[str], kept: set[str]) -> None:
    """Remove the files an earlier report in out listed that this report does not write (plain names only)."""
    for name in earlier:
        if name not in kept and name == Path(name).name and not name.startswith("."):
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                (out / name).unlink()


def earlier_files(out: Path) -> list[str]:
    """The files the report already in out lists (report.json's `files`), or []."""
    try:
        files = json.loads((out / "report.json").read_text()).get("files", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [f for f in files if isinstance(f, str)]


__all__ = ["LOCK", "earlier_files", "remove_stale", "replace_files", "writing"]
