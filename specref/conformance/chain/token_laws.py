"""The token laws the chain scenarios are built from: seeded streams, dense, sparse, peaked and one-hot rows, and
the large vocabularies' rows with mass on every tile and on the vocabulary's edge (tail_tokens)."""

from __future__ import annotations

import zlib

import numpy as np


def seeded_rng(*key) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(zlib.crc32(":".join(map(str, key)).encode())))


def normalise(weights: np.ndarray) -> np.ndarray:
    return weights / weights.sum(axis=-1, keepdims=True)


def dense(rng, v, concentration=1.0) -> np.ndarray:
    return normalise(rng.gamma(concentration, size=v) + 1e-3)


def sparse(rng, v, zero_fraction) -> np.ndarray:
    w = rng.gamma(1.0, size=v) + 1e-3
    w[rng.random(v) < zero_fraction] = 0
    if not w.any():
        w[rng.integers(v)] = 1
    return normalise(w)


def peaked(rng, v, zero_fraction=0.0) -> np.ndarray:
    w = sparse(rng, v, zero_fraction) if zero_fraction else dense(rng, v)
    w[rng.integers(v)] += 3.0
    return normalise(w)


#: The tile sizes of blocked vocabulary kernels whose last, partial tile the large scenarios put mass on (vLLM's
#: sample_recovered_tokens_kernel scans 8,192 tokens a block since vLLM PR 34974; vllm-ascend's 4,096).
TILES = (1024, 2048, 4096, 8192)
#: The mass the large scenarios' target puts on those tokens, and their draft: most of it is residual.
TAIL_TARGET_MASS, TAIL_DRAFT_MASS = 0.3, 0.02


def tail_tokens(v: int) -> list[int]:
    """The vocabulary's edge: its last two tokens, and the first token of the last partial tile of each tile size
    in TILES (where V is not a multiple of it)."""
    return sorted({v - 1, max(v - 2, 0)} | {(v // t) * t for t in TILES if v % t and v > t})


def tail_heavy(row: np.ndarray, mass: float) -> np.ndarray:
    """row with `mass` spread evenly over tail_tokens (the rest scaled to 1 - mass): a kernel that drops or mis-masks
    the vocabulary's tail moves that mass, and the residual's share of it, elsewhere."""
    tail = tail_tokens(row.size)
    out = row.copy()
    out[tail] = 0.0
    out *= (1 - mass) / out.sum()
    out[tail] = mass / len(tail)
    return out


def one_hot(v, token) -> np.ndarray:
    row = np.zeros(v)
    row[token] = 1.0
    return row


#: The most tokens the large scenarios' target spreads over the range (their edge aside): each of them then holds
#: enough of p and of the residual that no law check pools it into a merged bin at the rows a default run gives them
#: (a support over every tile of 1,024 at V = 151,936, 149 tokens, passes stats.size.MAX_DF and pools half of p).
SPREAD_TOKENS = 40


def spread_tile(v: int) -> int:
    """The smallest tile size of TILES with at most SPREAD_TOKENS tiles in [0, v)."""
    return next((t for t in TILES if -(-v // t) <= SPREAD_TOKENS), TILES[-1])


def spread_tokens(rng, v: int) -> np.ndarray:
    """One token drawn uniformly in every tile of spread_tile(v) tokens of [0, v), the last partial tile included,
    and the tail_tokens: a sparse support over the whole range, sorted."""
    tile = spread_tile(v)
    starts = np.arange(0, v, tile)
    widths = np.minimum(starts + tile, v) - starts
    picked = starts + (rng.random(starts.size) * widths).astype(np.int64)
    return np.union1d(picked, tail_tokens(v))


def large_pair(rng, v) -> tuple[np.ndarray, np.ndarray]:
    """A large vocabulary's (target, draft): the target on spread_tokens only (p = 0 on every other token, so an
    emission there is a certain failure), TAIL_TARGET_MASS of it on the edge (tail_tokens); the draft dense over the
    whole vocabulary, half of it on the target's support, TAIL_DRAFT_MASS on the edge. So the residual too has mass
    in every tile of spread_tile(v) tokens and about half of it on the edge, and the law checks' df is the support's
    size less one (at most SPREAD_TOKENS + 3), not V / 2."""
    support = spread_tokens(rng, v)
    target = np.zeros(v)
    target[support] = rng.uniform(0.75, 1.25, size=support.size)  # even: no token too rare to count
    draft = normalise(0.5 * normalise(target) + 0.5 * dense(rng, v))
    return tail_heavy(normalise(target), TAIL_TARGET_MASS), tail_heavy(draft, TAIL_DRAFT_MASS)


def disjoint_pair(rng, v, cut=None) -> tuple[np.ndarray, np.ndarray]:
    """p on `cut` random tokens, q on the other v - cut (default: half each)."""
    cut = v // 2 if cut is None else cut
    order = rng.permutation(v)
    p, q = np.zeros(v), np.zeros(v)
    p[order[:cut]], q[order[cut:]] = dense(rng, cut), dense(rng, v - cut)
    return p, q
