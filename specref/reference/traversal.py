"""Traversal verification (Weng et al., "Traversal Verification for Speculative Tree Decoding", NeurIPS 2025,
arXiv 2505.12398): the tree is verified from its leaves towards the root, with sequence-level acceptance.

Each node n keeps M_b(.|n) (initially the target row p at n), M_s(.|n) (initially the draft row q its children were
drawn from, without replacement) and a sequence-level acceptance p_alpha(n): p_alpha(root) = 1 and, for a child c
of n carrying token x, p_alpha(c) = min(1, p_alpha(n) M_b(x|n) / M_s(x|n)) (on a chain, Sun et al.'s block weights
b_i). Repeat:
  * take the first live node X of a post-order walk (from the root, the first live child until a live leaf);
  * if X is the root (every child deleted), emit Y ~ M_b(.|root) and stop;
  * accept the path root..X with probability p_alpha(X): emit its tokens, then Y ~ M_b(.|X) (the bonus from p at X
    when X kept its row), and stop;
  * otherwise delete X; at its parent Y with r = sum_x (p_alpha(Y) M_b(x|Y) - M_s(x|Y))_+:
      M_b(.|Y) := norm((p_alpha(Y) M_b(.|Y) - M_s(.|Y))_+),  p_alpha(Y) := r / (r + 1 - p_alpha(Y)),
      M_s(.|Y) := M_s(.|Y) without X's token, renormalised   (p_alpha(Y) := 0 where r = 0),
    and recompute p_alpha below Y.
On a chain this is block verification (the h_i of Sun et al. tested from the leaf down); on a star (one level) it is
recursive rejection sampling without replacement. Siblings must be drawn without replacement (distinct tokens).

Randomness follows the tree contract's convention: each test consumes the next uniform (at most N tests, one per
deleted node), the one final draw uses the last.
"""

from __future__ import annotations


def _normalised(weights: list) -> list:
    mass = sum(weights[1:], weights[0])
    return [w / mass for w in weights]


def walk(tree, rng) -> tuple[list[int], list[int]]:
    """Verify the whole tree (children/target/token/draft, as `specref.reference.tree.walk` reads it); return
    (emitted tokens, accepted nodes)."""
    kids: dict[int, list[int]] = {}
    frontier = [0]
    while frontier:  # the whole tree: traversal reads every node before its first test
        nxt = []
        for node in frontier:
            kids[node] = list(tree.children(node))
            nxt += kids[node]
        frontier = nxt
    parent = {c: node for node, cs in kids.items() for c in cs}
    m_b = {node: list(tree.target(node)) for node in kids}  # M_b(.|n)
    m_s = {node: list(tree.draft(cs[0])) for node, cs in kids.items() if cs}  # M_s(.|n)
    alpha = {0: 1}

    def set_alpha(node: int) -> None:
        for c in kids[node]:
            x = tree.token(c)
            q_x = m_s[node][x]
            alpha[c] = min(1, alpha[node] * m_b[node][x] / q_x) if q_x > 0 else 0 * q_x
            set_alpha(c)

    set_alpha(0)
    while True:
        node, path = 0, []
        while kids[node]:
            node = kids[node][0]
            path.append(node)
        if node == 0:
            return [rng.categorical(m_b[0])], []
        if rng.accept(alpha[node]):
            return [tree.token(n) for n in path] + [rng.categorical(m_b[node])], path
        up, x = parent[node], tree.token(node)
        weights = [max(0 * b, alpha[up] * b - s) for b, s in zip(m_b[up], m_s[up])]
        r = sum(weights[1:], weights[0])
        if r > 0:
            alpha[up] = r / (r + 1 - alpha[up])
            m_b[up] = _normalised(weights)
        else:  # p_alpha M_b <= M_s everywhere: stopping at Y would draw from an empty residual (block's h_i = 0)
            alpha[up] = 0 * r
        left = [0 * s if y == x else s for y, s in enumerate(m_s[up])]
        if any(left):
            m_s[up] = _normalised(left)
        kids[up].remove(node)
        set_alpha(up)
