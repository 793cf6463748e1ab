"""Tree verification for one sequence, written as the math.

The tree contract (`specref.batched.tree` adds a batch dimension B in front of every argument):

    verify_tree(target_probs [N+1][V], draft_probs [N][V] | None, draft_tokens [N], parents [N], rng, rule=...)
      -> tokens: the accepted root-to-node path's tokens, then one correction or bonus token (1..D+1 tokens)

  * Node 0 is the root, the last committed token. Nodes 1..N are the draft nodes; node i carries draft_tokens[i-1].
  * parents[i-1] is node i's parent (0 for children of the root); parents come before their children. Padding
    nodes (ragged trees in a batch) have parent -1; no node has a padding parent.
  * target_probs[j] is the target law at the context that ends at node j (the root: the first new token's law).
  * draft_probs[i-1] is the law node i's token was drawn from (None for deterministic trees). Without replacement
    it is the law before the earlier siblings' tokens are removed (the masked law gives the same result: masking
    is idempotent).
  * Siblings are ordered by node index, which is their draw order. A rule tests them in that order unless it
    declares another sibling order (below).
  * With `return_nodes=True` the accepted nodes come too, root-to-node order, the root left out.

Verification walks from the root. At node u with children c_1..c_K and target row p = target_probs[u], the rule
accepts one child and moves to it, or emits a correction from its residual at u and stops; at a node without
children it emits a bonus token from p. With x_k the token of c_k and q_k its draft row, the rules are:

  mss           SpecInfer multi-step speculative sampling (Miao et al. 2024, Alg. 2), for children drawn i.i.d.,
                duplicates included: r = p; for k = 1..K accept with min(1, r(x_k) / q_k(x_k)), else
                r := norm((r - q_k)_+). If none is accepted, emit from r.
  rsd           Recursive rejection sampling without replacement (Jeon et al. 2024; Sequoia; EAGLE-1): mss with
                q_k restricted to the untried tokens and renormalised. Siblings must be distinct (drawn without
                replacement, or i.i.d. draws de-duplicated in order of first occurrence).
  target_only   Deterministic trees, target only (EAGLE-2/3; SGLang at thresholds 1.0): accept c_k with
                probability r(x_k), where r = p restricted to the untried tokens, renormalised (mass 1 - p(tried),
                rows summing to 1 by contract); duplicate siblings are skipped. If none is accepted, emit from r.
  sample_match  The target samples y ~ p and the walk follows the first child whose token is y, else emits y.
  kseq          SpecTr's K-SEQ (Sun et al., NeurIPS 2023), for K children drawn i.i.d. from one q: accept x_k with
                min(1, p(x_k) / (rho* q(x_k))) for k = 1..K, else emit from the K-SEQ residual
                (`specref.reference.kseq`; rho* in [1, K] is the most accepting threshold that keeps the law).
  traversal     Traversal verification (Weng et al., NeurIPS 2025, arXiv 2505.12398), for children drawn without
                replacement: the tree is verified leaf to root with sequence-level acceptance
                (`specref.reference.traversal`); on a chain it is block verification. It is not a rule at one
                node: `walk` hands it the whole tree.

target_only and sample_match do not read draft_probs. For mss and rsd, draft_probs=None means point-mass drafts.

Sibling order. A rule may carry a variant after a colon; `parse_rule` reads it. One exists:

  mss:random-order  mss testing the children in a uniformly random order (a fresh permutation at each node,
                    drawn from the verifier's generator) instead of index order: SpecInfer's Alg. 2 as printed.
                    Lossless on i.i.d. children (they are exchangeable). Its acceptance differs where siblings'
                    subtrees differ: on trees whose first children carry the largest subtrees (EAGLE-like trees)
                    it accepts fewer drafts than index order, on trees ordered the other way more; on stars the same.

It is refused for the other rules: rsd's children (drawn without replacement, or de-duplicated in order of first
occurrence) are not exchangeable, so testing them in another order against q restricted to the untried tokens is
not lossless; target_only and sample_match accept the same token in any order (y ~ p, accepted when it is a child).

How a chain is a tree: g drafts form the tree with parents = [0, 1, ..., g-1] (`chain_parents`), target rows
p_1..p_{g+1} and draft rows q_1..q_g as in `specref.reference.chain`. On a chain, mss and rsd are exact
speculative sampling and target_only is its point-mass rule, token for token under the same uniforms;
sample_match is sample-and-match. `chain_as_tree` makes a chain verifier callable through this contract.

Randomness, and the coupling convention shared with `specref.batched.tree` (`uniforms_rng` builds it):
  * mss, rsd, target_only: `Injected` with N+1 uniforms; the accept tests consume u_0, u_1, ... in the order the
    walk makes them (at most N tests), and u_N feeds the one final draw (correction or bonus);
  * sample_match: `Sequential`; the draw at depth d (the root is depth 0) uses u_d;
  * mss:random-order has none (`uniforms_rng` refuses it): before each test it asks one categorical over equal
    weights for the next child among the untested ones.

Empty residual: with exact arithmetic a residual only empties where acceptance is certain. If rounding empties it,
the rule draws from the node's target row p instead (as the chain engine does); it never yields NaN.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from functools import reduce
from operator import add
from typing import NamedTuple

from ..randomness import Injected, Randomness, Sequential
from ..validation import check_distribution, check_token
from .chain import Row
from .kseq import residual_weights as kseq_residual
from .kseq import threshold as kseq_threshold
from .traversal import walk as traversal_walk

RULES = ("mss", "rsd", "target_only", "sample_match", "kseq", "traversal")
#: Rules that read the children's draft rows.
USES_DRAFT_PROBS = ("mss", "rsd", "kseq", "traversal")
#: Rules that verify the whole tree at once rather than one node at a time (walk hands them the tree).
WHOLE_TREE = ("traversal",)
#: Rules whose siblings must carry distinct tokens (drawn without replacement).
DISTINCT_SIBLINGS = ("rsd", "traversal")
#: Sibling orders a rule may declare after a colon, and the rules each is lossless for (module docstring).
ORDERS = {"random-order": ("mss",)}
#: Why an order is refused for a rule (the error says it).
_REFUSED = {
    "rsd": "children drawn without replacement are not exchangeable: testing them out of draw order against q "
    "restricted to the untried tokens is not lossless",
    "target_only": "it accepts the same token in any sibling order (y ~ p, accepted when it is a child); declare "
    "'target_only'",
    "sample_match": "it accepts the same token in any sibling order (y ~ p, accepted when it is a child); declare "
    "'sample_match'",
    "kseq": "its residual is derived for the K tests in draw order; declare 'kseq'",
    "traversal": "its order is the post-order walk of the tree; declare 'traversal'",
}
#: Every rule a verifier can declare: the base rules, then their variants.
DECLARABLE = RULES + tuple(f"{base}:{order}" for order, bases in ORDERS.items() for base in bases)


class Rule(NamedTuple):
    base: str  # one of RULES
    order: str  # "index", or one of ORDERS


def parse_rule(rule: str) -> Rule:
    """A declared rule, "base" or "base:order" (module docstring); ValueError naming the rule otherwise."""
    if not isinstance(rule, str):
        raise ValueError(f"rule={rule!r} must be a string, one of {DECLARABLE}")
    base, _, order = rule.partition(":")
    if base not in RULES:
        raise ValueError(f"rule={rule!r}; expected one of {DECLARABLE}")
    if not order:
        return Rule(base, "index")
    if order not in ORDERS:
        raise ValueError(f"rule={rule!r}: unknown sibling order {order!r}; expected one of {tuple(ORDERS)}")
    if base not in ORDERS[order]:
        raise ValueError(f"rule={rule!r}: sibling order {order!r} is declared for {ORDERS[order]} only; "
                         f"for {base!r}, {_REFUSED[base]}")  # fmt: skip
    return Rule(base, order)


class Accept(NamedTuple):
    index: int  # which child, 0-based in sibling order


class Emit(NamedTuple):
    token: int  # the correction (or bonus) token; the walk stops


def step(rule: str, p: Row, children: Sequence[tuple[int, Row | None]], rng: Randomness) -> Accept | Emit:
    """The rule at one node: p is the node's target row, children the (x_k, q_k) in sibling order."""
    base, order = parse_rule(rule)
    if base in WHOLE_TREE:
        raise ValueError(f"rule={rule!r} verifies the whole tree, not one node: call walk")
    by_base = {"mss": _mss, "rsd": _rsd, "target_only": _target_only, "sample_match": _sample_match,
               "kseq": _kseq}[base]  # fmt: skip
    if order == "index":
        return by_base(p, children, rng)
    tested: list[int] = []  # the children's indices in the order tested
    outcome = by_base(p, _random_order(children, rng, tested), rng)
    return Accept(tested[outcome.index]) if isinstance(outcome, Accept) else outcome


def _random_order(children, rng, tested: list):
    """The children in a uniformly random order, drawn lazily: each next child uniform among the untested ones
    (exact weights, so enumeration stays in rational arithmetic); `tested` records their indices."""
    left = list(range(len(children)))
    while left:
        k = rng.categorical([Fraction(1)] * len(left)) if len(left) > 1 else 0
        tested.append(left.pop(k))
        yield children[tested[-1]]


def _mss(p, children, rng):
    r, weights = p, p  # weights: the unnormalised law of the final draw
    for k, (x, q) in enumerate(children):
        if rng.accept(r[x] / q[x]):  # min(1, r(x_k) / q_k(x_k))
            return Accept(k)
        weights = _residual(r, q, p)  # (r - q_k)_+
        r = _normalised(weights)
    return Emit(rng.categorical(weights))


def _rsd(p, children, rng):
    r, weights, tried = p, p, []
    for k, (x, q) in enumerate(children):
        if tried:  # q_k: q without the tried tokens, renormalised
            q = _normalised([0 if y in tried else q_y for y, q_y in enumerate(q)])
        if rng.accept(r[x] / q[x]):
            return Accept(k)
        weights = _residual(r, q, p)
        r = _normalised(weights)
        tried.append(x)
    return Emit(rng.categorical(weights))


def _target_only(p, children, rng):
    mass, tried = 1, []  # mass = p(untried) = 1 - p(tried)
    for k, (x, _) in enumerate(children):
        if x in tried:  # a duplicate sibling: its token was already rejected
            continue
        if rng.accept(p[x] / mass if mass > 0 else 0):  # r(x) = p(x) / p(untried)
            return Accept(k)
        mass -= p[x]
        tried.append(x)
    weights = [0 if y in tried else p_y for y, p_y in enumerate(p)]
    return Emit(rng.categorical(weights if any(weights) else p))


def _sample_match(p, children, rng):
    y = rng.categorical(p)
    for k, (x, _) in enumerate(children):
        if x == y:
            return Accept(k)
    return Emit(y)


def _kseq(p, children, rng):
    if not children:  # a leaf: the bonus from p
        return Emit(rng.categorical(p))
    q, k = children[0][1], len(children)  # i.i.d. children: one draft row
    rho = kseq_threshold(p, q, k)
    for i, (x, _) in enumerate(children):
        if rng.accept(p[x] / (rho * q[x])):  # min(1, p(x_k) / (rho* q(x_k)))
            return Accept(i)
    weights = kseq_residual(p, q, k, rho)
    return Emit(rng.categorical(weights if any(weights) else p))


def _residual(r: Row, q: Row, p: Row) -> list:
    """(r - q)_+, or p where rounding leaves it empty (see module docstring)."""
    weights = [max(0, r_y - q_y) for r_y, q_y in zip(r, q)]
    return weights if any(weights) else list(p)


def total(weights: Sequence):
    """sum(weights) left to right (a sequential cumsum's last entry; Python >= 3.12's float sum compensates)."""
    return reduce(add, weights)


def _normalised(weights: Sequence) -> list:
    mass = total(weights)
    return [w / mass for w in weights]


class ArrayTree:
    """The tree of the contract's arrays, as the walk sees it: children, target rows, tokens, draft rows."""

    def __init__(self, target_probs, draft_probs, draft_tokens, parents):
        self.target_probs, self.draft_probs, self.draft_tokens = target_probs, draft_probs, draft_tokens
        self.kids: list[list[int]] = [[] for _ in range(len(parents) + 1)]
        for i, parent in enumerate(parents, start=1):
            if parent >= 0:
                self.kids[parent].append(i)

    def children(self, node: int) -> list[int]:
        return self.kids[node]

    def target(self, node: int) -> Row:
        return self.target_probs[node]

    def token(self, node: int) -> int:
        return self.draft_tokens[node - 1]

    def draft(self, node: int) -> Row:
        if self.draft_probs is None:  # a point mass at the node's token
            return [1 if y == self.token(node) else 0 for y in range(len(self.target_probs[0]))]
        return self.draft_probs[node - 1]


def walk(tree, rule: str, rng: Randomness) -> tuple[list[int], list[int]]:
    """Verify from the root; return (emitted tokens, accepted nodes). `tree` has children/target/token/draft."""
    if parse_rule(rule).base in WHOLE_TREE:
        return traversal_walk(tree, rng)
    node, tokens, nodes = 0, [], []
    reads_draft = parse_rule(rule).base in USES_DRAFT_PROBS
    while True:
        kids = tree.children(node)
        children = [(tree.token(c), tree.draft(c) if reads_draft else None) for c in kids]
        outcome = step(rule, tree.target(node), children, rng)
        if isinstance(outcome, Emit):
            return tokens + [outcome.token], nodes
        node = kids[outcome.index]
        tokens.append(tree.token(node))
        nodes.append(node)


def verify_tree(
    target_probs: Sequence[Row],  # [N+1][V]  p at the root and at each node
    draft_probs: Sequence[Row] | None,  # [N][V]  the law each node was drawn from; None: deterministic
    draft_tokens: Sequence[int],  # [N]
    parents: Sequence[int],  # [N]  parent node of nodes 1..N; -1 marks padding
    rng: Randomness,
    *,
    rule: str,
    validate: bool = True,
    return_nodes: bool = False,
):
    """Verify one draft tree by `rule`; return the emitted tokens (and the accepted nodes if return_nodes)."""
    if validate:
        check_tree(target_probs, draft_probs, draft_tokens, parents, rule)
    tokens, nodes = walk(ArrayTree(target_probs, draft_probs, draft_tokens, parents), rule, rng)
    return (tokens, nodes) if return_nodes else tokens


def uniforms_rng(rule: str, uniforms: Sequence[float]) -> Randomness:
    """The rule's coupling convention over N+1 uniforms (module docstring); a sibling-order variant has none."""
    if parse_rule(rule).order != "index":
        raise ValueError(f"rule={rule!r} draws its sibling order from the generator: it has no injected-uniforms "
                         "convention (declare uniforms=False)")  # fmt: skip
    return Sequential(uniforms) if rule == "sample_match" else Injected(uniforms)


def chain_parents(gamma: int) -> list[int]:
    """The parents of a chain of gamma drafts: node i's parent is i - 1."""
    return list(range(gamma))


def chain_length(parents: Sequence[int]) -> int:
    """The number of drafts of a chain tree (padding at the end allowed); ValueError if the tree is not a chain."""
    n = sum(1 for parent in parents if parent >= 0)
    if list(parents[:n]) != chain_parents(n) or any(parent >= 0 for parent in parents[n:]):
        raise ValueError(f"parents={list(parents)!r} is not a chain [0, 1, ..., n-1] followed by -1 padding")
    return n


def chain_as_tree(verify_chain: Callable) -> Callable:
    """A chain verifier (target_probs, draft_probs, draft_tokens, rng) -> tokens, called through the tree
    contract; it accepts chain trees only (padding at the end allowed)."""

    def verify(target_probs, draft_probs, draft_tokens, parents, rng, *, return_nodes=False, **kwargs):
        n = chain_length(parents)
        q = None if draft_probs is None else draft_probs[:n]
        tokens = verify_chain(target_probs[: n + 1], q, draft_tokens[:n], rng, **kwargs)
        return (tokens, list(range(1, len(tokens)))) if return_nodes else tokens

    return verify


def check_tree(target_probs, draft_probs, draft_tokens, parents, rule: str) -> None:
    """The contract's checks; each error names the argument and the value."""
    base = parse_rule(rule).base
    n = len(parents)
    if len(draft_tokens) != n:
        raise ValueError(f"draft_tokens has {len(draft_tokens)} entries but parents has {n}")
    if len(target_probs) != n + 1:
        raise ValueError(f"target_probs has {len(target_probs)} rows; expected N+1 = {n + 1}")
    if draft_probs is not None and len(draft_probs) != n:
        raise ValueError(f"draft_probs has {len(draft_probs)} rows; expected N = {n}")
    vocab_size = len(target_probs[0])
    real = [True] + [parent >= 0 for parent in parents]  # node 0 and the non-padding nodes
    for i, parent in enumerate(parents, start=1):
        if isinstance(parent, bool) or not isinstance(parent, int) or parent < -1 or parent >= i:
            raise ValueError(f"parents[{i - 1}]={parent!r}: node {i}'s parent must be -1 or a node in 0..{i - 1}")
        if parent >= 0 and not real[parent]:
            raise ValueError(f"parents[{i - 1}]={parent}: node {parent} is padding (its parent is -1)")
    for j in range(n + 1):
        if real[j]:
            check_distribution(f"target_probs[{j}]", target_probs[j], vocab_size)
    tree = ArrayTree(target_probs, draft_probs, draft_tokens, parents)
    for node in range(n + 1):
        seen = set()
        for c in tree.children(node):
            x = check_token(f"draft_tokens[{c - 1}]", draft_tokens[c - 1], vocab_size)
            if base in DISTINCT_SIBLINGS and x in seen:
                raise ValueError(f"draft_tokens[{c - 1}]={x} repeats a sibling's token; rule {base!r} needs them "
                                 "distinct")  # fmt: skip
            seen.add(x)
            if draft_probs is not None and base in USES_DRAFT_PROBS:
                check_distribution(f"draft_probs[{c - 1}]", draft_probs[c - 1], vocab_size)
                if draft_probs[c - 1][x] == 0:
                    raise ValueError(f"draft_tokens[{c - 1}]={x} has probability 0 in draft_probs[{c - 1}]")
