"""Closed forms for tree and block verification, computed from their formulas (not by running a rule).

* MSS, K i.i.d. children from one q at a node with target p (SpecInfer):
    P(some child accepted) = 1 - prod_k (1 - sum_x min(r_k(x), q(x))),  r_1 = p,  r_{k+1} = norm((r_k - q)_+).
* Deterministic tree, target-only rule: E[accepted drafts] = sum over non-root nodes v of the target
  probability of v's path (distinct siblings).
* Block verification (Sun et al. 2025): P(tau >= k) = E_{x ~ q}[b_k], b_0 = 1,
  b_i = min(1, b_{i-1} p_{i-1}(x_i) / q_{i-1}(x_i)).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fractions import Fraction
from itertools import product

from .reference.chain import Model, Row


def mss_node_acceptance(target_probs: Row, draft_probs: Row, num_children: int):
    """P(MSS accepts one of num_children i.i.d. children drawn from q at a node with target p)."""
    r, rejected_all = list(target_probs), 1
    for _ in range(num_children):
        overlap = sum(min(r_x, q_x) for r_x, q_x in zip(r, draft_probs))
        rejected_all *= 1 - overlap
        if overlap == 1:  # r == q: the next child is accepted surely
            break
        r = normalised_residual(r, draft_probs)
    return 1 - rejected_all


def normalised_residual(r: Row, q: Row) -> list | None:
    """norm((r - q)_+), or None if it is empty."""
    residual = [max(0, r_x - q_x) for r_x, q_x in zip(r, q)]
    mass = sum(residual)
    return [w / mass for w in residual] if mass else None


def deterministic_expected_accepted(target: Model, prefix: Sequence[int], paths: Iterable[tuple[int, ...]]):
    """sum over non-root nodes v of p(path to v); `paths` holds each node's path from the root (its tokens)."""
    total = Fraction(0)
    for path in paths:
        prob = Fraction(1)
        for i, token in enumerate(path):
            prob *= target(tuple(prefix) + path[:i])[token]
        total += prob
    return total


def block_tail(target: Model, draft: Model, prefix: Sequence[int], k: int) -> Fraction:
    """P(tau >= k) = E_{x_1..x_k ~ q}[b_k] for block verification."""
    prefix = tuple(prefix)
    vocab_size = len(target(prefix))
    expectation = Fraction(0)
    for drafts in product(range(vocab_size), repeat=k):
        q_path, b = Fraction(1), Fraction(1)
        for i, x in enumerate(drafts):
            q_row, p_row = draft(prefix + drafts[:i]), target(prefix + drafts[:i])
            q_path *= q_row[x]
            if not q_path:
                break
            b = min(Fraction(1), b * p_row[x] / q_row[x])
        expectation += q_path * b
    return expectation
