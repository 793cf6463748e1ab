"""The harness's expectations, proven exactly: the rows a verifier is given, the laws computed from them (a fourth
derivation, checked here against enumeration), and the checks planned before any data.

Exact tier: no randomness, nothing can flake.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specref import exact, exact_tree
from specref.conformance.chain import laws
from specref.conformance.chain.plan import plan_for
from specref.conformance.chain.scenarios import SCENARIOS, context_free, markov
from specref.conformance.engine import precision

pytestmark = pytest.mark.exact

DTYPES = (torch.float32, torch.bfloat16, torch.float16)


# --- the rows as given ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_scenario_is_given_as_exact_rows_that_sum_to_one(dtype):
    for scenario in SCENARIOS.values():
        given_scenario = scenario.given(dtype)
        for name in ("target", "draft"):
            rows, original = getattr(given_scenario, name), getattr(scenario, name)
            assert (precision.round_to(rows, dtype) == rows).all(), (scenario.name, name)
            assert all(precision.exact_sum(row) == 1 for row in rows), (scenario.name, name)
            assert ((rows > 0) <= (original > 0)).all(), "rounding may only shrink a support"
    equal = SCENARIOS["cf_equal_g8"].given(dtype)
    assert np.array_equal(equal.target, equal.draft), "p == q stays p == q in every dtype"


@settings(max_examples=60)
@given(
    weights=st.lists(st.floats(0.0, 1.0, allow_subnormal=False), min_size=2, max_size=40).filter(lambda w: sum(w) > 0),
    dtype=st.sampled_from(DTYPES),
)
def test_any_row_is_given_summing_to_exactly_one(weights, dtype):
    row = np.asarray(weights) / np.sum(weights)
    out = precision.as_given(row[None, :], dtype)[0]
    assert precision.exact_sum(out) == 1
    assert (precision.round_to(out, dtype) == out).all()
    assert ((out > 0) <= (row > 0)).all()


def test_bf16_laws_are_those_of_the_given_rows():
    """cf_near_equal_g4 in bf16: p and q mostly round to the same values, so Z is that of the rounded rows."""
    scenario = SCENARIOS["cf_near_equal_g4"]
    bf16 = scenario.given(torch.bfloat16)
    z_given = float(laws.rejection_mass(bf16)[0])
    assert z_given == pytest.approx(float(np.clip(bf16.target - bf16.draft, 0, None).sum()), abs=0)
    assert z_given != pytest.approx(float(laws.rejection_mass(scenario)[0]), rel=0.05)  # the float64 Z is not it


def test_rejection_mass_is_never_negative_when_p_equals_q_up_to_an_ulp():
    """p == q with a float sum of 1 + 1 ulp once made Z = -2e-16 and crashed the strata check."""
    row = np.full(7, 1 / 7)
    assert row.sum() != 1.0
    scenario = context_free("eq", "p == q", row, row.copy(), 3)
    for rule in laws.RULES:
        assert (laws.rejection_mass(scenario, rule) >= 0).all()
        assert (laws.length_law(scenario, 0, 3, rule) >= 0).all()


# --- laws.py against enumeration ------------------------------------------------------------------------------


def _fraction_rows(rng, v, count, zeros=0.3) -> list[list[Fraction]]:
    rows = []
    for _ in range(count):
        w = [int(x) for x in rng.integers(1, 9, size=v)]
        for j in range(v):
            if rng.random() < zeros:
                w[j] = 0
        if not any(w):
            w[int(rng.integers(v))] = 1
        rows.append([Fraction(x, sum(w)) for x in w])
    return rows


def _match_cycle(target, draft, prefix, gamma):
    """Sample-and-match, written independently of laws.py: x_i ~ q, y_i ~ p; keep while y_i == x_i, emit y_i."""

    def program(rng):
        context, emitted = tuple(prefix), []
        for _ in range(gamma):
            x = rng.categorical(draft(context))
            y = rng.categorical(target(context))
            emitted.append(y)
            if y != x:
                return tuple(emitted)
            context += (x,)
        return tuple(emitted) + (rng.categorical(target(context)),)

    return exact.enumerate_law(program)


def _cycle_law(rule):
    """The exact law of one cycle under `rule`, each written independently of laws.py: the reference engines
    (specref.reference.chain, specref.reference.block) enumerated in Fractions, and sample-and-match above."""
    return {"exact": exact.cycle_law, "match": _match_cycle, "block": exact_tree.block_cycle_law}[rule]


def _laws_from_cycle(law, v, gamma, state_of):
    """first-token law, accepted-length law, and per-state correction and bonus laws from an exact cycle law."""
    first, length = np.zeros(v), np.zeros(gamma + 1)
    correction, bonus = {}, {}
    for tokens, pr in law.items():
        pr = float(pr)
        first[tokens[0]] += pr
        accepted = len(tokens) - 1
        length[accepted] += pr
        table = bonus if accepted == gamma else correction
        state = state_of(tokens[:accepted])
        table.setdefault(state, np.zeros(v))[tokens[-1]] += pr
    return first, length, correction, bonus


@pytest.mark.parametrize("rule", sorted(laws.RULES))
@pytest.mark.parametrize("seed", range(4))
def test_laws_match_enumeration_context_free(rule, seed):
    rng = np.random.default_rng(seed)
    v, gamma = 4, 3
    p, q = _fraction_rows(rng, v, 2)
    scenario = context_free("t", "", [float(x) for x in p], [float(x) for x in q], gamma)
    cycle = _cycle_law(rule)(lambda c: p, lambda c: q, (0,), gamma)
    first, length, correction, bonus = _laws_from_cycle(cycle, v, gamma, lambda accepted: 0)
    assert np.allclose(first, scenario.target[0], atol=1e-12), "the output law is p under every rule"
    assert np.allclose(length, laws.length_law(scenario, 0, gamma, rule), atol=1e-12)
    if 0 in correction:
        law = correction[0] / correction[0].sum()
        assert np.allclose(law, laws.correction_law(scenario, rule)[0], atol=1e-12)
    if 0 in bonus:
        assert np.allclose(bonus[0] / bonus[0].sum(), scenario.target[0], atol=1e-12)
    assert float(laws.rejection_mass(scenario, rule)[0]) == pytest.approx(length[0], abs=1e-12)  # P(A = 0) = Z


@pytest.mark.parametrize("rule", sorted(laws.RULES))
@pytest.mark.parametrize("seed", range(3))
def test_laws_match_enumeration_markov(rule, seed):
    rng = np.random.default_rng(100 + seed)
    v, gamma, start = 3, 2, 1
    target, draft = _fraction_rows(rng, v, v, zeros=0.25), _fraction_rows(rng, v, v, zeros=0.0)
    scenario = markov("m", "", [[float(x) for x in r] for r in target], [[float(x) for x in r] for r in draft], gamma,
                      start=start)  # fmt: skip
    model_p, model_q = (lambda c: target[c[-1]]), (lambda c: draft[c[-1]])
    cycle = _cycle_law(rule)(model_p, model_q, (start,), gamma)
    first, length, correction, bonus = _laws_from_cycle(cycle, v, gamma, lambda acc: acc[-1] if acc else start)
    assert np.allclose(first, scenario.target[start], atol=1e-12)
    assert np.allclose(length, laws.length_law(scenario, start, gamma, rule), atol=1e-12)
    expected_correction = laws.correction_law(scenario, rule)
    for state, counts in correction.items():
        assert np.allclose(counts / counts.sum(), expected_correction[state], atol=1e-12), state
    for state, counts in bonus.items():
        assert np.allclose(counts / counts.sum(), scenario.target[state], atol=1e-12), state


# --- the plan: checks that cannot fail take no alpha ------------------------------------------------------------


@pytest.mark.parametrize(
    "scenario, kind, reason",
    [
        ("cf_disjoint_g2", "correction_law", "same statistic as first_token_law"),
        ("cf_disjoint_g2", "reject_rate", "implied by T0"),
        ("cf_one_hot_target_g3", "first_token_law", "implied by T0"),
        ("cf_one_hot_target_g3", "bonus_law", "implied by T0"),
        ("cf_equal_g8", "correction_law", "no rejection is possible"),
        ("large_v151936_g1", "accepted_length_law", "same statistic as reject_rate"),
    ],
)
def test_checks_that_cannot_fail_are_not_planned(scenario, kind, reason):
    plan = plan_for(SCENARIOS[scenario])
    assert kind not in plan.tested
    assert reason in plan.skipped[kind]


def test_a_zero_reject_rate_is_a_certain_check():
    plan = plan_for(SCENARIOS["cf_equal_g8"])
    assert plan.certain == ["reject_rate"] and "reject_rate" not in plan.tested


@pytest.mark.parametrize("rule", sorted(laws.RULES))
@pytest.mark.parametrize("dtype", (torch.float64, *DTYPES), ids=str)
def test_every_planned_law_has_a_free_outcome(rule, dtype):
    """A tested law check has at least two outcomes of positive probability in some stratum (df >= 1)."""
    for scenario in SCENARIOS.values():
        sc = scenario.given(dtype)
        plan = plan_for(sc, rule)
        if "first_token_law" in plan.tested:
            assert ((sc.target[sc.starts] > 0).sum(1) > 1).any(), sc.name
        if "correction_law" in plan.tested:
            assert ((laws.correction_law(sc, rule) > 0).sum(1) > 1).any(), sc.name
        if "reject_rate" in plan.tested:
            assert 0 < laws.rejection_mass(sc, rule)[0] < 1, sc.name
