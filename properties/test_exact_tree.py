"""T1: tree rules and block verification, proven in rational arithmetic by enumerating the reference engines.

Every lossless rule emits the target's law under the drafting scheme it assumes; the closed forms of the
acceptance laws hold exactly; the negative controls (a rule run under a scheme it does not assume) are lossy,
with their TV. Trees are Hypothesis-generated: width 1..3, depth 1..3, V <= 5, the vocabulary shrunk until the
enumeration stays small (`_vocab_for`).
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import assume, event, given, settings
from hypothesis import strategies as st

from specref import exact, exact_tree, theory_tree
from specref import strategies as sst
from specref.models import ContextFree, HashedContext
from specref.randomness import Injected
from specref.reference import block, chain, drafting, tree

pytestmark = pytest.mark.exact

LOSSLESS = [
    ("mss", "iid"),
    ("rsd", "without_replacement"),
    ("rsd", "dedup"),
    ("target_only", "topk"),
    ("target_only", "iid"),
    ("sample_match", "iid"),
    ("sample_match", "topk"),
]
#: A rule run under a drafting scheme it does not assume (VERIFIERS-style negative controls).
CONTROLS = [("mss", "dedup"), ("mss", "topk"), ("rsd", "topk")]
#: Enumeration budget per example (about one Python call each): keeps the tier at a few seconds per rule.
BUDGET = 3000


def _cost(shape, vocab_size: int) -> int:
    """Paths the node-by-node enumeration visits, roughly: V^K drafts times K + V outcomes per node and context."""
    here = vocab_size ** len(shape) * (len(shape) + vocab_size)
    return here + vocab_size * sum(_cost(child, vocab_size) for child in shape)


def _widest(shape) -> int:
    return max([len(shape), *map(_widest, shape)])


def _vocab_for(shape, max_vocab: int = 5) -> int:
    vocab_size = max_vocab
    while vocab_size > 2 and _cost(shape, vocab_size) > BUDGET:
        vocab_size -= 1
    return vocab_size


def _models(data, vocab_size: int):
    if data.draw(st.booleans(), label="context-free"):
        p, q = data.draw(sst.pairs(vocab_size, exact=True), label="target_probs, draft_probs")
        return ContextFree(p), ContextFree(q)
    return data.draw(sst.context_models(vocab_size, exact=True), label="target, draft")


@pytest.mark.parametrize("rule, scheme", LOSSLESS)
@settings(max_examples=10)
@given(data=st.data())
def test_tree_cycle_law_is_target_law(rule, scheme, data):
    shape = data.draw(sst.tree_shapes(), label="shape")
    target, draft = _models(data, _vocab_for(shape))
    event(f"depth {drafting.shape_depth(shape)}, widest {_widest(shape)}, V {target(()).__len__()}")
    law = exact_tree.tree_cycle_law(target, draft, (), shape, scheme, rule)
    assert all(isinstance(prob, Fraction) for prob in law.values()) and sum(law.values()) == 1
    assert exact_tree.tv_from_target(law, target, ()) == 0


@settings(max_examples=10)
@given(data=st.data())
def test_block_law_is_target_law_and_tail_is_expected_b(data):
    gamma = data.draw(st.integers(1, 3), label="gamma")
    target, draft = _models(data, {1: 5, 2: 4, 3: 3}[gamma])
    law = exact_tree.block_cycle_law(target, draft, (), gamma)
    assert sum(law.values()) == 1 and exact_tree.tv_from_target(law, target, ()) == 0
    length = exact_tree.accepted_length_law(law)
    for k in range(1, gamma + 1):  # P(tau >= k) = E_q[b_k]
        assert sum(length.get(j, 0) for j in range(k, gamma + 1)) == theory_tree.block_tail(target, draft, (), k)


def test_block_paper_toy_numbers():
    """Sun et al. 2025: p = (1/3, 2/3), q = (2/3, 1/3), g = 2; expected accepted drafts 10/9 (token), 11/9 (block)."""
    p, q = ContextFree([Fraction(1, 3), Fraction(2, 3)]), ContextFree([Fraction(2, 3), Fraction(1, 3)])
    token = exact.accepted_length_law(p, q, (), 2)
    assert sum(k * prob for k, prob in token.items()) == Fraction(10, 9)
    assert exact_tree.expected_accepted(exact_tree.block_cycle_law(p, q, (), 2)) == Fraction(11, 9)


@settings(max_examples=15)
@given(data=st.data())
def test_mss_per_node_acceptance_closed_form(data):
    """P(accept at a node with K i.i.d. children) = 1 - prod_k (1 - sum min(r_k, q))."""
    width = data.draw(st.integers(1, 3), label="K")
    p, q = data.draw(sst.pairs(data.draw(st.integers(1, 5), label="V"), exact=True), label="p, q")
    shape = ((),) * width
    accepted = exact_tree.root_acceptance(ContextFree(p), ContextFree(q), (), shape, "iid", "mss")
    assert accepted == theory_tree.mss_node_acceptance(p, q, width)


@settings(max_examples=10)
@given(data=st.data())
def test_deterministic_tree_expected_accepted_is_sum_of_path_probabilities(data):
    """target_only (and sample_match, equal in law) on top-k trees: E[accepted] = sum_v p(path to v)."""
    shape = data.draw(sst.tree_shapes(), label="shape")
    target, draft = _models(data, 5)  # top-k drafting has no randomness: V costs little
    _, _, tokens, parents = drafting.draft_tree(target, draft, (), shape, "topk", rng=None)
    paths = {}
    for i, (token, parent) in enumerate(zip(tokens, parents), start=1):
        paths[i] = (paths[parent] if parent else ()) + (token,)
    expected = theory_tree.deterministic_expected_accepted(target, (), paths.values())
    for rule in ("target_only", "sample_match"):
        law = exact_tree.tree_cycle_law(target, draft, (), shape, "topk", rule)
        assert exact_tree.expected_accepted(law) == expected, rule


def _generic_rows(data, vocab_size: int):
    """Full-support rows with integer weights 1..50: no coincidences of measure zero are likely."""
    weights = st.lists(st.integers(1, 50), min_size=vocab_size, max_size=vocab_size)
    p, q = data.draw(weights, label="p weights"), data.draw(weights, label="q weights")
    return [Fraction(w, sum(p)) for w in p], [Fraction(w, sum(q)) for w in q]


@pytest.mark.parametrize("rule", ["mss", "rsd"])
@settings(max_examples=8)
@given(data=st.data())
def test_top_k_children_with_draft_probabilities_are_lossy(rule, data):
    """MSS on deterministic top-k children, and top-k verified with without-replacement probabilities: lossy on
    every generic (full-support) instance drawn, V >= 2, any star of 1..3 children."""
    vocab_size = data.draw(st.integers(2, 5), label="V")
    p, q = _generic_rows(data, vocab_size)
    assume(p != q or max(p) < 1)
    shape = ((),) * data.draw(st.integers(1, 3), label="K")
    law = exact_tree.tree_cycle_law(ContextFree(p), ContextFree(q), (), shape, "topk", rule)
    assert exact_tree.tv_from_target(law, ContextFree(p), ()) > 0


@settings(max_examples=8)
@given(data=st.data())
def test_merged_duplicate_draws_verified_as_iid_are_lossy(data):
    """MSS on i.i.d. draws with duplicates merged. Merging skips the residual update of a repeated draw, so the
    law changes when that update matters: three draws (a repeat can precede a third sibling) and a first
    residual r_1 = norm((p - q)_+) that the next update changes (r_2 != r_1)."""
    vocab_size = data.draw(st.integers(3, 4), label="V")
    p, q = _generic_rows(data, vocab_size)
    r1 = theory_tree.normalised_residual(p, q)
    assume(r1 is not None and theory_tree.normalised_residual(r1, q) != r1)
    law = exact_tree.tree_cycle_law(ContextFree(p), ContextFree(q), (), ((), (), ()), "dedup", "mss")
    assert exact_tree.tv_from_target(law, ContextFree(p), ()) > 0


def test_negative_controls_worked_instance():
    """Stated TVs. Top-k, V = 2, p = (1/2, 1/2), q = (3/4, 1/4): with one child (token 0) or two (0, then 1), both
    rules accept 0 with min(1, p(0)/q(0)) = 2/3 and otherwise emit 1, so the first token is (2/3, 1/3): TV 1/6.
    Merged duplicates: the TV of one instance, computed by enumeration (the proof of lossiness is TV > 0)."""
    half = Fraction(1, 2)
    p_top, q_top = ContextFree([half, half]), ContextFree([Fraction(3, 4), Fraction(1, 4)])
    for rule in ("mss", "rsd"):
        for shape in (((),), ((), ())):
            law = exact_tree.tree_cycle_law(p_top, q_top, (), shape, "topk", rule)
            assert exact_tree.first_token_law(law) == {0: Fraction(2, 3), 1: Fraction(1, 3)}
            assert exact_tree.tv_from_target(law, p_top, ()) == Fraction(1, 6)
    p = ContextFree([Fraction(1, 10), Fraction(5, 10), Fraction(4, 10)])
    q = ContextFree([Fraction(6, 10), Fraction(3, 10), Fraction(1, 10)])
    merged = exact_tree.tree_cycle_law(p, q, (), ((), (), ()), "dedup", "mss")
    iid = exact_tree.tree_cycle_law(p, q, (), ((), (), ()), "iid", "mss")
    assert exact_tree.tv_from_target(iid, p, ()) == 0
    tv = exact_tree.tv_from_target(merged, p, ())
    assert tv > 0 and tv == MERGED_TV


#: The merged-duplicates TV of the worked instance, as enumerated (stated for the record; lossiness is tv > 0).
MERGED_TV = Fraction(14, 125)


def test_node_composition_equals_end_to_end_replay():
    target, draft = HashedContext(3, 7, zero_fraction=0.0), HashedContext(3, 8, zero_fraction=0.3)
    for rule, scheme in LOSSLESS + CONTROLS:
        shape = ((), ((),)) if scheme != "topk" else (((), ()), ((),))
        nodes = exact_tree.tree_cycle_law(target, draft, (1,), shape, scheme, rule)
        assert nodes == exact_tree.tree_cycle_law(target, draft, (1,), shape, scheme, rule, method="replay")


def test_lazy_drafting_equals_drafting_the_whole_tree_first():
    """The exact laws draft lazily (only the walked groups); verifying the eagerly drafted arrays has the same law."""
    target, draft = HashedContext(2, 3, zero_fraction=0.0), HashedContext(2, 4, zero_fraction=0.0)
    shape = (((),), ())
    for rule, scheme in [("mss", "iid"), ("rsd", "without_replacement"), ("target_only", "iid")]:

        def eager(rng, rule=rule, scheme=scheme):
            arrays = drafting.draft_tree(target, draft, (), shape, scheme, rng)
            return tuple(tree.verify_tree(*arrays, rng, rule=rule, validate=False))

        assert exact.enumerate_law(eager) == exact_tree.tree_cycle_law(target, draft, (), shape, scheme, rule)


@settings(max_examples=15)
@given(data=st.data())
def test_chain_trees_are_the_chain_rules(data):
    """On parents = [0, 1, ..., g-1], mss and rsd have the law of chain.verify, target_only that of its point-mass
    rule (draft_probs=None), sample_match the target's law of the first token; and chain_as_tree is chain.verify."""
    gamma = data.draw(st.integers(1, 3), label="gamma")
    vocab_size = data.draw(st.integers(1, 4), label="V")
    rows = [data.draw(sst.pairs(vocab_size, exact=True), label=f"p, q {i}") for i in range(gamma + 1)]
    target_probs, draft_probs = [p for p, _ in rows], [q for _, q in rows[:gamma]]
    tokens = [next(x for x, w in enumerate(q) if w) for q in draft_probs]
    parents = tree.chain_parents(gamma)
    for rule in ("mss", "rsd"):
        assert exact_tree.verify_tree_law(target_probs, draft_probs, tokens, parents, rule) == exact.verify_law(
            target_probs, draft_probs, tokens
        )
    point_mass = exact.verify_law(target_probs, None, tokens)
    assert exact_tree.verify_tree_law(target_probs, None, tokens, parents, "target_only") == point_mass
    as_tree = tree.chain_as_tree(chain.verify)
    assert exact.enumerate_law(lambda rng: tuple(as_tree(target_probs, draft_probs, tokens, parents + [-1], rng))) == (
        exact.verify_law(target_probs, draft_probs, tokens)
    )


def test_chain_trees_couple_with_chain_verify_token_for_token():
    """Floats and injected uniforms: mss, rsd and target_only on a chain are chain.verify's IEEE operations."""
    import numpy as np

    rng = np.random.Generator(np.random.PCG64(5))
    for _ in range(300):
        gamma, vocab_size = int(rng.integers(1, 5)), int(rng.integers(2, 7))
        target_probs = rng.dirichlet(np.full(vocab_size, 0.7), size=gamma + 1).tolist()
        draft_probs = rng.dirichlet(np.full(vocab_size, 0.7), size=gamma).tolist()
        tokens = [int(rng.choice(vocab_size, p=np.array(q) / sum(q))) for q in draft_probs]
        uniforms = rng.random(gamma + 1).tolist()
        parents = tree.chain_parents(gamma)
        expected = chain.verify(target_probs, draft_probs, tokens, Injected(uniforms), validate=False)
        for rule in ("mss", "rsd"):
            got = tree.verify_tree(target_probs, draft_probs, tokens, parents, Injected(uniforms), rule=rule)
            assert got == expected
        expected = chain.verify(target_probs, None, tokens, Injected(uniforms), validate=False)
        got = tree.verify_tree(target_probs, None, tokens, parents, Injected(uniforms), rule="target_only")
        assert got == expected


def test_accepted_nodes_are_a_root_to_node_path():
    target, draft = HashedContext(2, 1, zero_fraction=0.0), HashedContext(2, 2, zero_fraction=0.0)
    shape = (((), ()), ((),), ())  # every draft path of the eager tree: 2^6 of them

    def program(rng):
        arrays = drafting.draft_tree(target, draft, (), shape, "iid", rng)
        tokens, nodes = tree.verify_tree(*arrays, rng, rule="mss", return_nodes=True)
        parents = arrays[3]
        assert len(tokens) == len(nodes) + 1 and tokens[:-1] == [arrays[2][n - 1] for n in nodes]
        assert all(parents[n - 1] == (nodes[k - 1] if k else 0) for k, n in enumerate(nodes))
        return len(nodes)

    assert set(exact.enumerate_law(program)) == {0, 1, 2}


@pytest.mark.parametrize(
    "parents, tokens, rule, message",
    [
        ([0, 2], [0, 1], "mss", r"parents\[1\]=2"),
        ([-1, 1], [0, 1], "mss", r"node 1 is padding"),
        ([0, 0], [1, 1], "rsd", r"draft_tokens\[1\]=1 repeats"),
        ([0, 0], [0, 5], "mss", r"draft_tokens\[1\]=5 is out of range"),
        ([0, 0], [0, 1], "typical", r"rule='typical'"),
    ],
)
def test_tree_contract_errors_name_the_argument(parents, tokens, rule, message):
    p = [Fraction(1, 2), Fraction(1, 2)]
    with pytest.raises(ValueError, match=message):
        tree.verify_tree([p] * 3, [p, p], tokens, parents, Injected([0.5] * 3), rule=rule)


def test_zero_draft_probability_and_non_chain_are_rejected():
    p, q = [Fraction(1, 2), Fraction(1, 2)], [Fraction(1), Fraction(0)]
    with pytest.raises(ValueError, match=r"draft_tokens\[0\]=1 has probability 0 in draft_probs\[0\]"):
        tree.verify_tree([p, p], [q], [1], [0], Injected([0.5] * 2), rule="mss")
    with pytest.raises(ValueError, match=r"parents=\[0, 0\] is not a chain"):
        tree.chain_as_tree(chain.verify)([p] * 3, [p, p], [0, 1], [0, 0], Injected([0.5] * 3))
    with pytest.raises(ValueError, match="draft_tokens has 1 entries but parents has 2"):
        tree.verify_tree([p] * 3, None, [0], [0, 0], Injected([0.5] * 3), rule="target_only")


def test_block_uses_the_stated_uniforms():
    """Coupling convention: u_{i-1} tests eta_i for i = 1..g, u_g draws the final token."""
    p, q = [0.25, 0.75], [0.75, 0.25]
    b, h = block.weights([p, p, p], [q, q], [1, 0])
    assert b == [1, 1, 1 / 3] and h[2] == 1 / 3
    # h_1 = r_1 / r_1 = 1 (b_1 = 1): the first test passes for any u < 1; u_1 = 0.5 > h_2 fails; tau = 1.
    tokens = block.verify_block([p, p, p], [q, q], [1, 0], Injected([0.99, 0.5, 0.0]))
    assert tokens[0] == 1 and len(tokens) == 2 and tokens[1] == 1  # residual (p - q)_+ = (0, 1/2)
