"""Forced uniforms: torch CPU generator states whose chosen outputs make a float32 uniform exactly 0.

torch's CPU generator is MT19937. A float32 `torch.rand` reads the low 24 bits of one 32-bit output, so it is
exactly 0 when those bits are 0: an event of probability 2^-24 per draw in nature. This module builds generator
states in which chosen outputs are such words, so a rare edge (`u <= p/q`, a left-side inverse CDF) shows in one
call instead of in tens of millions of rows:

    generator = forced_generator(zero_at=range(64), seed=0)   # the first 64 outputs: float32 u = 0
    torch.rand(64, generator=generator)                         # 64 exact zeros

Only the natural event is forced. A forced word keeps its high 8 bits nonzero (chosen at random), so a float64
uniform (53 bits of two outputs) or an `exponential_` draw (two outputs per value) is never 0: an all-zero word
would make them 0, an event of probability about 2^-53 that never happens in nature and would convict correct code
(torch.multinomial then picks a zero-probability category). The words that are not forced are random.

State layout (`Generator.get_state()`, 5056 bytes): the legacy pod holds the seed (uint64 at byte 0), `left`
(int32 at 8), `seeded` (int32 at 12), `next` (uint64 at 16) and the 624 state words (uint64 from byte 24). Each
draw decrements `left`, twists when it reaches 0, and otherwise returns state[next++] tempered. A state with
left = 624 and next = 0 therefore returns words 0..622 (tempered) before it twists: those 623 outputs are chosen
directly (tempering is invertible). CUDA's Philox cannot be forced this way; see `event_probability`.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import zlib
from collections.abc import Callable, Iterable

import numpy as np
import torch

__all__ = [
    "FORCEABLE",
    "LAYOUTS",
    "event_probability",
    "forced_generator",
    "forced_state",
    "outputs_used",
    "reaching",
]

STATE_WORDS = 624
#: Outputs a forced state returns before its first twist: positions 0..622 can be forced.
FORCEABLE = STATE_WORDS - 1
FLOAT32_BITS = 24  # torch.rand float32 on CPU: (word & (2^24 - 1)) * 2^-24
_LEFT, _SEEDED, _NEXT, _WORDS = 8, 12, 16, 24
_MASK32 = 0xFFFFFFFF


def temper(words: np.ndarray) -> np.ndarray:
    """MT19937's output function of state words (uint64 arrays holding 32-bit values)."""
    y = words.astype(np.uint64) & _MASK32
    y ^= y >> np.uint64(11)
    y ^= (y << np.uint64(7)) & np.uint64(0x9D2C5680)
    y ^= (y << np.uint64(15)) & np.uint64(0xEFC60000)
    y ^= y >> np.uint64(18)
    return y & _MASK32


def untemper(outputs: np.ndarray) -> np.ndarray:
    """The state words whose tempered outputs are `outputs` (the inverse of `temper`)."""
    y = outputs.astype(np.uint64) & _MASK32
    y ^= y >> np.uint64(18)
    y ^= (y << np.uint64(15)) & np.uint64(0xEFC60000)
    x = y.copy()
    for _ in range(4):  # y = x ^ ((x << 7) & mask): each pass fixes 7 more low bits
        x = (y ^ ((x << np.uint64(7)) & np.uint64(0x9D2C5680))) & _MASK32
    return x ^ (x >> np.uint64(11)) ^ (x >> np.uint64(22))


def _positions(zero_at: Iterable[int]) -> np.ndarray:
    positions = np.unique(np.fromiter((int(k) for k in zero_at), dtype=np.int64))
    if positions.size and (positions[0] < 0 or positions[-1] >= FORCEABLE):
        raise ValueError(f"zero_at={positions.tolist()!r}: positions must lie in 0..{FORCEABLE - 1}")
    return positions


def forced_outputs(zero_at: Iterable[int], seed: int) -> np.ndarray:
    """The first FORCEABLE outputs of the forced state: random 32-bit words, and at `zero_at` words whose low 24
    bits are 0 and whose high 8 bits are random and nonzero."""
    rng = np.random.Generator(np.random.PCG64(zlib.crc32(f"forced:{seed}".encode())))
    outputs = rng.integers(0, 1 << 32, size=STATE_WORDS, dtype=np.uint64)
    positions = _positions(zero_at)
    outputs[positions] = rng.integers(1, 256, size=positions.size, dtype=np.uint64) << np.uint64(FLOAT32_BITS)
    return outputs


def forced_state(zero_at: Iterable[int], seed: int = 0) -> torch.Tensor:
    """A CPU generator state (uint8 [5056]) whose outputs at `zero_at` (0-based, < FORCEABLE) give float32 u = 0."""
    state = torch.Generator().manual_seed(int(seed)).get_state().numpy().copy()
    words = untemper(forced_outputs(zero_at, seed))
    state[_WORDS : _WORDS + 8 * STATE_WORDS] = words.astype("<u8").view(np.uint8)
    state[_LEFT : _LEFT + 4] = np.array([STATE_WORDS], dtype="<i4").view(np.uint8)
    state[_SEEDED : _SEEDED + 4] = np.array([1], dtype="<i4").view(np.uint8)
    state[_NEXT : _NEXT + 8] = np.array([0], dtype="<u8").view(np.uint8)
    return torch.from_numpy(state)


def forced_generator(zero_at: Iterable[int], seed: int = 0) -> torch.Generator:
    """A CPU torch.Generator in `forced_state(zero_at, seed)`."""
    generator = torch.Generator()
    generator.set_state(forced_state(zero_at, seed))
    return generator


def outputs_used(state: torch.Tensor) -> int | None:
    """How many outputs a generator started in a forced state has returned since, read from its state now; None
    once it has twisted (FORCEABLE or more)."""
    raw = state.numpy() if isinstance(state, torch.Tensor) else np.asarray(state)
    left = int(raw[_LEFT : _LEFT + 4].view("<i4")[0])
    used = STATE_WORDS - left
    return used if used < FORCEABLE and int(raw[_NEXT : _NEXT + 8].view("<u8")[0]) == used else None


# --- layouts: where the zeros go, for a verifier's draw order ---------------------------------------------------


def every_draw(rows: int, gamma: int) -> list[int]:
    """A zero at each of the first rows * g outputs: every accept test of one [B, g] float32 draw."""
    return list(range(min(rows * gamma, FORCEABLE)))


def every_other(rows: int, gamma: int) -> list[int]:
    """A zero at outputs 0, 2, 4, ...: every accept test of a g = 1 verifier drawing [B, 2] (accept, final), or of
    a row loop that draws one accept uniform and one final uniform per row."""
    return list(range(0, min(2 * rows * gamma, FORCEABLE), 2))


def after_first_draw(rows: int, gamma: int) -> list[int]:
    """A zero at outputs B .. B + B*g - 1: the accept tests of a verifier that first draws B values (its final
    uniforms), then [B, g] accept uniforms."""
    return list(range(rows, min(rows + rows * gamma, FORCEABLE)))


def accept_tests_of_rows(rows: int, gamma: int) -> list[int]:
    """A zero at the first accept test of each row of one [B, g+1] float32 draw: outputs 0, g+1, 2(g+1), ..."""
    return list(range(0, min(rows * (gamma + 1), FORCEABLE), gamma + 1))


#: name -> (rows, gamma) -> forced positions
LAYOUTS: dict[str, Callable[[int, int], list[int]]] = {
    "every_draw": every_draw,
    "every_other": every_other,
    "after_first_draw": after_first_draw,
    "accept_tests_of_rows": accept_tests_of_rows,
}


# --- the event's probability ------------------------------------------------------------------------------------


def event_probability(device: str | torch.device, dtype: torch.dtype) -> float | None:
    """P(one uniform from torch.rand is exactly 0) on `device` in `dtype`; None where it cannot be 0 in practice.

    CPU float32: a uniform reads the low 24 bits of one output, 0 with probability 2^-24. float16 and bfloat16: the
    kernel draws that float32 uniform k / 2^24 and rounds it to the dtype, and a uniform that rounds up to 1.0 is
    sent to 0, so P(0) = (1 + the grid points that round to 1) / 2^24, read from the installed torch's own rounding
    (_rounded_half_event): 4097 / 2^24 (about 2^-12) for float16 and 32769 / 2^24 (about 2^-9) for bfloat16 on torch
    2.13, not 2^-11 and 2^-8 (properties/test_forced_statistical.py holds the values against torch's draws).
    float64 reads 53 bits: 2^-53, never seen in practice, so None (not reachable). CUDA: torch maps curand's (0, 1]
    float output to [0, 1) by sending 1 to 0, and curand's float32 output is 1 with probability 2^-25 (its 24-bit
    grid in (0, 1], rounded); None for float64 and for dtypes whose mapping was not read.
    """
    kind = torch.device(device).type
    if dtype == torch.float64:
        return None
    if kind == "cpu":
        if dtype == torch.float32:
            return 2.0**-24
        return _rounded_half_event(dtype) if dtype in (torch.float16, torch.bfloat16) else None
    if kind == "cuda" and dtype == torch.float32:
        return 2.0**-25
    return None


@functools.cache
def _rounded_half_event(dtype: torch.dtype) -> float:
    """(1 + #{k < 2^24 : k / 2^24 rounds to 1.0 in dtype}) / 2^24, by this torch's float32 -> dtype rounding."""
    grid = torch.arange(2**24, dtype=torch.float64).div_(2**24).to(torch.float32)  # exact: 24-bit grid
    return (1 + int((grid.to(dtype) == 1).sum())) / 2**24


# --- reach: the RNGs a verifier seeds, forks or makes during one call ------------------------------------------

#: The names a reach record gives the RNGs it forced (Reach.reads' keys, in report.json's words).
GIVEN, GLOBAL, SEEDED, NEW = (
    "the generator given",
    "torch's global RNG",
    "a torch.Generator it seeded",
    "a new torch.Generator",
)
_ACTIVE: list = [None]  # the Reach in force (one at a time), or None


class Reach:
    """During one forced call (`reaching`), every CPU torch RNG the verifier seeds (`torch.manual_seed`,
    `Generator.manual_seed`), forks (`torch.random.fork_rng`) or makes (`torch.Generator()`) starts in the same
    forced state, and so does torch's global RNG on entry, so their first float32 uniforms are the forced ones
    whichever RNG the verifier draws from. Only in the thread that entered; a generator made before the call and
    seeded during it is not reached (its method cannot be replaced). `reads`: {name: outputs read of the forced
    streams, summed over the RNGs of that name}; `count`: {name: RNGs forced}."""

    def __init__(self, state: torch.Tensor):
        self.state, self.thread = state, threading.get_ident()
        self.reads: dict[str, int] = {}
        self.count: dict[str, int] = {}
        self._open: dict[int, tuple[str, torch.Generator, int]] = {}  # id -> (name, generator, outputs at open)

    def here(self) -> bool:
        return _ACTIVE[0] is self and threading.get_ident() == self.thread

    def open(self, generator: torch.Generator, name: str, read: int = 0) -> None:
        """Count what `generator` reads of a forced stream from now on (it has read `read` of it so far)."""
        self.settle(generator)
        self._open[id(generator)] = (name, generator, read)

    def force(self, generator: torch.Generator, name: str) -> None:
        """Put `generator` (CPU) in the forced state, counting what it read of an earlier forcing first."""
        if generator.device.type != "cpu":
            return
        self.settle(generator)
        if name in (SEEDED, NEW) or name not in self.count:
            self.count[name] = self.count.get(name, 0) + 1
        generator.set_state(self.state)
        self.open(generator, name)

    def settle(self, generator: torch.Generator) -> int | None:
        """Add what `generator` read of its forced stream since it was opened to reads, and stop counting it
        (before its state is replaced or restored); returns the outputs it has read of that stream, or None where
        it was not counted."""
        name, _, read = self._open.pop(id(generator), (None, None, 0))
        if name is None:
            return None
        used = outputs_used(generator.get_state())
        used = FORCEABLE if used is None else used
        self.reads[name] = self.reads.get(name, 0) + max(used - read, 0)
        return used

    def close(self) -> None:
        for _, generator, _ in list(self._open.values()):
            self.settle(generator)

    def words(self) -> str:
        """Which RNGs read forced outputs, in words: "torch's global RNG (128 outputs), ..."."""
        read = [(name, n) for name, n in self.reads.items() if n]
        return ", ".join(f"{name}{f' x{self.count[name]}' if self.count.get(name, 1) > 1 else ''} ({n:,} outputs)"
                         for name, n in read) or "none"  # fmt: skip


def _reached_generator_class(base: type) -> type:
    class Same(type(base)):  # isinstance(g, torch.Generator) holds for the generators made before the call too
        def __instancecheck__(cls, obj):
            return isinstance(obj, base)

        def __subclasscheck__(cls, sub):
            return issubclass(sub, base)

    class ReachedGenerator(base, metaclass=Same):
        """torch.Generator during a forced call: a CPU generator made or seeded in it starts in the forced state."""

        def __init__(self, device="cpu"):  # the device is taken by torch's __new__
            reach = _ACTIVE[0]
            if reach is not None and reach.here():
                reach.force(self, NEW)

        def manual_seed(self, seed):
            reach = _ACTIVE[0]
            reach = reach if reach is not None and reach.here() else None
            if reach is not None:
                reach.settle(self)
            out = super().manual_seed(seed)
            if reach is not None:
                reach.force(self, SEEDED)
            return out

    return ReachedGenerator


@contextlib.contextmanager
def reaching(state: torch.Tensor, given: torch.Generator | None = None):
    """Within it, the verifier's own CPU RNGs start in `state` too (Reach); yields the Reach. `given`: the generator
    the verifier was given, counted under GIVEN (already in `state`)."""
    import torch.random as torch_random

    reach = Reach(state)
    saved_global = torch.default_generator.get_state()
    originals = (torch.manual_seed, torch_random.manual_seed, torch_random.fork_rng, torch.Generator)
    manual_seed, fork_rng, base = originals[1], originals[2], originals[3]

    def seeded(seed):
        here = reach.here()
        if here:
            reach.settle(torch.default_generator)
        out = manual_seed(seed)
        if here:
            reach.force(torch.default_generator, GLOBAL)
        return out

    @contextlib.contextmanager
    def forked(*args, **kwargs):
        here = reach.here()
        resume = reach.settle(torch.default_generator) if here else None
        with fork_rng(*args, **kwargs):
            if here:
                reach.force(torch.default_generator, GLOBAL)
            try:
                yield
            finally:
                if here:
                    reach.settle(torch.default_generator)  # before fork_rng restores the state it saved
        if resume is not None:  # the stream it left continues
            reach.open(torch.default_generator, GLOBAL, resume)

    if given is not None:
        reach.count[GIVEN] = 1
        reach.open(given, GIVEN)
    _ACTIVE[0] = reach
    torch.manual_seed = torch_random.manual_seed = seeded
    torch_random.fork_rng = forked
    torch.Generator = _reached_generator_class(base)
    reach.force(torch.default_generator, GLOBAL)
    try:
        yield reach
    finally:
        torch.manual_seed, torch_random.manual_seed, torch_random.fork_rng, torch.Generator = originals
        _ACTIVE[0] = None
        reach.close()
        torch.default_generator.set_state(saved_global)
