"""Tree checks: T0 invariants on every call, and counts for the statistical checks, with their exact expected laws.

T0 (certain; a single violation fails, no alpha):
  t0_valid_ids          every entry is -1 or a token id in [0, V)
  t0_padding            1..depth+1 tokens, left-aligned, then -1 (depth: the row's deepest node)
  t0_root_to_node       the returned accepted nodes are a root-to-node path, one per accepted token (adapters
                        declaring `nodes`; otherwise not tested)
  t0_prefix_is_drafts   the emitted tokens before the last are the drafts of a root-to-node path (the returned one;
                        without nodes, some path of the tree, found by matching tokens level by level)
  t0_zero_prob_emitted  no emitted token has target probability 0 in its context (a law check)
T2 (alpha from the run's budget), per scenario, against laws computed exactly (specref.exact_tree on the rows as
given, as fractions), never simulated:
  first_token_law       the first emitted token follows P at the root (law)
  joint_law             the first 3 tokens over repeated tree cycles follow the target's law (law; joint scenarios)
  depth_acceptance      P(the walk accepts a node at depth d | it reached depth d - 1), per (shape, depth), exact
                        binomial per position (rule)
  accepted_length_law   the law of the number of accepted drafts, per shape (rule)
  correction_law        the last token (correction or bonus) given the accepted path's tokens, per shape: the law
                        of what is emitted at the node where the walk stopped (rule)
Rows that break a T0 check are left out of the T2 counts.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from ...reference.drafting import shape_depth
from ...stats import CheckResult
from ...stats.record import CheckId
from ..engine import registry
from ..engine.counts import Counts, decode_array, encode_array
from ..engine.registry import TEST, TREE
from ..engine.results import t0_result
from .kinds import DECLARED as _DECLARED  # noqa: F401 -- the tree kinds a tally plans and counts
from .scenarios import TreeBatch, TreeScenario

T0_CHECKS = ("t0_valid_ids", "t0_padding", "t0_root_to_node", "t0_prefix_is_drafts", "t0_zero_prob_emitted")


def family_of(kind: str) -> str:
    return registry.family_of(kind)


def tree_t0(batch: TreeBatch, tokens: np.ndarray, nodes: np.ndarray | None, target_seen: np.ndarray, vocab: int):
    """({check: [B] rows that break it}, accepted count A [B], the node where the walk stopped [B])."""
    rows, n = batch.draft_tokens.shape
    every = np.arange(rows)
    emitted = tokens >= 0
    ok_ids = ((~emitted & (tokens == -1)) | (emitted & (tokens < vocab))).all(1)
    k = emitted.cumprod(1).sum(1)
    real = np.concatenate([np.ones((rows, 1), bool), batch.parents >= 0], 1)
    depth = _depths(batch.parents)
    ok_pad = (emitted.sum(1) == k) & (k >= 1) & (k <= depth.max(1) + 1)
    accepted = np.clip(k - 1, 0, n)
    safe = np.where(emitted & (tokens < vocab), tokens, 0)
    parent_of = np.concatenate([np.full((rows, 1), -1), batch.parents], 1)  # [B, N+1]
    node_token = np.concatenate([np.full((rows, 1), -1), batch.draft_tokens], 1)
    path = np.zeros((rows, n + 1), dtype=np.int64)  # path[:, j]: the node at depth j (root at 0)
    bad_path = np.zeros(rows, bool)
    bad_prefix = np.zeros(rows, bool)
    if nodes is not None:
        listed = (nodes >= 0).sum(1)
        bad_path |= listed != accepted
        for j in range(n):
            here = j < accepted
            node = np.where(here, nodes[:, j], 0)
            inside = (node >= 1) & (node <= n)
            node = np.where(inside, node, 0)
            bad_path |= here & (~inside | ~real[every, node] | (parent_of[every, node] != path[:, j]))
            path[:, j + 1] = np.where(here, node, 0)
            bad_prefix |= here & inside & (node_token[every, node] != tokens[:, j])
    else:  # infer: the set of nodes whose root path spells the emitted prefix, level by level
        reach = np.zeros((rows, n + 1), bool)
        reach[:, 0] = True
        for j in range(n):
            here = j < accepted
            step = real & (node_token == safe[:, j : j + 1]) & reach[every[:, None], np.maximum(parent_of, 0)]
            step[:, 0] = False
            step &= here[:, None]
            found = step.any(1)
            bad_prefix |= here & ~found
            path[:, j + 1] = np.where(here & found, step.argmax(1), 0)
            reach = np.where(here[:, None], step, reach)
    # the context of emitted token j is the node at depth j of the path (any matching node: same token path)
    p_at = target_seen[every[:, None], path, safe[:, : n + 1]]  # [B, N+1]
    zero = (emitted & (p_at <= 0)).any(1)
    stop = path[every, accepted]
    checks = {"t0_valid_ids": ~ok_ids, "t0_padding": ~ok_pad, "t0_root_to_node": bad_path,
              "t0_prefix_is_drafts": bad_prefix, "t0_zero_prob_emitted": zero}  # fmt: skip
    return checks, accepted, stop


def _depths(parents: np.ndarray) -> np.ndarray:
    rows, n = parents.shape
    depth = np.zeros((rows, n + 1), dtype=np.int64)
    for i in range(1, n + 1):  # parents come before children
        p = parents[:, i - 1]
        depth[:, i] = np.where(p >= 0, depth[np.arange(rows), np.maximum(p, 0)] + 1, 0)
    return depth


@dataclass
class TreeTally(Counts):
    CONTRACT = TREE
    EXTRA_ARRAYS = ("node_hits",)  # the picture's (picture.py): node i accepted, single-shape scenarios

    scenario: TreeScenario
    scheme: str
    rule: str
    nodes_declared: bool = False
    rows: int = 0
    seconds: float = 0.0
    violations: dict = field(default_factory=lambda: {name: 0 for name in T0_CHECKS})
    examples: dict = field(default_factory=dict)
    joint: np.ndarray | None = None

    def __post_init__(self):
        sc = self.scenario
        self.first = np.zeros(sc.vocab_size, dtype=np.int64)
        self.length = np.zeros((len(sc.shapes), sc.num_nodes + 1), dtype=np.int64)  # [shape, A]
        self.last: dict = defaultdict(lambda: np.zeros(sc.vocab_size, dtype=np.int64))  # (shape, prefix) -> [V]
        self.node_hits = np.zeros(sc.num_nodes, dtype=np.int64)  # single-shape scenarios: node i accepted (picture)
        self.node_rows = 0

    def add(self, batch: TreeBatch, out: tuple, seen, where: dict) -> np.ndarray:
        """T0-check one call's output (tokens [B, N+1], nodes [B, N] or None) and count it; returns the [B] mask of
        rows that passed T0."""
        tokens, nodes = out
        self.rows += len(tokens)
        checks, accepted, _ = tree_t0(batch, tokens, nodes, seen[0], self.scenario.vocab_size)
        good = np.ones(len(tokens), bool)
        for name, bad in checks.items():  # each row is charged to the first check it breaks
            hits = good & bad
            if hits.any():
                self.violations[name] += int(hits.sum())
                if name not in self.examples:
                    r = int(np.flatnonzero(hits)[0])
                    self.examples[name] = {**where, "row": r, "output": tokens[r].tolist(),
                                           "nodes": None if nodes is None else nodes[r].tolist(),
                                           "draft_tokens": batch.draft_tokens[r].tolist(),
                        "num_draft": int((batch.parents[r] >= 0).sum()),  # real nodes (the report's wording)
                                           "parents": batch.parents[r].tolist()}  # fmt: skip
            good &= ~bad
        if self.scenario.joint:
            return good
        ok = np.flatnonzero(good)
        np.add.at(self.first, tokens[ok, 0], 1)
        np.add.at(self.length, (batch.shape_index[ok], accepted[ok]), 1)
        if nodes is not None and len(self.scenario.shapes) == 1:
            picked = nodes[ok]
            np.add.at(self.node_hits, picked[picked > 0] - 1, 1)
            self.node_rows += ok.size
        keys = np.concatenate([batch.shape_index[ok, None], accepted[ok, None], np.where(
            np.arange(tokens.shape[1])[None] < accepted[ok, None], tokens[ok], -1)], 1)  # fmt: skip
        last = tokens[ok, accepted[ok]]
        unique, inverse = np.unique(keys, axis=0, return_inverse=True)
        counts = np.zeros((len(unique), self.scenario.vocab_size), dtype=np.int64)
        np.add.at(counts, (inverse.ravel(), last), 1)
        for key, row in zip(map(tuple, unique.tolist()), counts):
            shape, a = key[0], key[1]
            self.last[(shape, tuple(key[2 : 2 + a]))] += row
        return good

    def t0_kinds(self) -> tuple[str, ...]:
        """The T0 kinds of every call (t0_root_to_node only where nodes are declared)."""
        return tuple(name for name in T0_CHECKS if name != "t0_root_to_node" or self.nodes_declared)

    def t0_results(self) -> list[CheckResult]:
        return [t0_result(name, self.violations[name], self.rows,
                          {"example": self.examples.get(name), "family": family_of(name)})
                for name in self.t0_kinds()]  # fmt: skip

    # --- counts as JSON (counts.py): `last` is keyed by (shape, accepted prefix), `node_rows` a scalar -------------

    def counts(self) -> dict:
        return {**super().counts(), "node_rows": self.node_rows}

    def absorb(self, part: dict) -> None:
        super().absorb(part)
        self.node_rows += part["node_rows"]

    def encode(self, name: str, value):
        if name != "last":
            return encode_array(value)
        return [[shape, list(prefix), encode_array(row)] for (shape, prefix), row in sorted(value.items(), key=str)]

    def decode(self, name: str, record):
        if name != "last":
            return decode_array(record)
        return {(shape, tuple(prefix)): decode_array(row) for shape, prefix, row in record}

    def add_decoded(self, name: str, value) -> None:
        if name != "last":
            return super().add_decoded(name, value)
        for key, row in value.items():
            self.last[key] += row

    # --- expected laws, exact ---------------------------------------------------------------------------------------

    def _laws(self):
        sc = self.scenario
        return [sc.cycle_law(k, self.scheme, self.rule) for k in range(len(sc.shapes))]

    def expected_length(self) -> np.ndarray:
        """[shapes, N+1] P(A = a) per shape."""
        out = np.zeros(self.length.shape)
        for k, law in enumerate(self._laws()):
            for seq, prob in law.items():
                out[k, len(seq) - 1] += float(prob)
        return out

    def hazards(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per (shape, depth d >= 1): (accepted at d, reached d-1, exact P(A >= d | A >= d-1)), flattened."""
        law = self.expected_length()
        tail = law[:, ::-1].cumsum(1)[:, ::-1]  # P(A >= a)
        successes, trials, rates = [], [], []
        for k, shape in enumerate(self.scenario.shapes):
            for d in range(1, shape_depth(shape) + 1):
                successes.append(int(self.length[k, d:].sum()))
                trials.append(int(self.length[k, d - 1 :].sum()))
                rates.append(float(min(1.0, tail[k, d] / tail[k, d - 1])) if tail[k, d - 1] > 0 else 0.0)
        return np.array(successes), np.array(trials), np.clip(np.array(rates), 0.0, 1.0)

    def expected_last(self) -> dict:
        """(shape, accepted prefix) -> [V] law of the last token given the prefix, for every possible prefix."""
        out: dict = {}
        v = self.scenario.vocab_size
        for k, law in enumerate(self._laws()):
            for seq, prob in law.items():
                key = (k, tuple(seq[:-1]))
                out.setdefault(key, np.zeros(v))[seq[-1]] += float(prob)
        return {key: row / row.sum() for key, row in out.items()}

    # --- results ----------------------------------------------------------------------------------------------------

    def t2_results(self, alphas: dict[str, float]) -> list[CheckResult]:
        """One CheckResult per planned kind under the declared rule; alphas maps kind -> alpha."""
        return [self.t2(kind, alpha) for kind, alpha in alphas.items()]

    def certain_results(self, kinds: list[str]) -> list[CheckResult]:
        if kinds:
            raise ValueError(f"kinds={kinds!r}: the tree contract plans no certain checks")
        return []

    def t2(self, kind: str, alpha: float) -> CheckResult:
        """The registered test of `kind` (engine/registry.py, tree form) on this tally, under the declared rule."""
        form = registry.get(kind).forms.get(TREE)
        if form is None or form.evaluate is None:
            raise ValueError(f"kind={kind!r} is not a tree check")
        result = form.evaluate(self, alpha, self.rule, str(CheckId(kind, self.scenario.name)))
        result.details["family"] = family_of(kind)
        return result

    def planned(self) -> tuple[list[str], dict[str, str]]:
        """(checks that test, {check: why it cannot fail}), from the exact laws alone (before any data): every tree
        T2 kind's plan predicate (engine/registry.py)."""
        tested, skipped = [], {}
        for kind in registry.for_contract(TREE, "T2"):
            decision = kind.forms[TREE].plan(self)
            if decision == TEST:
                tested.append(kind.name)
            elif decision is not None:
                skipped[kind.name] = decision
        return tested, skipped
