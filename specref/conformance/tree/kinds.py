"""The tree contract's check kinds (engine/registry.py): the tree forms of the kinds chains run too, and the
tree-only ones.

A tree form's plan predicate reads the scenario's TreeTally (its exact laws, under the adapter's scheme and rule),
before any data; its test reads the tally's counts against those exact laws (specref.exact_tree), never simulated.
"""

from __future__ import annotations

import numpy as np

from ...stats import binomial_positions, chisquare_gof, chisquare_strata
from ..chain.kinds import DECLARED as _CHAIN_KINDS  # noqa: F401 -- the kinds whose tree forms this module adds
from ..engine.joint import JOINT_TOKENS
from ..engine.registry import CONTRACT, RULE, TEST, TREE, CheckKind, Form, add_form, declare, for_contract

_T0 = Form()


def _first_plan(t):
    if t.scenario.joint:
        return None
    sc = t.scenario
    return TEST if (sc.target[sc.start] > 0).sum() > 1 else \
        "implied by T0 (t0_zero_prob_emitted: the root's target row is one-hot)"  # fmt: skip


def _depth_plan(t):
    if t.scenario.joint:
        return None
    _, _, rates = t.hazards()
    return TEST if ((rates > 0) & (rates < 1)).any() else "not tested: every depth's acceptance is certain (0 or 1)"


def _length_plan(t):
    if t.scenario.joint:
        return None
    if t.scenario.depth == 1:
        return "same statistic as depth_acceptance (depth 1)"
    if ((t.expected_length() > 0).sum(1) > 1).any():
        return TEST
    return "not tested: the accepted count is certain"


def _last_plan(t):
    if t.scenario.joint:
        return None
    if any((row > 0).sum() > 1 for row in t.expected_last().values()):
        return TEST
    return "not tested: every last token is certain given its prefix"


def _first_law(t, alpha, rule, name):
    sc = t.scenario
    return chisquare_gof(t.first, sc.target[sc.start], alpha=alpha, name=name)


def _length_law(t, alpha, rule, name):
    return chisquare_strata(t.length, t.expected_length(), alpha=alpha, name=name)


def _depth_acceptance(t, alpha, rule, name):
    successes, trials, rates = t.hazards()
    return binomial_positions(successes, trials, rates, alpha=alpha, name=name)


def _last_law(t, alpha, rule, name):
    expected = t.expected_last()
    keys = sorted(t.last, key=str)
    observed = np.stack([t.last[key] for key in keys])
    law = np.stack([expected.get(key, np.zeros(t.scenario.vocab_size)) for key in keys])  # unseen prefix: impossible
    return chisquare_strata(observed, law, alpha=alpha, name=name)


def _joint_law(t, alpha, rule, name):
    sc = t.scenario
    counts = t.joint if t.joint is not None else np.zeros(sc.vocab_size**JOINT_TOKENS, dtype=np.int64)
    return chisquare_gof(counts, sc.sequence_law(JOINT_TOKENS), alpha=alpha, name=name)


# --- the kinds -----------------------------------------------------------------------------------------------------

for _name, _description in (
    ("t0_valid_ids", None),
    ("t0_padding", "1..depth+1 tokens, left-aligned, then -1 (depth: the row's deepest node)"),
    ("t0_prefix_is_drafts", "emitted tokens before the last are the drafts of a root-to-node path"),
    ("t0_zero_prob_emitted", None),
    ("reproducibility", None),
    ("adapter", "the adapter ran: no exception, no hang, a [B, <= N+1] int64 tensor returned"),
    ("coupling", "with injected uniforms, tokens equal specref.reference.tree's, token for token"),
    (
        "rare_edge",
        "with one generator output forced to a float32 u = 0 (specref.forced), no token of probability 0 is "
        "emitted by one-node trees (the chain probe's rows): accept, correction and bonus draws (edges/probe.py)",
    ),
):
    add_form(_name, TREE, Form(description=_description))

declare(CheckKind("t0_root_to_node", CONTRACT, "T0", "the accepted nodes returned form a root-to-node path, one per "
                  "accepted token", statistic="violations", bins="row", forms={TREE: _T0}))  # fmt: skip
add_form("first_token_law", TREE, Form(_first_plan, _first_law, ("first",), "law of the first emitted token equals "
                                       "P at the root"))  # fmt: skip
declare(CheckKind("depth_acceptance", RULE, "T2", "P(accept at depth d | reached depth d-1) equals the rule's exact "
                  "rate, per shape and depth", statistic="largest |rate - exact rate| over (shape, depth) (exact "
                  "binomial per depth)", bins="(shape, depth)", distance="|p - p0|", power="binomial positions",
                  forms={TREE: Form(_depth_plan, _depth_acceptance, ("length",))}))  # fmt: skip
add_form("accepted_length_law", TREE, Form(_length_plan, _length_law, ("length",), "accepted-count law per shape "
                                           "equals the rule's exact law"))  # fmt: skip
add_form("correction_law", TREE, Form(_last_plan, _last_law, ("last",), "the last token (correction or bonus) given "
                                      "the accepted path, per shape: the rule's law of what is emitted at the node "
                                      "where the walk stopped"))  # fmt: skip
add_form("joint_law", TREE, Form(lambda t: TEST if t.scenario.joint else None, _joint_law, ("joint",),
                                 "first n tokens over repeated tree cycles follow the target's law"))  # fmt: skip


#: The kinds with a tree form, once this module has declared them: importing DECLARED is what declares them.
DECLARED = tuple(kind.name for kind in for_contract(TREE))
