"""T1: SpecTr's K-SEQ and traversal verification, proven in rational arithmetic by enumerating the reference engine.

K-SEQ (Sun et al., NeurIPS 2023) on i.i.d. children and traversal verification (Weng et al., NeurIPS 2025) on children
drawn without replacement (and i.i.d. draws de-duplicated) emit the target's law exactly; K-SEQ's node acceptance is
its closed form 1 - (1 - beta(rho))^K at a threshold that keeps every residual weight >= 0 and is within the
bisection's width of the smallest such; one child is exact speculative sampling. Traversal is block verification on a
chain and recursive rejection sampling on a star. Both accept differently from the rules they extend (power: the
rule diagnosis can tell them apart).
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specref import exact_tree
from specref import strategies as sst
from specref.models import ContextFree, HashedContext
from specref.reference import kseq
from specref.reference.drafting import chain_shape

pytestmark = pytest.mark.exact


def _models(data, vocab_size: int):
    if data.draw(st.booleans(), label="context-free"):
        p, q = data.draw(sst.pairs(vocab_size, exact=True), label="target_probs, draft_probs")
        return ContextFree(p), ContextFree(q)
    return data.draw(sst.context_models(vocab_size, exact=True), label="target, draft")


@pytest.mark.parametrize("rule, scheme", [("kseq", "iid"), ("traversal", "without_replacement"),
                                          ("traversal", "dedup")])  # fmt: skip
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_cycle_law_is_target_law(rule, scheme, data):
    shape = data.draw(sst.tree_shapes(max_width=2), label="shape")
    target, draft = _models(data, 3)
    law = exact_tree.tree_cycle_law(target, draft, (), shape, scheme, rule)
    assert all(isinstance(prob, Fraction) for prob in law.values()) and sum(law.values()) == 1
    assert exact_tree.tv_from_target(law, target, ()) == 0


@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_kseq_node_acceptance_closed_form_and_threshold(data):
    """P(accept at the root) = 1 - (1 - beta(rho))^K; rho keeps the residual a law (c(rho) <= rho) and is within
    (K - 1) 2^-STEPS of rho*, below which it would not (when rho > 1)."""
    width = data.draw(st.integers(1, 4), label="K")
    p, q = data.draw(sst.pairs(data.draw(st.integers(2, 5), label="V"), exact=True), label="p, q")
    rho = kseq.threshold(p, q, width)
    assert isinstance(rho, Fraction) and 1 <= rho <= width and kseq.covered(p, q, width, rho)
    if rho > 1:
        assert not kseq.covered(p, q, width, rho - Fraction(width - 1, 2**kseq.STEPS))
    assert all(w >= 0 for w in kseq.residual_weights(p, q, width, rho))
    accepted = exact_tree.root_acceptance(ContextFree(p), ContextFree(q), (), ((),) * width, "iid", "kseq")
    assert accepted == 1 - (1 - kseq.beta(p, q, rho)) ** width


@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_kseq_with_one_child_is_exact_speculative_sampling(data):
    target, draft = _models(data, 4)
    shape = chain_shape(data.draw(st.integers(1, 3), label="gamma"))
    assert exact_tree.tree_cycle_law(target, draft, (), shape, "iid", "kseq") == exact_tree.tree_cycle_law(
        target, draft, (), shape, "iid", "mss"
    )


@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_traversal_is_block_on_a_chain_and_rsd_on_a_star(data):
    target, draft = _models(data, 3)
    gamma = data.draw(st.integers(1, 3), label="gamma")
    chain = exact_tree.tree_cycle_law(target, draft, (), chain_shape(gamma), "without_replacement", "traversal")
    assert chain == exact_tree.block_cycle_law(target, draft, (), gamma)
    star = ((),) * data.draw(st.integers(1, 3), label="K")
    assert exact_tree.tree_cycle_law(target, draft, (), star, "without_replacement", "traversal") == (
        exact_tree.tree_cycle_law(target, draft, (), star, "without_replacement", "rsd")
    )


def test_traversal_law_over_drafted_trees_equals_end_to_end_replay():
    """The whole-tree rule's default method (the drafted tree's law, then the walk on each tree held fixed) against
    the end-to-end replay of the cycle, on ragged shapes in two vocabularies, context-free and context-dependent."""
    p = ContextFree([Fraction(1, 2), Fraction(3, 10), Fraction(1, 5)])
    q = ContextFree([Fraction(1, 5), Fraction(3, 10), Fraction(1, 2)])
    target, draft = HashedContext(3, 7, zero_fraction=0.0), HashedContext(3, 8, zero_fraction=0.3)
    for models in ((p, q), (target, draft)):
        for shape in [(((), ()), ((),)), ((((),),), ()), ((), (), ())]:
            trees = exact_tree.tree_cycle_law(*models, (), shape, "without_replacement", "traversal")
            assert trees == exact_tree.tree_cycle_law(*models, (), shape, "without_replacement", "traversal",
                                                      method="replay")  # fmt: skip
            assert sum(trees.values()) == 1
    mss = exact_tree.tree_cycle_law(target, draft, (1,), ((), ((),)), "iid", "mss", method="trees")
    assert mss == exact_tree.tree_cycle_law(target, draft, (1,), ((), ((),)), "iid", "mss")  # any rule
    with pytest.raises(ValueError, match="method='whole'"):
        exact_tree.tree_cycle_law(p, q, (), ((),), "iid", "mss", method="whole")


def test_each_accepts_otherwise_than_the_rule_it_extends():
    """Power for the rule diagnosis: on fixed rows K-SEQ's root acceptance differs from SpecInfer's MSS on 3 i.i.d.
    children, and traversal's expected accepted drafts from RSD's on a depth-2 tree, by more than 0.005."""
    p = ContextFree([Fraction(1, 2), Fraction(3, 10), Fraction(1, 5)])
    q = ContextFree([Fraction(1, 5), Fraction(3, 10), Fraction(1, 2)])
    star = ((), (), ())
    k_seq = exact_tree.root_acceptance(p, q, (), star, "iid", "kseq")
    mss = exact_tree.root_acceptance(p, q, (), star, "iid", "mss")
    assert abs(k_seq - mss) > Fraction(1, 200), (k_seq, mss)
    shape = (((), ()), ((),))
    traversal = exact_tree.tree_cycle_law(p, q, (), shape, "without_replacement", "traversal")
    rsd = exact_tree.tree_cycle_law(p, q, (), shape, "without_replacement", "rsd")
    assert exact_tree.expected_accepted(traversal) - exact_tree.expected_accepted(rsd) > Fraction(1, 200)
