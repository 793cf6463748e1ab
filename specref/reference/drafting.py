"""Drafting schemes for trees, and one tree cycle: draft a tree, score it, verify it by a tree rule.

A tree shape is a nested tuple: a node's shape is the tuple of its children's shapes, () a leaf. The shape of a
chain of g drafts is `chain_shape(g)`; ((), ()) is a root with two leaf children. Each node's children are
drafted from q = draft(context ending at the node) by a scheme:

  iid                  K independent draws from q (duplicates kept: they are separate nodes);
  without_replacement  draw k from q restricted to the tokens not yet drawn, renormalised (fewer children if q's
                       support runs out);
  dedup                K independent draws from q, merged in order of first occurrence (a merged child keeps the
                       shape of its first draw);
  topk                 the K tokens of largest q (ties to the smaller id), those with q > 0 only; no randomness.

Every child records q as its draft row (the contract's "law it was drawn from"; without replacement, the law
before masking).

Lazy drafting. `DraftedTree` drafts a node's children when the walk first asks for them. Each sibling group is
drawn independently of everything but its parent's context, and the walk never reads a group it does not
enter, so the law of the emitted tokens is that of drafting the whole tree first (`draft_tree`, the arrays a
batched engine receives); it makes exact enumeration visit only the groups on the walked path.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..randomness import Randomness
from .chain import Model, Row, _row
from .tree import walk

SCHEMES = ("iid", "without_replacement", "dedup", "topk")
Shape = tuple


def chain_shape(gamma: int) -> Shape:
    shape: Shape = ()
    for _ in range(gamma):
        shape = (shape,)
    return shape


def shape_depth(shape: Shape) -> int:
    return 1 + max(map(shape_depth, shape)) if shape else 0


def shape_size(shape: Shape) -> int:
    """Nodes below the root."""
    return sum(1 + shape_size(child) for child in shape)


def draw_children(q: Row, shape: Shape, scheme: str, rng: Randomness) -> list[tuple[int, Shape]]:
    """The children (token, shape) of a node of the given shape, drafted from q by the scheme."""
    if scheme == "iid":
        return [(rng.categorical(q), child) for child in shape]
    if scheme == "dedup":
        merged: dict[int, Shape] = {}
        for child in shape:
            merged.setdefault(rng.categorical(q), child)
        return list(merged.items())
    if scheme == "without_replacement":
        children: list[tuple[int, Shape]] = []
        for child in shape:
            left = [0 if any(y == x for x, _ in children) else q_y for y, q_y in enumerate(q)]
            if not any(left):
                break
            children.append((rng.categorical(left), child))
        return children
    if scheme == "topk":
        ranked = sorted((y for y in range(len(q)) if q[y] > 0), key=lambda y: (-q[y], y))
        return list(zip(ranked, shape))
    raise ValueError(f"scheme={scheme!r}; expected one of {SCHEMES}")


class DraftedTree:
    """A tree drafted lazily by `scheme` under `draft`, scored by `target` (the interface `tree.walk` reads)."""

    def __init__(self, target: Model, draft: Model, prefix: Sequence[int], shape: Shape, scheme: str, rng):
        self.target_model, self.draft_model, self.scheme, self.rng = target, draft, scheme, rng
        self.contexts, self.shapes, self.tokens, self.parents = [tuple(prefix)], [shape], [None], [-1]
        self.draft_rows: list = [None]
        self.kids: dict[int, list[int]] = {}

    def children(self, node: int) -> list[int]:
        if node not in self.kids:
            q = _row(self.draft_model, "draft", self.contexts[node])
            self.kids[node] = []
            for x, child_shape in draw_children(q, self.shapes[node], self.scheme, self.rng):
                self.kids[node].append(len(self.tokens))
                self.contexts.append(self.contexts[node] + (x,))
                self.shapes.append(child_shape)
                self.tokens.append(x)
                self.parents.append(node)
                self.draft_rows.append(q)
        return self.kids[node]

    def target(self, node: int) -> Row:
        return _row(self.target_model, "target", self.contexts[node])

    def token(self, node: int) -> int:
        return self.tokens[node]

    def draft(self, node: int) -> Row:
        return self.draft_rows[node]


def cycle(target: Model, draft: Model, prefix: Sequence[int], shape: Shape, scheme: str, rule: str, rng) -> list[int]:
    """One tree cycle: draft by `scheme` (lazily), verify by `rule`; return the emitted tokens."""
    return walk(DraftedTree(target, draft, prefix, shape, scheme, rng), rule, rng)[0]


def draft_tree(target: Model, draft: Model, prefix: Sequence[int], shape: Shape, scheme: str, rng):
    """The whole tree drafted first, breadth first: (target_probs [N+1][V], draft_probs [N][V], draft_tokens [N],
    parents [N]) of the tree contract."""
    tree = DraftedTree(target, draft, prefix, shape, scheme, rng)
    frontier = [0]
    while frontier:
        frontier = [c for node in frontier for c in tree.children(node)]
    order = range(1, len(tree.tokens))  # created level by level: breadth first, parents before children
    target_probs = [tree.target(node) for node in [0, *order]]
    draft_probs = [tree.draft(i) for i in order]
    return target_probs, draft_probs, [tree.token(i) for i in order], [tree.parents[i] for i in order]
