"""Public Hypothesis strategies for speculative-sampling inputs, for specref's suite and for yours.

Rows are built from a few small drawn choices (vocab size, shape kind, relation, a seed) rather than from V
drawn floats, so V = 8193 or 151936 costs no more than V = 3, and shrinking stays meaningful. Seeds come from
the example; no global RNG is touched.

    from hypothesis import given, strategies as st
    from specref import strategies as sst

    @given(st.data())
    def test_mine(data):
        target_probs, draft_probs = data.draw(sst.pairs(exact=True), label="target_probs, draft_probs")
        gamma = data.draw(sst.gammas(max_gamma=4), label="gamma")

Exact rows (`exact=True`) are tuples of Fractions that sum to exactly 1; float rows are float64 numpy arrays
that sum to 1 within 1e-12.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from hypothesis import strategies as st

from .models import HashedContext, MarkovTable

KINDS = ("dense", "sparse", "peaked", "uniform", "one_hot")
RELATIONS = ("independent", "equal", "disjoint", "nested", "near_equal")
#: Vocab sizes worth hitting on purpose: 1, tiny, not multiples of 8, and real tokenizer sizes.
ODD_VOCAB_SIZES = (1, 2, 3, 5, 7, 31, 257, 8193)

NEAR_EQUAL_Z = Fraction(1, 10**7)


def seeds() -> st.SearchStrategy[int]:
    return st.integers(0, 2**32 - 1)


def vocab_sizes(min_size: int = 1, max_size: int = 64) -> st.SearchStrategy[int]:
    """Sizes up to 64, mixed with the odd sizes in [min_size, max_size] (257, 8193, ...)."""
    small = st.integers(min_size, min(max_size, 64))
    odd = [v for v in ODD_VOCAB_SIZES if min_size <= v <= max_size and v > 64]
    return st.one_of(small, st.sampled_from(odd)) if odd else small


def gammas(min_gamma: int = 1, max_gamma: int = 8) -> st.SearchStrategy[int]:
    return st.integers(min_gamma, max_gamma)


def _rng(seed: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(seed))


def _weights(vocab_size: int, kind: str, rng: np.random.Generator, support: np.ndarray | None = None) -> np.ndarray:
    """Integer weights of the given shape kind, positive only on `support` (default: every token)."""
    allowed = np.arange(vocab_size) if support is None else support
    w = np.zeros(vocab_size, dtype=np.int64)
    if kind == "one_hot" or len(allowed) == 1:
        w[rng.choice(allowed)] = 1
    elif kind == "uniform":
        w[allowed] = 1
    elif kind == "dense":
        w[allowed] = rng.integers(1, 100, size=len(allowed))
    elif kind == "sparse":
        w[allowed] = rng.integers(1, 100, size=len(allowed)) * (rng.random(len(allowed)) < 0.4)
        if not w.any():
            w[rng.choice(allowed)] = 1
    elif kind == "peaked":
        w[allowed] = rng.integers(1, 10, size=len(allowed))
        w[rng.choice(allowed)] += 50 * len(allowed)
    else:
        raise ValueError(f"kind={kind!r}; expected one of {KINDS}")
    return w


def _normalise(w: np.ndarray, exact: bool):
    total = int(w.sum())
    if exact:
        return tuple(Fraction(int(x), total) for x in w)
    return w / w.sum()


@st.composite
def distributions(draw, vocab_size: int | None = None, *, kinds=KINDS, exact: bool = False, max_vocab: int = 64):
    """One distribution over V tokens, of shape kind dense, sparse (zeros), peaked, uniform or one_hot."""
    v = vocab_size if vocab_size is not None else draw(vocab_sizes(1, max_vocab))
    kind = draw(st.sampled_from(kinds))
    return _normalise(_weights(v, kind, _rng(draw(seeds()))), exact)


@st.composite
def pairs(draw, vocab_size: int | None = None, *, relations=RELATIONS, kinds=KINDS, exact: bool = False,
          max_vocab: int = 64):  # fmt: skip
    """(target_probs, draft_probs) with a chosen relation between them.

    independent: drawn separately;  equal: q == p (Z = 0);  disjoint: no shared support (Z = 1, needs V >= 2);
    nested: one support inside the other;  near_equal: q moves 1e-7 of p's mass to another token (Z = 1e-7).
    """
    v = vocab_size if vocab_size is not None else draw(vocab_sizes(1, max_vocab))
    relation = draw(st.sampled_from([r for r in relations if v >= 2 or r in ("equal", "independent")]))
    kind_p, kind_q = draw(st.sampled_from(kinds)), draw(st.sampled_from(kinds))
    rng = _rng(draw(seeds()))
    if relation == "independent":
        w_p, w_q = _weights(v, kind_p, rng), _weights(v, kind_q, rng)
    elif relation == "equal":
        w_p = _weights(v, kind_p, rng)
        w_q = w_p
    elif relation == "disjoint":
        order = rng.permutation(v)
        cut = int(rng.integers(1, v))
        w_p, w_q = _weights(v, kind_p, rng, order[:cut]), _weights(v, kind_q, rng, order[cut:])
        if draw(st.booleans()):
            w_p, w_q = w_q, w_p
    elif relation == "nested":
        outer = _weights(v, kind_p, rng)
        support = np.flatnonzero(outer)
        subset = rng.choice(support, size=int(rng.integers(1, len(support) + 1)), replace=False)
        inner = _weights(v, kind_q, rng, subset)
        w_p, w_q = (outer, inner) if draw(st.booleans()) else (inner, outer)
    else:  # near_equal: exact rows get Z = 1e-7 exactly; float rows get it up to rounding
        p = _normalise(_weights(v, kind_p, rng), exact=True)
        src = max(range(v), key=lambda x: p[x])
        dst = (src + 1 + int(rng.integers(v - 1))) % v
        q = list(p)
        q[src] -= NEAR_EQUAL_Z
        q[dst] += NEAR_EQUAL_Z
        return (p, tuple(q)) if exact else (np.array(p, dtype=float), np.array(q, dtype=float))
    return _normalise(w_p, exact), _normalise(w_q, exact)


@st.composite
def context_models(draw, vocab_size: int | None = None, *, exact: bool = False, max_vocab: int = 6):
    """A (target, draft) pair of context-dependent toy models: hashed-context or order-1/2 Markov tables."""
    v = vocab_size if vocab_size is not None else draw(st.integers(1, max_vocab))
    family = draw(st.sampled_from(["hashed", "markov"]))
    if family == "hashed":
        seed_t, seed_d = draw(seeds()), draw(seeds())
        zero_t, zero_d = draw(st.sampled_from([0.0, 0.3, 0.6])), draw(st.sampled_from([0.0, 0.3, 0.6]))
        return (
            HashedContext(v, seed_t, zero_fraction=zero_t, exact=exact),
            HashedContext(v, seed_d, zero_fraction=zero_d, exact=exact),
        )
    order = draw(st.integers(1, 2))
    rng = _rng(draw(seeds()))
    keys = [()] + [(x,) for x in range(v)] + ([(x, y) for x in range(v) for y in range(v)] if order == 2 else [])

    def table():
        rows = {k: _normalise(_weights(v, str(rng.choice(KINDS)), rng), exact) for k in keys}
        return MarkovTable(order, rows)

    return table(), table()


@st.composite
def tree_shapes(draw, max_width: int = 3, max_depth: int = 3):
    """A ragged tree shape (nested tuples of children): the root has 1..max_width children, deeper nodes
    0..max_width, up to max_depth levels."""
    depth = draw(st.integers(1, max_depth), label="depth")

    def node(level: int):
        if level == depth:
            return ()
        width = draw(st.integers(1 if level == 0 else 0, max_width), label=f"width at level {level}")
        return tuple(node(level + 1) for _ in range(width))

    return node(0)
