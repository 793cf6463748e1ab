"""The rows a verifier is given: probabilities rounded to its dtype, each row summing to exactly 1.

A verifier that declares `dtype=torch.bfloat16` never sees the float64 laws of a scenario, only their rounding, so
the law it must keep is the law of the rounded rows. Rounding alone leaves rows that sum to 1 only up to a few ulps,
and such a row has no single reading: `min(1, p/q)` on unnormalised rows and the same rule on renormalised rows give
laws that differ by about |sum(p) - sum(q)|, about 1e-3 in bf16. So the harness removes the ambiguity at the source:

  1. round every entry to the dtype (round to nearest, as `tensor.to(dtype)` does);
  2. move entries by whole ulps, largest ulps first, never touching a zero nor making one, until the row's exact
     sum (computed in integer arithmetic, not in floating point) is exactly 1.

Every row a verifier receives is then a probability vector exactly representable in its dtype, and every reading
(normalised or not, any accumulation order done exactly) gives the same law; the expected laws of the harness are
computed from these rows. Supports can only shrink: an entry below the dtype's smallest subnormal rounds to 0, and
that token then has probability 0 in the law the verifier is held to. Step 2 moves the built-in scenarios' rows by
at most one rounding unit of their largest entries; should it ever fail, `as_given` raises rather than guess.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import torch

#: significand bits (with the implicit one) and the smallest positive subnormal exponent of each dtype
_FORMATS = {
    torch.float64: (53, -1074),
    torch.float32: (24, -149),
    torch.bfloat16: (8, -133),
    torch.float16: (11, -24),
}
_MAX_STEPS = 100_000


def _format(dtype: torch.dtype) -> tuple[int, int]:
    if dtype not in _FORMATS:
        raise ValueError(f"dtype={dtype!r} is not a floating dtype the harness can send; use one of {list(_FORMATS)}")
    return _FORMATS[dtype]


def round_to(values: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """values rounded to dtype (round to nearest even), returned as float64."""
    _format(dtype)
    return torch.from_numpy(np.ascontiguousarray(values, dtype=np.float64)).to(dtype).double().numpy()


def ulp(values: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """The spacing of dtype at each value, upwards (values >= 0): 2^(e - bits) for values in [2^(e-1), 2^e)."""
    bits, tiny = _format(dtype)
    _, exponent = np.frexp(values)
    return np.maximum(np.ldexp(1.0, exponent - bits), np.ldexp(1.0, tiny))


def exact_sum(row: np.ndarray) -> Fraction:
    """The exact sum of a float64 row (no rounding): integer significands shifted to a common exponent."""
    positive = row[row != 0]
    if positive.size == 0:
        return Fraction(0)
    significand, exponent = np.frexp(positive)
    mantissas = np.ldexp(significand, 53).astype(np.int64)  # exact: float64 has 53 significand bits
    shifts = exponent - 53
    low = int(shifts.min())
    total = sum(int(m) << int(s - low) for m, s in zip(mantissas, shifts))
    return Fraction(total) * Fraction(2) ** low


def _fix_sum(row: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """Move entries of a dtype-exact row by whole ulps until it sums to exactly 1 (see the module docstring)."""
    row = row.copy()
    deficit = 1 - exact_sum(row)
    for _ in range(_MAX_STEPS):
        if deficit == 0:
            return row
        steps = ulp(row, dtype)
        if deficit < 0:  # moving down: use the spacing below, which halves at a power of two
            steps = np.where(np.frexp(row)[0] == 0.5, np.maximum(steps / 2, np.ldexp(1.0, _format(dtype)[1])), steps)
        movable = row > 0
        if deficit < 0:
            movable &= row - steps > 0
        if not movable.any():
            break
        fits = movable & (steps <= float(abs(deficit)))
        for size in sorted(set(steps[fits].tolist()), reverse=True):  # float(deficit) may round up: check exactly
            if Fraction(size) <= abs(deficit):
                i = int(np.flatnonzero(fits & (steps == size))[0])  # the largest step that does not overshoot
                break
        else:  # overshoot by the smallest step; the remainder, smaller than it, has the other sign
            i = int(np.argmin(np.where(movable, steps, np.inf)))
        step = Fraction(float(steps[i]))
        _, exponent = np.frexp(row[i])
        # stay inside entry i's binade so that its ulp is the same for every step taken at once
        room = (np.ldexp(1.0, int(exponent)) - row[i]) if deficit > 0 else (row[i] - np.ldexp(0.5, int(exponent)))
        count = max(1, min(int(abs(deficit) / step), int(room / float(step))))
        moved = row[i] + (count if deficit > 0 else -count) * float(step)
        if round_to(np.array([moved]), dtype)[0] != moved or moved <= 0:
            break
        deficit -= Fraction(float(moved)) - Fraction(float(row[i]))  # exact: both are floats
        row[i] = moved
    if deficit != 0:
        raise ValueError(f"cannot make a row sum to exactly 1 in {dtype} (left {float(deficit):.3g}): {row.tolist()}")
    return row


def as_given(rows: np.ndarray, dtype: torch.dtype) -> np.ndarray:
    """rows [S, V] float64 probabilities -> the rows a `dtype` verifier is given: dtype-exact, each summing to 1."""
    rows = np.asarray(rows, dtype=np.float64)
    rounded = round_to(rows, dtype)
    return np.stack([row if exact_sum(row) == 1 else _fix_sum(row, dtype) for row in rounded])


def describe(dtype: torch.dtype) -> str:
    """One line for reports: how the rows were made for this dtype."""
    return (
        f"rows rounded to {str(dtype).replace('torch.', '')} and moved by whole ulps so that each sums to exactly 1; "
        "every expected law is computed from these rows, so normalised and unnormalised readings coincide"
    )
