"""T1: the reference engine's law, proven in rational arithmetic by enumerating its own random choices."""

from __future__ import annotations

from fractions import Fraction
from itertools import product

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specref import exact, theory
from specref import strategies as sst
from specref.models import ContextFree

pytestmark = pytest.mark.exact


def _first_token_marginal(law: dict) -> dict:
    marginal: dict = {}
    for tokens, prob in law.items():
        marginal[tokens[0]] = marginal.get(tokens[0], 0) + prob
    return marginal


def _as_law(row) -> dict:
    return {x: p for x, p in enumerate(row) if p}


# Enumeration visits every draft path, V^g of them per cycle: keep V^g <= 256 (V up to 6, g up to 4).
MAX_VOCAB = {1: 6, 2: 6, 3: 6, 4: 4}


def _gamma_and_vocab(data, max_gamma: int = 4) -> tuple[int, int]:
    gamma = data.draw(sst.gammas(max_gamma=max_gamma), label="gamma")
    return gamma, data.draw(st.integers(1, MAX_VOCAB[gamma]), label="vocab_size")


@given(st.data())
def test_one_step_law_is_target(data):
    gamma, vocab_size = _gamma_and_vocab(data)
    target_probs, draft_probs = data.draw(sst.pairs(vocab_size, exact=True), label="target_probs, draft_probs")
    law = exact.cycle_law(ContextFree(target_probs), ContextFree(draft_probs), (), gamma)
    assert all(isinstance(prob, Fraction) for prob in law.values())
    assert sum(law.values()) == 1
    assert _first_token_marginal(law) == _as_law(target_probs)


@given(st.data())
def test_sequence_law_is_product_of_target_conditionals(data):
    gamma, vocab_size = _gamma_and_vocab(data, max_gamma=3)
    target, draft = data.draw(sst.context_models(vocab_size, exact=True), label="target, draft")
    n = data.draw(st.integers(1, 3), label="n")
    prefix = data.draw(st.lists(st.integers(0, target.vocab_size - 1), max_size=2).map(tuple), label="prefix")
    law = exact.sequence_law(target, draft, prefix, n, gamma)
    expected = {}
    for tokens in product(range(target.vocab_size), repeat=n):
        prob = Fraction(1)
        for i, token in enumerate(tokens):
            prob *= target(prefix + tokens[:i])[token]
        if prob:
            expected[tokens] = prob
    assert law == expected


@given(st.data())
def test_reject_rate_is_z_and_length_law_is_truncated_geometric(data):
    gamma, vocab_size = _gamma_and_vocab(data)
    target_probs, draft_probs = data.draw(sst.pairs(vocab_size, exact=True), label="target_probs, draft_probs")
    target, draft = ContextFree(target_probs), ContextFree(draft_probs)
    z = theory.rejection_mass(target_probs, draft_probs)
    a = theory.acceptance_rate(target_probs, draft_probs)
    assert a + z == 1
    for position, rate in enumerate(exact.reject_probabilities(target, draft, (), gamma)):
        assert rate == (z if rate is not None else None), f"position {position}"
        assert rate is not None or a == 0  # unreachable only if nothing is ever accepted
    length = exact.accepted_length_law(target, draft, (), gamma)
    assert [length[k] for k in range(gamma + 1)] == theory.accepted_length_law(a, gamma)
    assert exact.expected_tau(target, draft, (), gamma) == theory.expected_tau(a, gamma)


@given(st.data())
def test_context_dependent_tau_tail_matches_sum_formula(data):
    gamma, vocab_size = _gamma_and_vocab(data)
    target, draft = data.draw(sst.context_models(vocab_size, exact=True), label="target, draft")
    length = exact.accepted_length_law(target, draft, (), gamma)
    tail = [sum(length[j] for j in range(k, gamma + 1)) for k in range(gamma + 1)]
    assert tail == theory.accepted_at_least(target, draft, (), gamma)
    assert exact.expected_tau(target, draft, (), gamma) == theory.expected_tau_contextual(target, draft, (), gamma)
    first = exact.reject_probabilities(target, draft, (), gamma)[0]
    assert first == theory.rejection_mass(target(()), draft(()))


@given(st.data())
def test_chained_cycle_laws_equal_end_to_end_replay_of_generate(data):
    gamma = data.draw(sst.gammas(max_gamma=2), label="gamma")
    target, draft = data.draw(sst.context_models(exact=True, max_vocab=3), label="target, draft")
    n = data.draw(st.integers(1, 3), label="n")
    assert exact.sequence_law(target, draft, (), n, gamma) == exact.sequence_law(
        target, draft, (), n, gamma, method="replay"
    )


def test_correction_law_is_residual_given_fixed_drafts():
    p, q = (Fraction(1, 2), Fraction(1, 3), Fraction(1, 6)), (Fraction(1, 6), Fraction(1, 2), Fraction(1, 3))
    law = exact.verify_law([p, p], [q], [1])  # draft token 1: accept w.p. (1/3)/(1/2) = 2/3
    accept = Fraction(2, 3)
    residual = theory.residual(p, q)  # max(0, p - q) / Z = (1, 0, 0)
    expected = {(1, x): accept * p[x] for x in range(3)}
    expected.update({(x,): (1 - accept) * residual[x] for x in range(3) if residual[x]})
    assert law == expected


@pytest.mark.parametrize("gamma", [1, 3])
def test_edges_exactly(gamma):
    third = Fraction(1, 3)
    p = (third, third, third)
    one_hot = (Fraction(0), Fraction(1), Fraction(0))
    disjoint_q = (Fraction(0), Fraction(0), Fraction(1))
    disjoint_p = (Fraction(1, 2), Fraction(1, 2), Fraction(0))
    # p == q: Z = 0, every draft accepted, tau = g + 1
    assert exact.accepted_length_law(ContextFree(p), ContextFree(p), (), gamma)[gamma] == 1
    # disjoint supports: always rejected at position 1, correction from p
    law = exact.cycle_law(ContextFree(disjoint_p), ContextFree(disjoint_q), (), gamma)
    assert law == {(0,): Fraction(1, 2), (1,): Fraction(1, 2)}
    # one-hot target: every emitted token is that token
    law = exact.cycle_law(ContextFree(one_hot), ContextFree(p), (), gamma)
    assert _first_token_marginal(law) == {1: 1}
    # one-hot draft
    law = exact.cycle_law(ContextFree(p), ContextFree(one_hot), (), gamma)
    assert _first_token_marginal(law) == _as_law(p)


def _programs():
    """Programs whose last draw is returned (expanded at once), read (2 * token), followed by another draw, returned
    inside a list, or returned with a twin: final_draw must give each the law of plain enumeration."""
    weights = [Fraction(1, 6), Fraction(0), Fraction(1, 2), Fraction(1, 3)]

    def returned(rng):
        return (rng.accept(Fraction(2, 3)), rng.categorical(weights))

    def read(rng):
        return (rng.accept(Fraction(1, 4)), 2 * rng.categorical(weights))

    def drawn_after(rng):
        token = rng.categorical(weights)
        return (token, rng.accept(Fraction(1, 3)))

    def nested(rng):
        return ([rng.categorical(weights)],)

    def twice(rng):
        token = rng.categorical([3, 1])
        return (token, token)

    return [returned, read, drawn_after, nested, twice]


@pytest.mark.parametrize("program", _programs(), ids=lambda f: f.__name__)
def test_the_final_draw_shortcut_gives_the_law_of_plain_enumeration(program):
    plain = exact.enumerate_law(lambda rng: _hashable(program(rng)))
    assert exact.enumerate_law(lambda rng: _hashable(program(rng)), final_draw=True) == plain
    assert sum(plain.values()) == 1


def _hashable(outcome):
    return tuple(tuple(x) if isinstance(x, list) else x for x in outcome)
