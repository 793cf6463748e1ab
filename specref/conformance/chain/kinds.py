"""The chain contract's check kinds (engine/registry.py): each one's family, wording, plan predicate, test and counters.

Plan predicates read a scenario's rows (as given) and the rule alone, before any data (plan.py runs them in this
order). Checks that cannot fail take no alpha and are never counted as passes: a law with one possible outcome
(df = 0), a law that a T0 check already decides (a one-hot target: any other token has p = 0), a rate that is 0
or 1, and two checks of one statistic (the correction is the first token when every draft is rejected at position
1; at g = 1 the accepted count is the reject indicator). A rate of exactly 0 is a certain check: one event fails it.

Tests read a Tally's counters (chain/tally.Tally); the counts are rule-free, only the expected laws depend on `rule`.
The mean tokens per cycle is a function of the accepted-count table accepted_length_law tests: it is derived, not
tested (tau.py, reports/one-table.md).
"""

from __future__ import annotations

import numpy as np

from ...stats import binomial_positions, chisquare_gof, chisquare_strata
from ...stats import not_tested as _not_tested
from ..engine.joint import JOINT_TOKENS
from ..engine.registry import CERTAIN, CHAIN, CONTRACT, EDGE, LAW, RULE, TEST, CheckKind, Form, declare, for_contract
from . import laws

ONE_HOT_FIRST = "implied by T0 (t0_zero_prob_emitted: the first target row is one-hot)"


def _df(rows: np.ndarray) -> int:
    """Degrees of freedom of a law over strata: sum of (support size - 1)."""
    return int(np.maximum((rows > 0).sum(1) - 1, 0).sum())


def _laws_apply(sc) -> bool:
    """The scenario has per-scenario laws (not the probe, not the identical-rows or joint scenarios)."""
    return not (sc.probe or sc.identical_rows or sc.joint)


def _single(sc) -> bool:
    return _laws_apply(sc) and len(sc.starts) == 1


def _first_plan(applies):
    def plan(sc, rule):
        if not (_laws_apply(sc) and applies(sc)):
            return None
        return TEST if _df(sc.target[sc.starts]) > 0 else ONE_HOT_FIRST

    return plan


def _correction_plan(sc, rule):
    if not _single(sc) or sc.ragged:
        return None
    z = laws.rejection_mass(sc, rule)
    if sc.point_mass:
        rejects = (sc.draft * (1 - sc.target)).ravel() > 0  # stratum (s, d) is rejected with Q(d) (1 - P(d))
    else:
        rejects = z > 0
    if not rejects.any():
        return "not tested: no rejection is possible (Z = 0)"
    if sc.context_free and not sc.point_mass and z[0] == 1:
        first = "point_mass_law" if sc.point_mass else "first_token_law"
        return f"same statistic as {first}: every draft is rejected at position 1"
    if _df(laws.correction_law(sc, rule)[rejects]) > 0:
        return TEST
    return "implied by T0 (t0_residual_support: one token can be the correction)"


def _bonus_plan(sc, rule):
    if not _single(sc):
        return None
    if sc.ragged:
        return TEST
    if laws.length_law(sc, int(sc.starts[0]), sc.gamma, rule)[-1] <= 0:
        return "not tested: all drafts are never accepted"
    return TEST if _df(sc.target) > 0 else "implied by T0 (t0_zero_prob_emitted: the target rows are one-hot)"


def _reject_plan(sc, rule):
    if not _single(sc) or sc.ragged or not sc.context_free:
        return None
    z = laws.rejection_mass(sc, rule)[0]
    if z == 0:
        return CERTAIN  # Z = 0: one rejection is a certain failure (block too: p == q keeps b = 1 and r = 0)
    if z == 1:
        return "implied by T0 (t0_zero_prob_emitted: every draft has p = 0)"
    if rule not in laws.MEMORYLESS:
        return (
            f"not tested: under rule {rule}, the reject rate given position i was reached is not one Z but "
            "1 - E_q[b_{i+1}] / E_q[b_i], a function of the accepted-count law (accepted_length_law tests it)"
        )
    return TEST


def _random_length(sc, rule) -> bool:
    z = laws.rejection_mass(sc, rule)
    return bool(0 < z.max() and z.min() < 1)


def _length_plan(sc, rule):
    if not _laws_apply(sc) or (sc.ragged and len(sc.starts) == 1):
        return None
    if len(sc.starts) > 1:
        return TEST
    if not _random_length(sc, rule):
        return "not tested: the accepted count is certain (Z is 0 or 1)"
    if sc.gamma == 1 and _reject_plan(sc, rule) == TEST:
        return "same statistic as reject_rate (g = 1)"
    return TEST


# --- tests ---------------------------------------------------------------------------------------------------------


def _states(sc) -> list[str]:
    return [f"state {s}" for s in range(sc.target.shape[0])]


def _first_law(t, alpha, rule, name):
    return chisquare_strata(t.first, t.scenario.target, alpha=alpha, name=name, labels=_states(t.scenario))


def _correction_law(t, alpha, rule, name):
    sc = t.scenario
    labels = [f"state {s}, draft {d}" for s in range(sc.target.shape[0]) for d in range(sc.vocab_size)] \
        if sc.point_mass else _states(sc)  # fmt: skip
    return chisquare_strata(t.correction, laws.correction_law(sc, rule), alpha=alpha, name=name, labels=labels)


def _bonus_law(t, alpha, rule, name):
    return chisquare_strata(t.bonus, t.scenario.target, alpha=alpha, name=name, labels=_states(t.scenario))


def _reject_rate(t, alpha, rule, name):
    sc = t.scenario
    z = float(laws.rejection_mass(sc, rule)[0])
    result = binomial_positions(t.rejected, t.reached, z, alpha=alpha, name=name)
    rates = np.divide(t.rejected, t.reached, out=np.full(sc.gamma, np.nan), where=t.reached > 0)
    result.details.update(z=z, rate_by_position=rates.tolist(), reached=t.reached.tolist())
    return result


def _length_law(t, alpha, rule, name):
    sc = t.scenario
    observed = t.length.reshape(-1, sc.gamma + 1)
    expected = np.stack(
        [laws.length_law(sc, s, nd, rule) for s in range(t.length.shape[0]) for nd in range(sc.gamma + 1)]
    )
    labels = [f"start state {s}, num_draft {nd}" for s in range(t.length.shape[0]) for nd in range(sc.gamma + 1)]
    result = chisquare_strata(observed, expected, alpha=alpha, name=name, labels=labels)
    used = observed.sum(1) > 0
    result.details.update(
        observed=observed[used].sum(0).tolist(), expected=(expected[used].T @ observed[used].sum(1)).tolist()
    )
    return result


def _row_independence(t, alpha, rule, name):
    sc = t.scenario
    single = first_token_given_fixed_drafts(sc, t.seed, rule)
    pairs = t.pairs if t.pairs is not None else np.zeros((sc.vocab_size,) * 2, dtype=np.int64)
    if not pairs.sum():
        return no_data(name)
    return chisquare_gof(pairs.ravel(), np.outer(single, single).ravel(), alpha=alpha, name=name)


def _joint_law(t, alpha, rule, name):
    if t.joint is None or not t.joint.sum():
        return no_data(name)
    sc = t.scenario
    return chisquare_gof(t.joint, laws.sequence_law(sc, int(sc.starts[0]), JOINT_TOKENS), alpha=alpha, name=name)


def no_data(name: str):
    return _not_tested(name, "not tested: no observations", 0, {"tier": "none"})


def first_token_given_fixed_drafts(sc, seed: int, rule: str = "exact") -> np.ndarray:
    """Law of the first emitted token when every row shares one draft sequence (the identical-rows scenario)."""
    batch = sc.inputs(1, seed, 0)  # the shared drafts depend on the seed only
    return laws.first_token_given_drafts(sc, batch.draft_tokens[0], rule)


# --- the kinds -----------------------------------------------------------------------------------------------------

_T0 = Form()  # counted on every call by Tally.add (violations), decided by one counter-example
X2 = "Pearson X^2 over strata (exact binomial count when one stratum has 2 bins)"

for _name, _family, _description in (
    ("t0_valid_ids", CONTRACT, "every entry is -1 or a token id in [0, V)"),
    ("t0_padding", CONTRACT, "1..num_draft+1 tokens, left-aligned, then -1"),
    ("t0_prefix_is_drafts", CONTRACT, "emitted tokens before the last equal the drafts"),
    ("t0_zero_prob_emitted", LAW, "no emitted token has target probability 0"),
    ("t0_residual_support", RULE, "a correction token lies where the declared rule can put it"),
):
    declare(CheckKind(_name, _family, "T0", _description, statistic="violations", bins="row", forms={CHAIN: _T0}))

declare(CheckKind("adapter", CONTRACT, "call", "the adapter ran: no exception, no hang, a [B, g+1] int64 tensor "
                  "returned", statistic="violations", bins="call", forms={CHAIN: _T0}))  # fmt: skip
declare(CheckKind("reproducibility", CONTRACT, "run", "same seed gives the same tokens; another seed gives others",
                  statistic="violations", bins="row", forms={CHAIN: _T0}))  # fmt: skip
declare(CheckKind("rare_edge", EDGE, "run", "with one generator output forced to a float32 u = 0 (specref.forced), no "
                  "token of probability 0 is emitted: accept, correction and bonus draws (edges/probe.py)",
                  statistic="violations", bins="call", forms={CHAIN: _T0}))  # fmt: skip
declare(CheckKind("coupling", RULE, "run", "with injected uniforms, tokens equal the reference engine's, token for "
                  "token", statistic="mismatched rows", bins="row", forms={CHAIN: _T0}))  # fmt: skip

declare(CheckKind("first_token_law", LAW, "T2", "law of the first emitted token equals p_1", statistic=X2,
                  bins="token", strata="start state", plot="first",
                  forms={CHAIN: Form(_first_plan(lambda sc: len(sc.starts) == 1 and not sc.point_mass), _first_law,
                                     ("first",))}))  # fmt: skip
declare(CheckKind("batch_composition", LAW, "T2", "each component of a mixed batch keeps its own first-token law",
                  statistic=X2, bins="token", strata="component", plot="first",
                  forms={CHAIN: Form(_first_plan(lambda sc: len(sc.starts) > 1), _first_law, ("first",))}))  # fmt: skip
declare(CheckKind("point_mass_law", LAW, "T2", "point-mass drafts (draft_probs=None): the first-token law equals p_1",
                  statistic=X2, bins="token", strata="start state", plot="first",
                  forms={CHAIN: Form(_first_plan(lambda sc: len(sc.starts) == 1 and sc.point_mass), _first_law,
                                     ("first",))}))  # fmt: skip
declare(CheckKind("ragged_law", RULE, "T2", "with ragged num_draft, the accepted-count law per num_draft is the rule's",
                  statistic=X2, bins="accepted count", strata="(start state, num_draft)", plot="length",
                  forms={CHAIN: Form(lambda sc, rule: TEST if _single(sc) and sc.ragged else None, _length_law,
                                     ("length",))}))  # fmt: skip
declare(CheckKind("correction_law", RULE, "T2", "given a rejection, the correction follows the rule's correction law",
                  statistic=X2, bins="token", strata="state at the rejection (point mass: and the draft)",
                  forms={CHAIN: Form(_correction_plan, _correction_law, ("correction",))}))  # fmt: skip
declare(CheckKind("bonus_law", RULE, "T2", "given all drafts accepted, the bonus follows p_{g+1}", statistic=X2,
                  bins="token", strata="state after the last draft",
                  forms={CHAIN: Form(_bonus_plan, _bonus_law, ("bonus",))}))  # fmt: skip
declare(CheckKind("reject_rate", RULE, "T2", "P(reject at i | reached i) equals the rule's Z_i, every position "
                  "(exact binomial)", statistic="largest |rate - Z| over positions (exact binomial per position)",
                  bins="position", distance="|p - p0|", plot="reject", power="binomial positions",
                  forms={CHAIN: Form(_reject_plan, _reject_rate, ("reached", "rejected"))}))  # fmt: skip
declare(CheckKind("accepted_length_law", RULE, "T2", "accepted-count law equals the rule's exact law", statistic=X2,
                  bins="accepted count", strata="(start state, num_draft)", plot="length",
                  forms={CHAIN: Form(_length_plan, _length_law, ("length",))}))  # fmt: skip
declare(CheckKind("row_independence", RULE, "T2", "identical rows in one call give independent outputs, each "
                  "following the rule", statistic="Pearson X^2 (exact binomial count on 2 bins)",
                  bins="token pair (row 2j, row 2j+1)",
                  forms={CHAIN: Form(lambda sc, rule: TEST if sc.identical_rows and not sc.probe else None,
                                     _row_independence, ("pairs",))}))  # fmt: skip
declare(CheckKind("joint_law", LAW, "T2", "first n tokens over repeated cycles follow prod p",
                  statistic="Pearson X^2 (exact binomial count on 2 bins)", bins="token sequence",
                  forms={CHAIN: Form(lambda sc, rule: TEST if sc.joint and not (sc.probe or sc.identical_rows)
                                     else None, _joint_law, ("joint",))}))  # fmt: skip


#: The kinds with a chain form, once this module has declared them: importing DECLARED is what declares them.
DECLARED = tuple(kind.name for kind in for_contract(CHAIN))
