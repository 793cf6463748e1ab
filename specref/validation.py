"""Input checks shared by every engine. Each error names the argument and the offending value."""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from numbers import Real

#: Float rows must sum to 1 within this absolute tolerance; Fraction rows must sum to exactly 1.
SUM_TOLERANCE = 1e-6


def check_gamma(gamma: object) -> int:
    if isinstance(gamma, bool) or not isinstance(gamma, int) or gamma < 1:
        raise ValueError(f"gamma={gamma!r}: the number of draft tokens must be an integer >= 1")
    return gamma


def check_distribution(name: str, probs: Sequence, vocab_size: int | None = None) -> None:
    """A probability row: finite, non-negative entries that sum to 1 (exactly for Fractions)."""
    if vocab_size is not None and len(probs) != vocab_size:
        raise ValueError(f"{name} has {len(probs)} entries; expected vocab size {vocab_size}")
    if len(probs) == 0:
        raise ValueError(f"{name} is empty; a distribution needs at least one token")
    if _plainly_valid(probs):
        return
    for token, value in enumerate(probs):
        if not isinstance(value, Real) or isinstance(value, bool):
            raise ValueError(f"{name}[{token}]={value!r} is not a real number")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{name}[{token}]={value!r}: probabilities must be finite")
        if value < 0:
            raise ValueError(f"{name}[{token}]={value!r}: probabilities must be >= 0")
    total = sum(probs)
    if all(isinstance(v, (int, Fraction)) for v in probs):
        if total != 1:
            raise ValueError(f"{name} sums to {total}; exact rows must sum to exactly 1")
    elif abs(total - 1) > SUM_TOLERANCE:
        raise ValueError(f"{name} sums to {float(total)!r}; rows must sum to 1 within {SUM_TOLERANCE}")


#: Types whose values are real numbers without an ABC check (bool is its own type, so it is not among them).
_PLAIN_REALS = frozenset({float, int, Fraction})


def _plainly_valid(probs: Sequence) -> bool:
    """The checks below at C speed, for rows of plain floats, ints and Fractions (the reference engine checks every
    row it is given). False sends the row through the entry-by-entry checks, which name what is wrong. A finite float
    sum implies finite entries: an inf or a nan makes the sum inf or nan."""
    kinds = set(map(type, probs))
    if not kinds <= _PLAIN_REALS or min(probs) < 0:
        return False
    total = sum(probs)
    if float in kinds:
        return math.isfinite(total) and abs(total - 1) <= SUM_TOLERANCE
    return total == 1


def check_token(name: str, token: object, vocab_size: int) -> int:
    if isinstance(token, bool) or not isinstance(token, int):
        raise ValueError(f"{name}={token!r} is not an integer token id")
    if not 0 <= token < vocab_size:
        raise ValueError(f"{name}={token} is out of range for vocab size {vocab_size}")
    return token


def check_context(name: str, context: Sequence, vocab_size: int) -> tuple[int, ...]:
    context = tuple(context)
    for i, token in enumerate(context):
        check_token(f"{name}[{i}]", token, vocab_size)
    return context
