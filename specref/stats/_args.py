"""Argument checks for the stats package. Each error is a ValueError naming the argument and its value."""

from __future__ import annotations

import math
from numbers import Integral, Real

import numpy as np

#: expected_probs must sum to 1 within this absolute tolerance (the same as specref.validation).
SUM_TOLERANCE = 1e-6


def check_level(name: str, value: object) -> float:
    """A probability level such as alpha or beta: a real number strictly inside (0, 1)."""
    if isinstance(value, bool) or not isinstance(value, Real) or not 0 < float(value) < 1:
        raise ValueError(f"{name}={value!r} must be a real number strictly between 0 and 1")
    return float(value)


def check_positive(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name}={value!r} must be a finite real number > 0")
    return float(value)


def check_rate(name: str, value: object) -> float:
    """A rate such as p0: a real number in [0, 1]."""
    if isinstance(value, bool) or not isinstance(value, Real) or not 0 <= float(value) <= 1:
        raise ValueError(f"{name}={value!r} must be a real number in [0, 1]")
    return float(value)


def check_tv(name: str, value: object) -> float:
    """A distance such as a TV or a rate difference: a real number in (0, 1]."""
    if isinstance(value, bool) or not isinstance(value, Real) or not 0 < float(value) <= 1:
        raise ValueError(f"{name}={value!r} must be a real number in (0, 1]")
    return float(value)


def check_count(name: str, value: object, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < minimum:
        raise ValueError(f"{name}={value!r} must be an integer >= {minimum}")
    return int(value)


def check_df(df: object) -> int:
    return check_count("df", df, minimum=1)


def check_counts(name: str, counts: object) -> np.ndarray:
    """A 1-D array of non-negative integer counts (integer-valued floats are accepted)."""
    array = np.asarray(counts)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array of counts; got shape {array.shape}")
    if array.dtype.kind not in "iuf" or array.dtype == np.bool_:
        raise ValueError(f"{name} has dtype {array.dtype}; counts must be integers")
    if array.dtype.kind == "f":
        if not np.all(np.isfinite(array)) or np.any(array != np.round(array)):
            bad = int(np.flatnonzero(~np.isfinite(array) | (array != np.round(array)))[0])
            raise ValueError(f"{name}[{bad}]={array[bad].item()!r} is not an integer count")
    if np.any(array < 0):
        bad = int(np.flatnonzero(array < 0)[0])
        raise ValueError(f"{name}[{bad}]={array[bad].item()!r}: counts must be >= 0")
    return array.astype(np.int64)


def check_probs(name: str, probs: object, size: int | None = None, size_name: str = "") -> np.ndarray:
    """A 1-D probability vector: finite, >= 0, summing to 1 within SUM_TOLERANCE. Returned renormalised."""
    array = np.asarray(probs, dtype=np.float64)
    if array.ndim != 1 or array.size == 0:
        raise ValueError(f"{name} must be a non-empty 1-D array of probabilities; got shape {array.shape}")
    if size is not None and array.size != size:
        raise ValueError(f"{name} has {array.size} entries but {size_name} has {size}; shapes must match")
    if not np.all(np.isfinite(array)):
        bad = int(np.flatnonzero(~np.isfinite(array))[0])
        raise ValueError(f"{name}[{bad}]={array[bad].item()!r}: probabilities must be finite")
    if np.any(array < 0):
        bad = int(np.flatnonzero(array < 0)[0])
        raise ValueError(f"{name}[{bad}]={array[bad].item()!r}: probabilities must be >= 0")
    total = float(array.sum())
    if abs(total - 1.0) > SUM_TOLERANCE:
        raise ValueError(f"{name} sums to {total!r}; probabilities must sum to 1 within {SUM_TOLERANCE}")
    return array / total
