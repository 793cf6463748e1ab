"""T0: every bad input gets a ValueError naming the argument and the offending value."""

from __future__ import annotations

import math

import pytest

from specref import exact, reference, theory
from specref.models import ContextFree, HashedContext, MarkovTable
from specref.randomness import Sampled

pytestmark = pytest.mark.exact

P = [0.5, 0.5]


@pytest.mark.parametrize(
    "target_probs, draft_probs, draft_tokens, message",
    [
        ([[-0.1, 1.1], P], [P], [0], r"target_probs\[0\]\[0\]=-0.1: probabilities must be >= 0"),
        ([[math.nan, 1.0], P], [P], [0], r"target_probs\[0\]\[0\]=nan: probabilities must be finite"),
        ([P, P], [[0.5, 0.6]], [0], r"draft_probs\[0\] sums to 1.1.*within 1e-06"),
        ([P, P], [[0.5, 0.5, 0.0]], [0], r"draft_probs\[0\] has 3 entries; expected vocab size 2"),
        ([P], [P], [0], r"target_probs has 1 rows; expected g\+1 = 2"),
        ([P, P], [P, P], [0], r"draft_probs has 2 rows; expected g = 1"),
        ([P, P], [P], [2], r"draft_tokens\[0\]=2 is out of range for vocab size 2"),
        ([P, P], [[1.0, 0.0]], [1], r"draft_tokens\[0\]=1 has draft probability 0 .* impossible"),
        ([P], [], [], r"gamma=0"),
    ],
)
def test_verify_rejects_bad_input(target_probs, draft_probs, draft_tokens, message):
    with pytest.raises(ValueError, match=message):
        reference.verify(target_probs, draft_probs, draft_tokens, Sampled(0))


def test_exact_rows_must_sum_to_exactly_one():
    from fractions import Fraction

    with pytest.raises(ValueError, match="exact rows must sum to exactly 1"):
        exact.verify_law([[Fraction(1, 2), Fraction(1, 3)]] * 2, None, [0])


def test_model_level_errors():
    target = ContextFree(P)
    with pytest.raises(ValueError, match="gamma=0"):
        exact.cycle_law(target, target, (), 0)
    with pytest.raises(ValueError, match=r"prefix\[1\]=5 is out of range for vocab size 2"):
        reference.generate(target, target, (0, 5), 2, 1, Sampled(0))
    with pytest.raises(ValueError, match="n=0"):
        reference.generate(target, target, (), 0, 1, Sampled(0))
    with pytest.raises(ValueError, match="draft_probs has 3 entries"):
        theory.acceptance_rate(P, [0.2, 0.3, 0.5])
    with pytest.raises(ValueError, match="a=1.5"):
        theory.expected_tau(1.5, 2)
    with pytest.raises(ValueError, match="Z = 0"):
        theory.residual(P, P)
    with pytest.raises(ValueError, match="vocab_size=0"):
        HashedContext(0)
    with pytest.raises(ValueError, match=r"different vocab sizes \[2, 3\]"):
        MarkovTable(1, {(0,): P, (1,): [0.2, 0.3, 0.5]})
    with pytest.raises(ValueError, match="order=-1"):
        MarkovTable(-1, {(): P})
