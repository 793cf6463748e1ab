"""The arguments a user can get wrong, each checked by one function, for the CLI, `specref.conformance.run` and the
pytest plugin alike: a bad value raises BadArgument (a UsageError, exit 2 on the command line) naming the argument
and its value. Standard library only, so that every check answers before torch is imported.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .errors import BadArgument

#: The fewest rows a scenario can be given. A fixed N is honoured exactly, however small: a scenario's first call
#: (the probe pass, chunk 0) has at most N rows. A small N buys little power, and the report states how little.
MIN_ROWS = 1


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def rows(value, name: str = "rows"):
    """None, an int >= MIN_ROWS, or a dict {scenario name: such an int}."""
    if value is None:
        return None
    if isinstance(value, dict):
        for scenario, n in value.items():
            rows(n, f"{name}[{scenario!r}]")
        return value
    if not _is_int(value) or value < MIN_ROWS:
        raise BadArgument(f"{name}={value!r} must be an integer >= {MIN_ROWS} (rows per scenario; without it the "
                          "run is sized by its time budget)")  # fmt: skip
    return value


def budget_seconds(value, name: str = "budget_seconds"):
    """None or a finite number of seconds > 0."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise BadArgument(f"{name}={value!r} must be > 0 (a finite number of seconds)")
    return float(value)


def alpha(value, name: str = "alpha"):
    """A family-wise false-alarm probability in (0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise BadArgument(f"{name}={value!r} must lie in (0, 1)")
    return float(value)


def tv(value, name: str = "tv"):
    """None or a total-variation distance in (0, 1): the deviation every law check must detect (power 0.999)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise BadArgument(f"{name}={value!r} must lie in (0, 1) (the TV distance every law check must detect)")
    return float(value)


def tv_or_rows(tv_value, rows_value, names: tuple[str, str] = ("tv", "rows")) -> None:
    """tv and rows both size the run: at most one of them is given."""
    if tv_value is not None and rows_value is not None:
        raise BadArgument(f"{names[0]}={tv_value!r} and {names[1]}={rows_value!r}: give one ({names[0]} sizes the "
                          "rows itself)")  # fmt: skip


def resolution(value, name: str = "resolution"):
    """A TV distance in (0, 1]: checks that cannot detect it are uninformative, not passed."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise BadArgument(f"{name}={value!r} must lie in (0, 1] (the largest detectable TV a pass may have)")
    return float(value)


def seed(value, name: str = "seed"):
    """An integer >= 0."""
    if not _is_int(value) or value < 0:
        raise BadArgument(f"{name}={value!r} must be an integer >= 0")
    return value


def scenarios(value, name: str = "scenarios"):
    """None, a comma-separated string or a list of names (or scenario objects): a list, names stripped."""
    if value is None:
        return None
    if isinstance(value, str):
        items = [part.strip() for part in value.split(",")]
    elif isinstance(value, Sequence) or isinstance(value, (set, frozenset)):
        items = [part.strip() if isinstance(part, str) else part for part in value]
    else:
        raise BadArgument(f"{name}={value!r} must be a list of scenario names or a comma-separated string")
    items = [part for part in items if not (isinstance(part, str) and not part)]
    if not items:
        raise BadArgument(f"{name}={value!r} names no scenario")
    return items


def shard(value, name: str = "shard"):
    """None, "K/N" or (K, N) with integers 0 <= K < N: (K, N)."""
    if value is None:
        return None
    try:
        parts = value.split("/") if isinstance(value, str) else list(value)
        index, count = (int(x) for x in parts)
    except (TypeError, ValueError):
        raise BadArgument(f"{name}={value!r} must be K/N or (K, N) with integers 0 <= K < N") from None
    if not 0 <= index < count:
        raise BadArgument(f"{name}={value!r} must have 0 <= K < N")
    return index, count


__all__ = [
    "MIN_ROWS",
    "alpha",
    "budget_seconds",
    "resolution",
    "rows",
    "scenarios",
    "seed",
    "shard",
    "tv",
    "tv_or_rows",
]
