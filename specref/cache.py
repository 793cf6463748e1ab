"""specref's cache on disk: one folder per kind of thing kept across runs (compiled kernels, exact tables, exact
laws), under $SPECREF_CACHE (default ~/.cache/specref). Standard library only.

    directory = cache.folder("stats")      # created; None when it cannot be (no home directory, read-only disk)
"""

from __future__ import annotations

import os
from pathlib import Path


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
