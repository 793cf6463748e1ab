"""Exact tables kept on disk across processes: computed once per machine, bit-identical to computing them again.

    stored = tables.load("pearson-tail", (e, df))     # None when absent, unreadable or computed by other code
    tables.save("pearson-tail", (e, df), array)       # atomically (a temporary file, then os.replace)

A table is keyed by its name, its arguments and a fingerprint of what computes it: the source of the module that
asks (stats/size.py: a changed algorithm or constant is a new key), numpy's and scipy's versions (scipy's pmf may
change); saving a table removes the same key's tables of other code, so the folder holds one version of each (about
30 MB for a default run's tables). Files live under $SPECREF_CACHE/stats (default ~/.cache/specref/stats); without
a writable folder tables are computed every time. SPECREF_TABLES=0 turns the disk off (each process computes its own).
"""

from __future__ import annotations

import hashlib
import inspect
import sys
from functools import lru_cache
from pathlib import Path

import numpy as np

from .. import cache

ENV = cache.TABLES


@lru_cache(maxsize=1)
def folder() -> Path | None:
    return cache.table_folder("stats")


@lru_cache(maxsize=8)
def _fingerprint(module: str) -> str:
    import scipy

    source = inspect.getsource(sys.modules[module])
    return hashlib.sha256(f"{source}|{np.__version__}|{scipy.__version__}".encode()).hexdigest()[:16]


def _path(name: str, key: tuple, module: str) -> Path | None:
    directory = folder()
    if directory is None:
        return None
    return directory / f"{name}-{'-'.join(map(str, key))}-{_fingerprint(module)}.npy"


def load(name: str, key: tuple, module: str = "specref.stats.size") -> np.ndarray | None:
    path = _path(name, key, module)
    if path is None or not path.exists():
        return None
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError):  # a partial or foreign file: computed again (and rewritten)
        return None


def save(name: str, key: tuple, array: np.ndarray, module: str = "specref.stats.size") -> None:
    path = _path(name, key, module)
    if path is None:
        return
    contiguous = np.ascontiguousarray(array)
    stale = f"{path.name.rsplit('-', 1)[0]}-*.npy"  # the key's tables of other code
    cache.write(path, lambda handle: np.save(handle, contiguous, allow_pickle=False), stale)


__all__ = ["ENV", "folder", "load", "save"]
