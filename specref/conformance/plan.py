"""What each scenario checks, fixed before any data: the checks that test, those that cannot fail, and why.

Families. Every check answers one of three questions, and the verdict reads them in that order:
  contract     does the output obey the verify contract? (T0: ids, padding, the prefix equals the drafts, the
               adapter ran, reproducibility) -- certain checks
  law          is the output law the target's? (first-token law, joint law, and the certain T0 check that no token
               of target probability 0 is emitted): holds for every lossless rule
  rule         does acceptance follow the declared rule? (reject rate, accepted-length law, tau, correction law,
               bonus law, residual support, coupling with the reference engine, and the joint law of identical
               rows, whose marginal -- the first token given fixed drafts -- is the rule's)

Checks that cannot fail take no alpha and are never counted as passes: a law with one possible outcome (df = 0),
a law that a T0 check already decides (a one-hot target: any other token has p = 0), a rate that is 0 or 1, and
two checks of one statistic (the correction is the first token when every draft is rejected at position 1; at
g = 1 the accepted count is the reject indicator). A rate of exactly 0 is a certain check: one event fails it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import laws
from .scenarios import Scenario

CONTRACT, LAW, RULE = "contract", "law", "rule"

FAMILY = {
    "t0_valid_ids": CONTRACT,
    "t0_padding": CONTRACT,
    "t0_prefix_is_drafts": CONTRACT,
    "adapter": CONTRACT,
    "reproducibility": CONTRACT,
    "t0_zero_prob_emitted": LAW,  # certain: a lossless verifier never emits a token of probability 0
    "first_token_law": LAW,
    "point_mass_law": LAW,
    "batch_composition": LAW,
    "joint_law": LAW,
    "t0_residual_support": RULE,
    "correction_law": RULE,
    "bonus_law": RULE,
    "reject_rate": RULE,
    "accepted_length_law": RULE,
    "mean_tau": RULE,
    "ragged_law": RULE,
    "coupling": RULE,
    "row_independence": RULE,  # its expected law (first token given fixed drafts) is the rule's
    "t0_root_to_node": CONTRACT,  # trees
    "depth_acceptance": RULE,  # trees
}

DESCRIPTIONS = {
    "t0_valid_ids": "every entry is -1 or a token id in [0, V)",
    "t0_padding": "1..num_draft+1 tokens, left-aligned, then -1",
    "t0_prefix_is_drafts": "emitted tokens before the last equal the drafts",
    "t0_zero_prob_emitted": "no emitted token has target probability 0",
    "t0_residual_support": "a correction token lies where the declared rule can put it",
    "first_token_law": "law of the first emitted token equals p_1",
    "correction_law": "given a rejection, the correction follows the rule's correction law",
    "bonus_law": "given all drafts accepted, the bonus follows p_{g+1}",
    "reject_rate": "P(reject at i | reached i) equals the rule's Z_i, every position (exact binomial)",
    "accepted_length_law": "accepted-count law equals the rule's exact law",
    "mean_tau": "mean tokens per cycle equals the rule's closed form",
    "batch_composition": "each component of a mixed batch keeps its own first-token law",
    "ragged_law": "with ragged num_draft, the accepted-count law per num_draft is the rule's",
    "point_mass_law": "point-mass drafts (draft_probs=None): the first-token law equals p_1",
    "row_independence": "identical rows in one call give independent outputs, each following the rule",
    "joint_law": "first n tokens over repeated cycles follow prod p",
    "reproducibility": "same seed gives the same tokens; another seed gives others",
    "coupling": "with injected uniforms, tokens equal the reference engine's, token for token",
    "adapter": "the adapter ran: no exception, no hang, a [B, g+1] int64 tensor returned",
}


#: Tree runs (specref.conformance.tree) read some checks differently: the wording their reports use.
TREE_DESCRIPTIONS = {
    "t0_padding": "1..depth+1 tokens, left-aligned, then -1 (depth: the row's deepest node)",
    "t0_prefix_is_drafts": "emitted tokens before the last are the drafts of a root-to-node path",
    "t0_root_to_node": "the accepted nodes returned form a root-to-node path, one per accepted token",
    "first_token_law": "law of the first emitted token equals P at the root",
    "correction_law": "the last token (correction or bonus) given the accepted path, per shape: the rule's law of "
    "what is emitted at the node where the walk stopped",
    "depth_acceptance": "P(accept at depth d | reached depth d-1) equals the rule's exact rate, per shape and depth",
    "accepted_length_law": "accepted-count law per shape equals the rule's exact law",
    "joint_law": "first n tokens over repeated tree cycles follow the target's law",
    "coupling": "with injected uniforms, tokens equal specref.reference.tree's, token for token",
    "adapter": "the adapter ran: no exception, no hang, a [B, <= N+1] int64 tensor returned",
}


def family_of(kind: str) -> str:
    return FAMILY.get(kind, CONTRACT)


def describe(kind: str, adapter_kind: str = "kernel") -> str:
    """What a check of this kind tests, in the words of the adapter's kind ("tree" or a chain kind)."""
    if adapter_kind == "tree" and kind in TREE_DESCRIPTIONS:
        return TREE_DESCRIPTIONS[kind]
    return DESCRIPTIONS.get(kind, "")


@dataclass
class Plan:
    """A scenario's checks under a rule: `tested` spend alpha, `certain` are decided by one counter-example,
    `skipped` maps the checks that cannot fail to the reason (shown in reports as not tested)."""

    tested: list[str] = field(default_factory=list)
    certain: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def _df(rows: np.ndarray) -> int:
    """Degrees of freedom of a law over strata: sum of (support size - 1)."""
    return int(np.maximum((rows > 0).sum(1) - 1, 0).sum())


def plan_for(scenario: Scenario, rule: str = "exact") -> Plan:
    """The checks of one scenario, from its rows (as given) and the rule alone."""
    sc, out = scenario, Plan()
    if sc.probe:
        return out
    if sc.identical_rows:
        out.tested.append("row_independence")
        return out
    if sc.name.startswith("joint_"):
        out.tested.append("joint_law")
        return out
    starts = sc.target[sc.starts]
    first = "batch_composition" if len(sc.starts) > 1 else "point_mass_law" if sc.point_mass else "first_token_law"
    _add(out, first, _df(starts) > 0, "implied by T0 (t0_zero_prob_emitted: the first target row is one-hot)")
    if len(sc.starts) > 1:
        out.tested.append("accepted_length_law")
        return out
    if sc.ragged:
        out.tested += ["ragged_law", "bonus_law"]
        return out

    z = laws.rejection_mass(sc, rule)
    correction = laws.correction_law(sc, rule)
    if sc.point_mass:
        rejects = (sc.draft * (1 - sc.target)).ravel() > 0  # stratum (s, d) is rejected with Q(d) (1 - P(d))
    else:
        rejects = z > 0
    if not rejects.any():
        out.skipped["correction_law"] = "not tested: no rejection is possible (Z = 0)"
    elif sc.context_free and not sc.point_mass and z[0] == 1:
        out.skipped["correction_law"] = f"same statistic as {first}: every draft is rejected at position 1"
    else:
        _add(out, "correction_law", _df(correction[rejects]) > 0,
             "implied by T0 (t0_residual_support: one token can be the correction)")  # fmt: skip

    full = laws.length_law(sc, int(sc.starts[0]), sc.gamma, rule)[-1]
    if full <= 0:
        out.skipped["bonus_law"] = "not tested: all drafts are never accepted"
    else:
        _add(out, "bonus_law", _df(sc.target) > 0, "implied by T0 (t0_zero_prob_emitted: the target rows are one-hot)")

    if sc.context_free:
        if z[0] == 0:
            out.certain.append("reject_rate")  # Z = 0: one rejection is a certain failure
        elif z[0] == 1:
            out.skipped["reject_rate"] = "implied by T0 (t0_zero_prob_emitted: every draft has p = 0)"
        else:
            out.tested.append("reject_rate")
    random_length = bool(0 < z.max() and z.min() < 1)
    if not random_length:
        for kind in ("accepted_length_law", "mean_tau"):
            out.skipped[kind] = "not tested: the accepted count is certain (Z is 0 or 1)"
    elif sc.gamma == 1:
        if "reject_rate" in out.tested:
            out.skipped["accepted_length_law"] = "same statistic as reject_rate (g = 1)"
        else:
            out.tested.append("accepted_length_law")
        out.skipped["mean_tau"] = "same statistic as the accepted count (g = 1)"
    else:
        out.tested += ["accepted_length_law", "mean_tau"]
    return out


def _add(out: Plan, kind: str, testable: bool, reason: str) -> None:
    if testable:
        out.tested.append(kind)
    else:
        out.skipped[kind] = reason
