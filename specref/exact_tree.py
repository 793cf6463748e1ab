"""Exact laws of one tree cycle and of one block cycle, by enumerating the reference engines' own random choices.

`tree_cycle_law` enumerates `specref.reference.drafting.cycle` (lazy drafting, then `tree.walk`). By default it
enumerates one node at a time (method="nodes"): what the walk does at a node, drafting that node's children
included, and composes: after the walk moves to a child, it uses fresh randomness and depends only on the
child's context and shape, just as `specref.exact.sequence_law` composes cycles. A rule that verifies the whole
tree at once (traversal: `tree.WHOLE_TREE`) has no first step to compose: method="trees" (its default) enumerates
the drafted tree's law, then the walk's law on each tree held fixed. method="replay" enumerates the whole cycle
end to end (drafting again on every path of the walk), to cross-check both on small cases.

`rule` is any rule `specref.reference.tree.parse_rule` reads, a sibling order included ("mss:random-order"): the
order's draws are random choices of the walk like the others, so its law is enumerated the same way.

Lossless means: the emitted tokens, continued by sampling from the target, have the target's law. So
`tv_from_target` compares the law of the emitted tokens completed by the target to n tokens (n the longest
possible emission) with the target's own law of n tokens; it is 0 exactly for a lossless rule.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from fractions import Fraction
from itertools import product

from .exact import Law, _Checked, enumerate_law
from .reference import block, drafting, tree
from .reference.chain import Model, Row
from .validation import check_gamma


class _Moved(Exception):
    """Raised when the walk moves past the root: the first step's outcome is known."""

    def __init__(self, node: int):
        self.node = node


class _FirstStep(drafting.DraftedTree):
    def children(self, node: int) -> list[int]:
        if node != 0:
            raise _Moved(node)
        return super().children(node)


def node_law(target: Model, draft: Model, context: Sequence[int], shape, scheme: str, rule: str) -> Law:
    """Law of the walk's first step at a node: ("accept", token, child shape) or ("emit", token)."""

    def program(rng):
        first = _FirstStep(target, draft, context, shape, scheme, rng)
        try:
            return ("emit", tree.walk(first, rule, rng)[0][0])
        except _Moved as moved:
            return ("accept", first.token(moved.node), first.shapes[moved.node])

    return enumerate_law(program)


def tree_cycle_law(
    target: Model, draft: Model, prefix: Sequence[int], shape, scheme: str, rule: str, *, method: str = "nodes"
) -> Law:
    """Law of the tokens one tree cycle emits (drafting by `scheme`, verification by `rule`)."""
    target, draft = _Checked(target, "target"), _Checked(draft, "draft")
    if method not in ("nodes", "trees", "replay"):
        raise ValueError(f"method={method!r}; expected 'nodes', 'trees' or 'replay'")
    if tree.parse_rule(rule).base in tree.WHOLE_TREE and method == "nodes":
        method = "trees"  # a whole-tree rule reads every node before its first test: no first step to compose
    if method == "replay":
        return enumerate_law(lambda rng: tuple(drafting.cycle(target, draft, prefix, shape, scheme, rule, rng)))
    if method == "trees":
        return _law_over_trees(target, draft, prefix, shape, scheme, rule)
    memo: dict = {}

    def law_from(context: tuple[int, ...], node_shape) -> Law:
        if (context, node_shape) not in memo:
            out: dict = defaultdict(Fraction)
            for outcome, prob in node_law(target, draft, context, node_shape, scheme, rule).items():
                if outcome[0] == "emit":
                    out[(outcome[1],)] += prob
                    continue
                _, token, child_shape = outcome
                for rest, rest_prob in law_from(context + (token,), child_shape).items():
                    out[(token,) + rest] += prob * rest_prob
            memo[(context, node_shape)] = dict(out)
        return memo[(context, node_shape)]

    return law_from(tuple(prefix), shape)


def _law_over_trees(target: Model, draft: Model, prefix: Sequence[int], shape, scheme: str, rule: str) -> Law:
    """The cycle's law as the law of the drafted tree, then the walk's law on each tree held fixed: the drafting
    is enumerated once per tree, not once per path of the walk (as method="replay" does). Exact for any rule: the
    walk reads the drafted tree and its own draws only."""
    trees: dict = {}

    def drafted(rng):
        whole = drafting.DraftedTree(target, draft, prefix, shape, scheme, rng)
        frontier = [0]
        while frontier:
            frontier = [c for node in frontier for c in whole.children(node)]
        whole.rng = None  # drafted: the walk below draws from its own replay
        key = (tuple(whole.tokens[1:]), tuple(whole.parents[1:]))
        trees.setdefault(key, whole)
        return key

    out: dict = defaultdict(Fraction)
    for key, tree_prob in enumerate_law(drafted).items():
        walk_law = enumerate_law(lambda rng, t=trees[key]: tuple(tree.walk(t, rule, rng)[0]), final_draw=True)
        for tokens, prob in walk_law.items():
            out[tokens] += tree_prob * prob
    return dict(out)


def verify_tree_law(target_probs, draft_probs, draft_tokens, parents, rule: str) -> Law:
    """Law of the emitted tokens of `tree.verify_tree` with the tree held fixed."""
    return enumerate_law(
        lambda rng: tuple(tree.verify_tree(target_probs, draft_probs, draft_tokens, parents, rng, rule=rule)),
        final_draw=True,
    )


def block_cycle_law(target: Model, draft: Model, prefix: Sequence[int], gamma: int) -> Law:
    """Law of the tokens one block-verification cycle emits (chain drafting included)."""
    check_gamma(gamma)
    target, draft = _Checked(target, "target"), _Checked(draft, "draft")
    return enumerate_law(lambda rng: tuple(block.cycle(target, draft, prefix, gamma, rng)), final_draw=True)


def target_law(target: Model, prefix: Sequence[int], n: int) -> Law:
    """The target's own law of the next n tokens."""
    law = {}
    for tokens in product(range(len(target(tuple(prefix)))), repeat=n):
        prob = Fraction(1)
        for i, token in enumerate(tokens):
            prob *= target(tuple(prefix) + tokens[:i])[token]
            if not prob:
                break
        if prob:
            law[tokens] = prob
    return law


def completed_law(law: Law, target: Model, prefix: Sequence[int], n: int) -> Law:
    """The law of the emitted tokens continued by the target to n tokens (outcomes longer than n are cut)."""
    out: dict = defaultdict(Fraction)
    for tokens, prob in law.items():
        if len(tokens) >= n:
            out[tokens[:n]] += prob
            continue
        for rest, rest_prob in target_law(target, tuple(prefix) + tokens, n - len(tokens)).items():
            out[tokens + rest] += prob * rest_prob
    return {tokens: prob for tokens, prob in out.items() if prob}


def total_variation(law: Law, other: Law) -> Fraction:
    return sum((abs(law.get(k, 0) - other.get(k, 0)) for k in set(law) | set(other)), Fraction(0)) / 2


def tv_from_target(law: Law, target: Model, prefix: Sequence[int]) -> Fraction:
    """TV between the emitted tokens completed by the target and the target's law; 0 iff the cycle is lossless."""
    n = max(len(tokens) for tokens in law)
    return total_variation(completed_law(law, target, prefix, n), target_law(target, prefix, n))


def accepted_length_law(law: Law) -> dict[int, Fraction]:
    """P(A = k) for the number A of accepted drafts (a cycle emits A + 1 tokens)."""
    out: dict = defaultdict(Fraction)
    for tokens, prob in law.items():
        out[len(tokens) - 1] += prob
    return dict(out)


def expected_accepted(law: Law) -> Fraction:
    return sum((k * prob for k, prob in accepted_length_law(law).items()), Fraction(0))


def root_acceptance(target: Model, draft: Model, prefix: Sequence[int], shape, scheme: str, rule: str) -> Fraction:
    """P(the walk accepts one of the root's children)."""
    law = node_law(_Checked(target, "target"), _Checked(draft, "draft"), tuple(prefix), shape, scheme, rule)
    return sum((prob for outcome, prob in law.items() if outcome[0] == "accept"), Fraction(0))


def first_token_law(law: Law) -> dict[int, Fraction]:
    out: dict = defaultdict(Fraction)
    for tokens, prob in law.items():
        out[tokens[0]] += prob
    return dict(out)


def row_law(row: Row) -> dict[int, Fraction]:
    return {x: prob for x, prob in enumerate(row) if prob}
