"""Randomness for adapters of engines with an RNG of their own, drawn from the harness's generator and counted.

    seeds = seeds_from(generator, rows)         # one seed per request, for an engine's own sampler
    with torch.random.fork_rng(), global_rng_from(generator): engine_step(...)   # torch's global RNG continues it

The edge probe (edges/probe.py) forces the generator's first outputs: the caller reports how many seeds a call drew
(seeds_drawn), since forced zeros that land in seeds never reach the engine's uniforms.
"""

from __future__ import annotations

import contextlib

import torch


def seeds_from(generator: torch.Generator | None, count: int) -> list[int]:
    """count seeds for libraries with their own RNG, drawn from the harness's generator (deterministic per call).
    Counted (seeds_drawn): the edge probe's forced zeros land in these seeds, never in the library's uniforms."""
    if generator is None:
        raise ValueError("generator=None: this adapter draws its randomness from the harness's torch.Generator")
    _SEEDS_DRAWN[0] += count
    return torch.randint(0, 2**62, (count,), generator=generator, device=generator.device).tolist()


_SEEDS_DRAWN = [0]


def seeds_drawn() -> int:
    """Seeds drawn by seeds_from in this process so far (calls._execute reports a call's share to the caller)."""
    return _SEEDS_DRAWN[0]


@contextlib.contextmanager
def global_rng_from(generator: torch.Generator | None):
    """torch's global CPU RNG continues `generator`'s stream for an engine that draws from it; on exit `generator`
    takes the global state back (it advanced by what the engine drew). Use inside torch.random.fork_rng."""
    if generator is None or generator.device.type != "cpu":
        raise ValueError(f"generator={generator!r}: this adapter copies a CPU torch.Generator's state into torch's "
                         "global RNG")  # fmt: skip
    torch.set_rng_state(generator.get_state())
    yield
    generator.set_state(torch.get_rng_state())


__all__ = ["global_rng_from", "seeds_drawn", "seeds_from"]
