"""Tree scenarios: the harness builds the trees and drafts the children itself, by the adapter's drafting scheme.

A tree scenario is a model -- the state machine of `specref.conformance.scenarios` (a target row P[s] and a draft
row Q[s] per state, and the state after each token) -- and one or more tree shapes (nested tuples, as in
`specref.reference.drafting`). Each row picks one of the shapes (several shapes: ragged trees across the batch,
padded to the widest with parent -1). Nodes are laid out breadth first, siblings in draw order; node i's children
are drafted from Q at node i's state by the scheme:

  iid                  independent draws (duplicates stay separate nodes);
  without_replacement  each sibling drawn from Q without the earlier siblings' tokens, renormalised;
  dedup                independent draws merged in order of first occurrence (a repeat and its subtree are padding);
  topk                 the K likeliest tokens of Q (ties to the smaller id), no randomness.

Every node's draft row is Q at its parent's state (the law it was drawn from, before masking), given for every
scheme; target_probs[:, j] is P at node j's state. The exact law of one cycle under a rule comes from
`specref.exact_tree.tree_cycle_law` on the same rows as fractions: drafting here has the reference's law.
Every batch is a pure function of (scenario, scheme, seed, chunk, start states).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction

import numpy as np
import torch

from ... import exact_store
from ...errors import BadArgument
from ...reference.drafting import chain_shape, shape_depth, shape_size
from ..chain.token_laws import dense, normalise, peaked, seeded_rng
from ..engine.precision import as_given

SCHEMES = ("iid", "without_replacement", "dedup", "topk")


@dataclass
class TreeBatch:
    """One verify_tree call's inputs (float64; the caller casts to the adapter's dtype)."""

    target_probs: np.ndarray  # [B, N+1, V]
    draft_probs: np.ndarray  # [B, N, V]
    draft_tokens: np.ndarray  # [B, N] int64, -1 on padding nodes
    parents: np.ndarray  # [B, N] int64, -1 on padding nodes
    states: np.ndarray  # [B, N+1] state at each node (padding: 0)
    shape_index: np.ndarray  # [B] which of the scenario's shapes the row drafted

    def __len__(self) -> int:  # the rows B a call carries (the engine's Batch)
        return len(self.draft_tokens)


def from_chain(batch) -> TreeBatch:
    """A chain batch (scenarios.Batch: g drafts, num_draft of them real) as chain trees: node i's parent is i - 1,
    nodes past num_draft are padding (parent -1, token -1). Rows keep their layout, so a tree verifier's tokens
    [B, N+1] read as the chain's [B, g+1] (the edge probe's one-node trees)."""
    rows, g = batch.draft_tokens.shape
    real = np.arange(g)[None, :] < batch.num_draft[:, None]  # [B, g]
    parents = np.where(real, np.arange(g)[None, :], -1).astype(np.int64)  # [B, N]: the root is node 0
    tokens = np.where(real, batch.draft_tokens, -1).astype(np.int64)
    if batch.draft_probs is None:
        raise ValueError("batch.draft_probs=None: a point-mass chain batch has no draft rows for a tree")
    return TreeBatch(batch.target_probs, batch.draft_probs, tokens, parents, batch.states,
                     np.zeros(rows, dtype=np.int64))  # fmt: skip


def layout(shape) -> list[int]:
    """Parents [N] of a shape laid out breadth first (siblings in order): the node order of `draft_tree`."""
    parents, frontier = [], [(0, shape)]
    while frontier:
        nxt = []
        for node, node_shape in frontier:
            for child in node_shape:
                parents.append(node)
                nxt.append((len(parents), child))
        frontier = nxt
    return parents


@dataclass
class TreeScenario:
    name: str
    description: str
    target: np.ndarray  # [S, V] P[s]
    draft: np.ndarray  # [S, V] Q[s]
    next_state: np.ndarray  # [S, V]
    shapes: tuple  # tree shapes; a row draws one uniformly (ragged when more than one)
    start: int = 0
    context_free: bool = True
    joint: bool = False  # the joint-law scenario: first JOINT_TOKENS tokens over repeated cycles
    rows_per_call: int = 4096
    dtype: torch.dtype = torch.float64
    _given: dict = field(default_factory=dict, repr=False, compare=False)
    _laws: dict = field(default_factory=dict, repr=False, compare=False)

    probe = False  # the statistical rare-edge probe is a chain scenario (scenarios.PROBE)

    @property
    def vocab_size(self) -> int:
        return self.target.shape[1]

    @property
    def gamma(self) -> int:
        """The deepest node: the most drafts one cycle can accept."""
        return self.depth

    @property
    def starts(self) -> np.ndarray:
        return np.array([self.start])

    @property
    def row_elements(self) -> int:
        """Probabilities per row of a call: the target rows of every node."""
        return (self.num_nodes + 1) * self.vocab_size

    @property
    def num_nodes(self) -> int:
        return max(shape_size(s) for s in self.shapes)

    @property
    def depth(self) -> int:
        return max(shape_depth(s) for s in self.shapes)

    @property
    def chains_only(self) -> bool:
        return all(s == chain_shape(shape_depth(s)) for s in self.shapes)

    def given(self, dtype: torch.dtype) -> TreeScenario:
        """The scenario as a `dtype` verifier is given it (rows exact in dtype, summing to exactly 1)."""
        if dtype not in self._given:
            self._given[dtype] = replace(self, target=as_given(self.target, dtype), draft=as_given(self.draft, dtype),
                                         dtype=dtype, _given={}, _laws={})  # fmt: skip
        return self._given[dtype]

    # --- exact laws -----------------------------------------------------------------------------------------------

    def models(self):
        """(target, draft) as functions of a context (token tuple from the start state) returning Fraction rows."""
        return exact_store.machine(*self._fraction_rows(), self.next_state, self.start)

    def _fraction_rows(self) -> tuple[list, list]:
        return ([[Fraction(float(x)) for x in row] for row in self.target],
                [[Fraction(float(x)) for x in row] for row in self.draft])  # fmt: skip

    def cycle_law(self, shape_index: int, scheme: str, rule: str) -> dict:
        """Exact law {emitted tokens: probability} of one cycle from the start state (specref.exact_tree), kept on
        disk across runs (specref.exact_store)."""
        key = (shape_index, scheme, rule)
        if key not in self._laws:
            target, draft = self._fraction_rows()
            label = f"{self.name}-{str(self.dtype).replace('torch.', '')}-{shape_index}-{scheme}-{rule}"
            shape = self.shapes[shape_index]
            self._laws[key] = exact_store.tree_cycle_law(target, draft, self.next_state, self.start, shape, scheme,
                                                         rule, label=label)  # fmt: skip
        return self._laws[key]

    def sequence_law(self, n: int) -> np.ndarray:
        """[V^n] the target's law of the first n tokens from the start state (row-major)."""
        law, states = np.ones(1), np.array([self.start])
        for _ in range(n):
            law = (law[:, None] * self.target[states]).ravel()
            states = self.next_state[states].ravel()
        return law

    # --- inputs ---------------------------------------------------------------------------------------------------

    def inputs(self, rows: int, seed: int, chunk, scheme: str, start_states: np.ndarray | None = None) -> TreeBatch:
        if scheme not in SCHEMES:
            raise ValueError(f"scheme={scheme!r}; expected one of {SCHEMES}")
        rng = seeded_rng("tree-inputs", seed, self.name, scheme, chunk)
        n, v = self.num_nodes, self.vocab_size
        shape_index = rng.integers(len(self.shapes), size=rows)
        parents = np.full((rows, n), -1, dtype=np.int64)
        for k, shape in enumerate(self.shapes):
            laid = layout(shape)
            parents[shape_index == k, : len(laid)] = laid
        states = np.zeros((rows, n + 1), dtype=np.int64)
        states[:, 0] = self.start if start_states is None else start_states
        tokens = np.full((rows, n), -1, dtype=np.int64)
        real = np.zeros((rows, n + 1), dtype=bool)
        real[:, 0] = True
        order = np.argsort(-self.draft, axis=1, kind="stable")  # top-k order: ties to the smaller id
        support = (self.draft > 0).sum(1)
        all_rows = np.arange(rows)
        for i in range(1, n + 1):  # a loop over nodes (N is small), vectorised over rows
            parent = np.maximum(parents[:, i - 1], 0)
            alive = (parents[:, i - 1] >= 0) & real[all_rows, parent]
            s = states[all_rows, parent]
            earlier = (parents[:, : i - 1] == parents[:, i - 1 : i]) & (tokens[:, : i - 1] >= 0)  # [B, i-1]
            rank = earlier.sum(1)
            q = self.draft[s]  # [B, V]
            if scheme == "topk":
                x = order[s, np.minimum(rank, v - 1)]
                alive &= rank < support[s]
            else:
                if scheme == "without_replacement":
                    q = q.copy()
                    tried = np.where(earlier, tokens[:, : i - 1], v)  # v: a spare column
                    q = np.concatenate([q, np.zeros((rows, 1))], 1)
                    q[all_rows[:, None], tried] = 0.0
                    q = q[:, :v]
                    alive &= q.sum(1) > 0
                x = _draw(q, rng.random(rows))
                if scheme == "dedup":
                    alive &= ~(earlier & (tokens[:, : i - 1] == x[:, None])).any(1)
            real[:, i] = alive
            tokens[:, i - 1] = np.where(alive, x, -1)
            parents[:, i - 1] = np.where(alive, parents[:, i - 1], -1)
            states[:, i] = np.where(alive, self.next_state[s, np.maximum(x, 0)], 0)
        target_probs = self.target[states]  # [B, N+1, V]
        draft_probs = self.draft[states[all_rows[:, None], np.maximum(parents, 0)]]  # [B, N, V]: the parent's Q
        return TreeBatch(target_probs, draft_probs, tokens, parents, states, shape_index)

    def snippet(self, rows: int, seed: int, chunk, scheme: str) -> str:
        dtype = str(self.dtype).replace("torch.", "")
        return ("import torch\nfrom specref.conformance.tree.scenarios import get\n"
                f"batch = get({self.name!r}).given(torch.{dtype}).inputs(rows={rows}, seed={seed}, chunk={chunk!r}, "
                f"scheme={scheme!r})")  # fmt: skip


def _draw(q: np.ndarray, u: np.ndarray) -> np.ndarray:
    """[B] inverse-CDF draws from rows q [B, V] (unnormalised), landing on q > 0 only; rows without mass: 0."""
    cdf = np.cumsum(q, 1)
    x = np.minimum((cdf <= (u * cdf[:, -1])[:, None]).sum(1), q.shape[1] - 1)
    bad = q[np.arange(len(q)), x] <= 0  # rounding at a zero entry: take the last positive token at or before it
    if bad.any():
        positive = q[bad] > 0
        upto = positive & (np.arange(q.shape[1]) <= x[bad, None])
        last = np.where(upto.any(1), q.shape[1] - 1 - upto[:, ::-1].argmax(1), positive.argmax(1))
        x[bad] = last
    return x


# --- the catalogue --------------------------------------------------------------------------------------------------

#: Depth 3, root top-3, the first child wider: a small EAGLE-like tree (7 nodes).
EAGLE = ((((),), ()), ((),), ())
#: Depth 2 with repeats likely under i.i.d. drafting from a peaked q.
BUSH = (((), ()), ((), ()), ())
STAR = ((), (), (), ())


def _context_free(name, description, p, q, shapes, **kw) -> TreeScenario:
    v = len(p)
    return TreeScenario(name, description, np.asarray(p)[None], np.asarray(q)[None], np.zeros((1, v), dtype=np.int64),
                        tuple(shapes), **kw)  # fmt: skip


def _markov(name, description, rng, v, shapes, **kw) -> TreeScenario:
    """Order-1 Markov rows (state = the last token), some target zeros, drafts half target half noise."""
    target = np.stack([_sparse_row(rng, v) for _ in range(v)])
    draft = np.stack([normalise(0.5 * target[s] + 0.5 * dense(rng, v)) for s in range(v)])
    next_state = np.broadcast_to(np.arange(v), (v, v)).copy()
    return TreeScenario(name, description, target, draft, next_state, tuple(shapes), context_free=False, **kw)


def _sparse_row(rng, v) -> np.ndarray:
    w = rng.gamma(0.7, size=v) + 1e-3
    w[rng.integers(v)] = 0.0  # one impossible token per context
    return normalise(w)


def _chain_cf(name, rng) -> TreeScenario:
    # q mostly p, as a good drafter's law is: every rule accepts often enough that all three depths are
    # reached (with independent dense rows, target_only accepts ~0.11 per depth and depth 3 has no power)
    p = dense(rng, 6)
    q = normalise(0.75 * p + 0.25 * dense(rng, 6))
    return _context_free(name, "context-free chain of 3 drafts, V=6, q = 3/4 p + 1/4 noise", p, q, [chain_shape(3)])


#: The catalogue: name -> builder(name, rng). Each scenario draws from its own stream, derived from its name
#: (scenario_rng), so adding, removing or reordering an entry changes no other scenario. Features are declared:
#: the shapes (several: ragged trees), context_free, and joint (the joint-law loop), never read from the name.
CATALOGUE = {
    "tree_chain_cf": _chain_cf,
    "tree_star_cf": lambda name, rng: _context_free(name, "context-free star: 4 children of the root, V=6",
                                                    dense(rng, 6), dense(rng, 6), [STAR]),
    "tree_duplicates_cf": lambda name, rng: _context_free(name, "peaked q, V=4: i.i.d. children repeat often (depth "
                                                          "2, 7 nodes)", dense(rng, 4), peaked(rng, 4), [BUSH]),
    "tree_chain_markov": lambda name, rng: _markov(name, "Markov V=5 chain of 3 drafts (a wrong row shows with "
                                                   "context)", rng, 5, [chain_shape(3)]),
    "tree_eagle_markov": lambda name, rng: _markov(name, "Markov V=5 EAGLE-like tree: depth 3, root top-3, 7 nodes",
                                                   rng, 5, [EAGLE]),
    "tree_ragged_markov": lambda name, rng: _markov(name, "Markov V=5, ragged: each row a chain of 2, a star of 3 or "
                                                    "a depth-2 tree", rng, 5,
                                                    [chain_shape(2), ((), (), ()), (((), ()), ())]),
    "tree_joint_markov": lambda name, rng: _markov(name, "Markov V=4 EAGLE-like tree: first 3 tokens over repeated "
                                                   "cycles", rng, 4, [(((),), ())], joint=True),
    "chain_joint_markov": lambda name, rng: _markov(name, "Markov V=4 chain of 2: first 3 tokens over repeated "
                                                    "cycles", rng, 4, [chain_shape(2)], joint=True),
}  # fmt: skip


def scenario_rng(name: str) -> np.random.Generator:
    """The random stream a tree scenario's rows are drawn from: PCG64 seeded by crc32 of its name."""
    return seeded_rng("tree-scenario", name)


def build(catalogue: dict | None = None) -> dict[str, TreeScenario]:
    """The scenarios of a catalogue (default CATALOGUE), each built from its own name's stream."""
    return {name: make(name, scenario_rng(name)) for name, make in (catalogue or CATALOGUE).items()}


SCENARIOS = build()


def get(name: str) -> TreeScenario:
    if name not in SCENARIOS:
        raise BadArgument(f"scenarios: {name!r} is not a tree scenario; known: {', '.join(SCENARIOS)}")
    return SCENARIOS[name]
