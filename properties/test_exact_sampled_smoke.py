"""T0/T1: the sampled engine and the enumerated law run the same code; floats and edges behave as documented."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specref import exact, reference
from specref import strategies as sst
from specref.models import ContextFree, as_floats
from specref.randomness import Injected, Sampled

pytestmark = pytest.mark.exact


@given(st.data())
def test_sampled_outcomes_have_nonzero_exact_probability(data):
    gamma = data.draw(sst.gammas(max_gamma=3), label="gamma")
    target, draft = data.draw(sst.context_models(exact=True, max_vocab=6 if gamma < 3 else 4), label="target, draft")
    seed = data.draw(sst.seeds(), label="seed")
    law = exact.cycle_law(target, draft, (), gamma)
    rng = Sampled(seed)
    for _ in range(200):
        assert tuple(reference.cycle(target, draft, (), gamma, rng)) in law
    float_rng = Sampled(seed)
    for _ in range(200):
        assert tuple(reference.cycle(as_floats(target), as_floats(draft), (), gamma, float_rng)) in law


def test_same_seed_same_tokens_and_different_seed_differs():
    target, draft = ContextFree([0.5, 0.3, 0.2]), ContextFree([0.2, 0.3, 0.5])
    run = lambda seed: reference.generate(target, draft, (), 200, 3, Sampled(seed))  # noqa: E731
    assert run(7) == run(7)
    assert run(7) != run(8)


def test_zero_uniform_never_accepts_a_zero_probability_token():
    # draft 0 has p = 0; u = 0 must still reject (strict u < p/q), and the correction avoids token 0.
    tokens = reference.verify([[0.0, 1.0], [0.5, 0.5]], [[0.5, 0.5]], [0], Injected([0.0, 0.0]))
    assert tokens == [1]


def test_numerically_empty_residual_falls_back_to_target_row():
    p = [0.3, 0.7]
    q = [0.30000000000000004, 0.7]  # p(0) < q(0) by one ulp, yet max(0, p - q) is all zero
    assert all(max(0.0, a - b) == 0 for a, b in zip(p, q))
    tokens = reference.verify([p, p], [q], [0], Injected([0.9999999999999999, 0.5]))
    assert tokens == [1]  # ratio 0.9999999999999998 < u: rejected; correction from p at u = 0.5
    law = exact.verify_law([p, p], [q], [0])
    assert all(0 <= t < 2 for outcome in law for t in outcome)
    assert abs(sum(law.values()) - 1) < 1e-12


def test_point_mass_drafts_accept_with_target_probability():
    half = Fraction(1, 2)
    p = (Fraction(1, 4), half, Fraction(1, 4))
    law = exact.verify_law([p, p], None, [1])
    assert sum(prob for t, prob in law.items() if len(t) == 2) == half  # accept w.p. p(1)
    assert {t: prob for t, prob in law.items() if len(t) == 1} == {(0,): Fraction(1, 4), (2,): Fraction(1, 4)}
