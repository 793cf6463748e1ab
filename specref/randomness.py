"""The reference engine's source of randomness: two questions, asked through one small interface.

    accept(ratio)         -> True with probability min(1, ratio)
    categorical(weights)  -> index j with probability weights[j] / sum(weights)

The same engine code is sampled (`Sampled`, a seeded numpy PCG64), replayed against injected uniforms
(`Injected`, the coupling convention shared with the batched engine) or enumerated exactly (`specref.exact`).

Sampling convention, shared with `specref.batched`:
  * accept:      u < ratio, strictly, so u = 0 never accepts a ratio of 0 (a p = 0 token);
  * categorical: inverse CDF over the unnormalised weights, the first j with w_j > 0 and
                 cumsum(w)_j > u * sum(w), where sum(w) is the last partial sum; if rounding leaves no
                 such j, the last j with w_j > 0. Zero-weight tokens are never returned.
  * Injected uniforms for one verify step of g drafts: u_0..u_{g-1} feed the accept tests in order,
    and u_g feeds the single categorical draw (correction or bonus).
  * `Sequential` replays uniforms in the order asked, for either question (rules with several draws, such as
    sample-and-match: the draw at depth d uses u_d).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate
from typing import Protocol

import numpy as np


class Randomness(Protocol):
    def accept(self, ratio) -> bool: ...

    def categorical(self, weights: Sequence) -> int: ...


def inverse_cdf(weights: Sequence, u) -> int:
    """First index whose partial sum exceeds u * total, skipping zero weights (see module docstring)."""
    partial = list(accumulate(weights))
    threshold = u * partial[-1]
    last_positive = -1
    for j, (w, c) in enumerate(zip(weights, partial)):
        if w > 0:
            last_positive = j
            if c > threshold:
                return j
    if last_positive < 0:
        raise ValueError("weights has no positive entry; nothing can be drawn")
    return last_positive


class Sampled:
    """Draws from a named bit generator: numpy Generator(PCG64(seed))."""

    def __init__(self, seed: int | np.random.Generator):
        self.rng = seed if isinstance(seed, np.random.Generator) else np.random.Generator(np.random.PCG64(seed))

    def accept(self, ratio) -> bool:
        return self.rng.random() < ratio

    def categorical(self, weights: Sequence) -> int:
        return inverse_cdf(weights, self.rng.random())


class Injected:
    """Replays one verify step's uniforms [u_0 .. u_g]: accept tests in order, u_g for the final draw."""

    def __init__(self, uniforms: Sequence[float]):
        self.uniforms = [float(u) for u in uniforms]
        self.used = 0

    def accept(self, ratio) -> bool:
        if self.used >= len(self.uniforms) - 1:
            raise ValueError(f"uniforms has {len(self.uniforms)} entries; too few for the accept tests")
        u = self.uniforms[self.used]
        self.used += 1
        return u < ratio

    def categorical(self, weights: Sequence) -> int:
        return inverse_cdf(weights, self.uniforms[-1])


class Sequential:
    """Replays uniforms [u_0, u_1, ...] in the order the questions are asked, accept tests and draws alike."""

    def __init__(self, uniforms: Sequence[float]):
        self.uniforms = [float(u) for u in uniforms]
        self.used = 0

    def _next(self) -> float:
        if self.used >= len(self.uniforms):
            raise ValueError(f"uniforms has {len(self.uniforms)} entries; too few for the questions asked")
        self.used += 1
        return self.uniforms[self.used - 1]

    def accept(self, ratio) -> bool:
        return self._next() < ratio

    def categorical(self, weights: Sequence) -> int:
        return inverse_cdf(weights, self._next())
