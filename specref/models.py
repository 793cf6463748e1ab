"""Toy language models: callables that map a context (tuple of token ids) to a next-token distribution.

Every model here works with exact Fractions or with floats, so the same model feeds `specref.exact` (proof)
and the samplers (statistics). All are deterministic functions of their arguments; no global RNG is touched.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping, Sequence
from fractions import Fraction

import numpy as np

from .validation import check_distribution


class ContextFree:
    """The same distribution after every context."""

    validated = True  # rows are checked once, at construction

    def __init__(self, probs: Sequence):
        check_distribution("probs", probs)
        self.probs = tuple(probs)
        self.vocab_size = len(self.probs)

    def __call__(self, context: Sequence[int]) -> tuple:
        return self.probs

    def __repr__(self) -> str:
        return f"ContextFree({list(self.probs)!r})"


class MarkovTable:
    """An order-k Markov model: the distribution depends on the last k tokens of the context.

    `rows` maps a tuple of the last k tokens to a distribution. Contexts shorter than k are looked up by their
    whole tuple (so `()` names the start-of-sequence row). Missing keys fall back to `default`.
    """

    def __init__(self, order: int, rows: Mapping[tuple[int, ...], Sequence], default: Sequence | None = None):
        if isinstance(order, bool) or not isinstance(order, int) or order < 0:
            raise ValueError(f"order={order!r}: the Markov order must be an integer >= 0")
        if not rows and default is None:
            raise ValueError("rows is empty and default is None: the model has no distribution at all")
        self.order = order
        self.rows = {tuple(key): tuple(row) for key, row in rows.items()}
        self.default = None if default is None else tuple(default)
        vocab_sizes = {len(row) for row in self.rows.values()} | ({len(default)} if default is not None else set())
        if len(vocab_sizes) != 1:
            raise ValueError(f"rows have different vocab sizes {sorted(vocab_sizes)}; all rows must share one")
        self.vocab_size = vocab_sizes.pop()
        for key, row in self.rows.items():
            check_distribution(f"rows[{key!r}]", row)
            if len(key) > order:
                raise ValueError(f"rows key {key!r} is longer than order={order}")
        if self.default is not None:
            check_distribution("default", self.default)

    def __call__(self, context: Sequence[int]) -> tuple:
        key = tuple(context)[-self.order :] if self.order else ()
        row = self.rows.get(key, self.default)
        if row is None:
            raise ValueError(f"context suffix {key!r} has no row and the model has no default")
        return row


class HashedContext:
    """A deterministic context-dependent model: each context hashes (zlib.crc32) to its own distribution.

    Weights are integers in [0, max_weight], so rows are exact rationals; `zero_fraction` of the tokens get
    weight 0 (at least one token always keeps positive weight). `exact=True` returns Fractions, else floats.
    """

    validated = True  # rows are normalised integer weights by construction

    def __init__(
        self, vocab_size: int, seed: int = 0, *, max_weight: int = 8, zero_fraction: float = 0.3, exact: bool = True
    ):
        if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
            raise ValueError(f"vocab_size={vocab_size!r}: must be an integer >= 1")
        if not 0 <= zero_fraction < 1:
            raise ValueError(f"zero_fraction={zero_fraction!r}: must lie in [0, 1)")
        if max_weight < 1:
            raise ValueError(f"max_weight={max_weight!r}: must be >= 1")
        self.vocab_size, self.seed = vocab_size, seed
        self.max_weight, self.zero_fraction, self.exact = max_weight, zero_fraction, exact
        self._cache: dict[tuple[int, ...], tuple] = {}

    def weights(self, context: Sequence[int]) -> np.ndarray:
        key = f"{self.seed}:{','.join(map(str, context))}".encode()
        rng = np.random.Generator(np.random.PCG64(zlib.crc32(key)))
        w = rng.integers(1, self.max_weight + 1, size=self.vocab_size)
        w[rng.random(self.vocab_size) < self.zero_fraction] = 0
        if not w.any():
            w[rng.integers(self.vocab_size)] = 1
        return w

    def __call__(self, context: Sequence[int]) -> tuple:
        context = tuple(context)
        if context not in self._cache:
            w = [int(x) for x in self.weights(context)]
            total = sum(w)
            self._cache[context] = tuple(Fraction(x, total) if self.exact else x / total for x in w)
        return self._cache[context]

    def __repr__(self) -> str:
        return (
            f"HashedContext({self.vocab_size}, seed={self.seed}, max_weight={self.max_weight}, "
            f"zero_fraction={self.zero_fraction}, exact={self.exact})"
        )


def as_floats(model):
    """Wrap a model so it returns float rows (for samplers fed by an exact model)."""
    return lambda context: tuple(float(x) for x in model(context))
