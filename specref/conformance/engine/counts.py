"""A tally's counts as JSON and back: what a shard's report.json carries and `shards.merge` sums.

Every count behind a check is a sum over calls, so summing the shards' counts gives one run's. A tally carries
exactly the count arrays its contract's check kinds declare (registry.counters) plus the ones it names in
`EXTRA_ARRAYS` (a picture's); an array it holds that neither declares is an error at encoding, never silently
dropped at merge. Arrays travel sparse: vocabularies reach 151,936.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from . import registry


def encode_array(a: np.ndarray) -> dict:
    """Sparse: the flat indices of the non-zero counts and the counts."""
    flat = np.asarray(a).ravel()
    index = np.flatnonzero(flat)
    return {"shape": list(a.shape), "index": index.tolist(), "count": flat[index].tolist()}


def decode_array(record: dict) -> np.ndarray:
    out = np.zeros(int(np.prod(record["shape"])), dtype=np.int64)
    out[np.asarray(record["index"], dtype=np.int64)] = record["count"]
    return out.reshape(record["shape"])


def chunk_of(where: dict | None) -> float:
    """The chunk a call's provenance names (inf for run-level calls): merge keeps the earliest example."""
    return float("inf") if not where or not isinstance(where.get("chunk"), int) else where["chunk"]


class Counts:
    """What a tally (chain/tally.Tally, tree.checks.TreeTally) shares: rows, seconds, T0 violations and their first
    examples, and the count arrays of its contract's kinds. `counts()` encodes them; `absorb(part)` adds a shard's."""

    CONTRACT: ClassVar[str] = registry.CHAIN
    EXTRA_ARRAYS: ClassVar[tuple[str, ...]] = ()  # arrays carried that no check kind declares (a picture's)

    @classmethod
    def arrays(cls) -> tuple[str, ...]:
        return registry.counters(cls.CONTRACT) + cls.EXTRA_ARRAYS

    def counts(self) -> dict:
        arrays = self.arrays()
        undeclared = sorted(k for k, v in vars(self).items() if isinstance(v, np.ndarray) and k not in arrays)
        if undeclared:
            raise ValueError(f"{type(self).__name__} arrays {undeclared} are declared by no check kind "
                             "(engine/registry.py) nor EXTRA_ARRAYS: a shard would drop them")  # fmt: skip
        out = {"rows": self.rows, "seconds": self.seconds, "violations": self.violations, "examples": self.examples}
        for name in arrays:
            value = getattr(self, name)
            out[name] = None if value is None else self.encode(name, value)
        return out

    def absorb(self, part: dict) -> None:
        """Add one shard's counts (as `counts()` encoded them)."""
        self.rows += part["rows"]
        self.seconds += part["seconds"]
        for name in self.arrays():  # None: a counter this scenario never fills (pairs, joint)
            if part.get(name) is not None:
                self.add_decoded(name, self.decode(name, part[name]))
        for check, count in part["violations"].items():
            self.violations[check] += count
        for check, example in part["examples"].items():  # the first in chunk order, as one run meets them
            if check not in self.examples or chunk_of(example) < chunk_of(self.examples[check]):
                self.examples[check] = example

    # an array's encoding; a tally whose counter is not an array (the tree's `last`) overrides these

    def encode(self, name: str, value):
        return encode_array(value)

    def decode(self, name: str, record):
        return decode_array(record)

    def add_decoded(self, name: str, value) -> None:
        current = getattr(self, name)
        setattr(self, name, value if current is None else current + value)
