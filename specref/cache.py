"""specref's cache on disk: one folder per kind of thing kept across runs (compiled kernels, tiny models, exact
tables, exact laws), under $SPECREF_CACHE (default ~/.cache/specref). Standard library only.

    directory = cache.folder("kernels")         # created; None when it cannot be (no home directory, read-only disk)
    directory = cache.table_folder("stats")     # the same, and None when SPECREF_TABLES=0 (exact tables and laws)
    cache.write(path, write_to, stale="name-*.npy")   # atomically; then the folder's other files matching stale go
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

#: SPECREF_TABLES=0 keeps exact tables (stats/tables.py) and exact laws (exact_store.py) off the disk.
TABLES = "SPECREF_TABLES"


def root() -> Path:
    """$SPECREF_CACHE, else ~/.cache/specref (RuntimeError when there is no home directory)."""
    configured = os.environ.get("SPECREF_CACHE")
    return Path(configured) if configured else Path.home() / ".cache" / "specref"


def folder(name: str) -> Path | None:
    """root()/name, created; None when it cannot be created."""
    try:
        directory = root() / name
        directory.mkdir(parents=True, exist_ok=True)
        return directory
    except (OSError, RuntimeError):  # RuntimeError: no home directory
        return None


def table_folder(name: str) -> Path | None:
    """folder(name), or None when SPECREF_TABLES=0."""
    return None if os.environ.get(TABLES, "1") == "0" else folder(name)


def write(path: Path, write_to: Callable[[BinaryIO], None], stale: str | None = None) -> None:
    """Write path atomically (write_to fills a temporary file in its folder, then os.replace), so that concurrent
    processes never read a partial file; then remove the folder's other files matching the glob stale (the same
    key of older code). A disk error leaves the cache as it was: what is not saved is computed again."""
    with contextlib.suppress(OSError):
        fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                write_to(handle)
            os.replace(temporary, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
        for other in path.parent.glob(stale) if stale else ():
            if other != path:
                with contextlib.suppress(OSError):
                    other.unlink()
