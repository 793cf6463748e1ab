"""Block verification's expected laws (chain/block_laws.py through laws.py, rule="block") proven on the reference
engine: specref.reference.block enumerated in Fractions (specref.exact_tree), and the rule's plan.

Exact tier: no randomness, nothing can flake.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from specref import exact, exact_tree
from specref.conformance.chain import laws
from specref.conformance.chain.plan import plan_for
from specref.conformance.chain.scenarios import SCENARIOS, context_free, markov
from specref.reference import block

pytestmark = pytest.mark.exact


def _rows(rng, v, count, zeros=0.25) -> list[list[Fraction]]:
    rows = []
    for _ in range(count):
        w = [int(x) if rng.random() >= zeros else 0 for x in rng.integers(1, 9, size=v)]
        if not any(w):
            w[int(rng.integers(v))] = 1
        rows.append([Fraction(x, sum(w)) for x in w])
    return rows


def _from_cycle(law, v, gamma, state_of):
    """(accepted-count law [g+1], {state: correction counts [V]}) of an exact cycle law."""
    length, correction = np.zeros(gamma + 1), {}
    for tokens, pr in law.items():
        accepted = len(tokens) - 1
        length[accepted] += float(pr)
        if accepted < gamma:
            correction.setdefault(state_of(tokens[:accepted]), np.zeros(v))[tokens[-1]] += float(pr)
    return length, correction


def test_the_paper_toy_accepts_11_9_drafts_under_block_and_10_9_under_the_token_rule():
    sc = context_free("toy", "", [1 / 3, 2 / 3], [2 / 3, 1 / 3], 2)
    accepted = np.arange(3)
    assert laws.length_law(sc, 0, 2, "block") @ accepted == pytest.approx(11 / 9, abs=1e-15)
    assert laws.length_law(sc, 0, 2, "exact") @ accepted == pytest.approx(10 / 9, abs=1e-15)


@pytest.mark.parametrize("seed", range(4))
def test_markov_block_laws_match_the_enumerated_reference(seed):
    """g = 3 on an order-1 Markov machine: the accepted-count law for every block length n <= g (ragged rows verify
    a block of n), the tail E_q[b_k] (specref.theory_tree.block_tail's sum, here from the engine), and the
    correction law per state, a mixture over paths that the state alone does not fix."""
    rng = np.random.default_rng(300 + seed)
    v, gamma, start = 3, 3, 2
    target, draft = _rows(rng, v, v), _rows(rng, v, v, zeros=0.0)
    sc = markov("m", "", [[float(x) for x in r] for r in target], [[float(x) for x in r] for r in draft], gamma,
                start=start)  # fmt: skip
    model_p, model_q = (lambda c: target[c[-1]]), (lambda c: draft[c[-1]])
    for n in range(1, gamma + 1):
        length, correction = _from_cycle(exact_tree.block_cycle_law(model_p, model_q, (start,), n), v, n,
                                         lambda acc: acc[-1] if acc else start)  # fmt: skip
        assert np.allclose(length, laws.length_law(sc, start, n, "block")[: n + 1], atol=1e-12), n
        tail = laws.accepted_at_least(sc, start, n, "block")
        assert np.allclose(tail, np.cumsum(length[::-1])[::-1], atol=1e-12), n
        if n == gamma:
            expected = laws.correction_law(sc, "block")
            for state, counts in correction.items():
                assert np.allclose(counts / counts.sum(), expected[state], atol=1e-12), state


@pytest.mark.parametrize("seed", range(3))
def test_first_token_given_fixed_drafts_matches_the_enumerated_reference(seed):
    """Identical rows share the drafts x_1..x_g: the first token is x_1 with P(tau >= 1 | x), else the correction."""
    rng = np.random.default_rng(400 + seed)
    v, gamma = 4, 3
    p, q = _rows(rng, v, 2)
    sc = context_free("t", "", [float(x) for x in p], [float(x) for x in q], gamma)
    drafts = [int(x) for x in rng.choice(np.flatnonzero([float(x) > 0 for x in q]), size=gamma)]
    law = exact.enumerate_law(lambda r: block.verify_block([p] * (gamma + 1), [q] * gamma, drafts, r)[0])
    expected = np.array([float(law.get(y, 0)) for y in range(v)])
    assert np.allclose(laws.first_token_given_drafts(sc, np.array(drafts), "block"), expected, atol=1e-12)


def test_point_mass_drafts_verify_as_the_token_rule_does():
    """draft_probs=None: q_k is the point mass at the next draft, so b_k = prod p(x_i) and the residual is p
    without that draft: block's laws are the token rule's (laws.py keeps one formula for both)."""
    rng = np.random.default_rng(7)
    v = 3
    target = _rows(rng, v, v)
    drafts = (0, 2)
    point = [[Fraction(int(j == x)) for j in range(v)] for x in drafts]
    rows = [target[0], target[drafts[0]], target[drafts[1]]]
    ours = exact.enumerate_law(lambda r: tuple(block.verify_block(rows, point, list(drafts), r)))
    token = exact.verify_law(rows, None, list(drafts))
    assert ours == token
    sc = SCENARIOS["point_mass_g4"]
    assert np.array_equal(laws.length_law(sc, 0, 4, "block"), laws.length_law(sc, 0, 4, "exact"))
    assert np.array_equal(laws.correction_law(sc, "block"), laws.correction_law(sc, "exact"))


def test_block_plans_out_the_reject_rate_and_keeps_its_certain_check():
    """The reject rate by position is not block's law (module laws.MEMORYLESS): planned out with the reason, never a
    pass; where p == q block never stops early either, so one rejection still fails it outright."""
    dense = plan_for(SCENARIOS["cf_dense_g4"], "block")
    assert "reject_rate" not in dense.tested and "1 - E_q[b_{i+1}] / E_q[b_i]" in dense.skipped["reject_rate"]
    assert {"accepted_length_law", "correction_law", "bonus_law"} <= set(dense.tested)
    assert plan_for(SCENARIOS["cf_equal_g8"], "block").certain == ["reject_rate"]
    assert "reject_rate" in plan_for(SCENARIOS["cf_dense_g4"], "exact").tested  # the token rule keeps it


def test_block_laws_differ_from_the_token_rule_where_the_checks_look():
    """Power: the block law is another law on the scenarios its rule checks test, so a token-rule verifier
    declared block (vllm-ascend's block_verify before its fix) can be told apart."""
    far = 0.0
    for name in ("cf_dense_g4", "markov_g5", "markov_g8"):
        sc = SCENARIOS[name]
        block_law = laws.length_law(sc, int(sc.starts[0]), sc.gamma, "block")
        token_law = laws.length_law(sc, int(sc.starts[0]), sc.gamma, "exact")
        assert block_law @ np.arange(sc.gamma + 1) > token_law @ np.arange(sc.gamma + 1), name
        far = max(far, 0.5 * np.abs(block_law - token_law).sum())
        # the correction mixes (b p - q)_+ over paths: not the token rule's (p - q)_+ (the half-fix mutant's)
        tv = 0.5 * np.abs(laws.correction_law(sc, "block") - laws.correction_law(sc, "exact")).sum(1).max()
        assert tv > 0.01, name
    assert far > 0.05
