"""The whole pipeline's check kinds (engine/registry.py): the pipeline forms of kinds the chain declares.

A pipeline is checked on its continuations alone: every id in [0, V) (t0_valid_ids), and the law of the n-token
continuations of a prompt against the target's exact law after its logits processors (joint_law; specref.hf).
"""

from __future__ import annotations

from ..chain.kinds import DECLARED as _CHAIN_KINDS  # noqa: F401 -- the kinds whose pipeline forms this module adds
from ..engine.registry import PIPELINE, TEST, Form, add_form, for_contract


def _joint_law(tally, alpha, rule, name):
    from ...hf.lawcheck import counts_check

    return counts_check(tally.continuations, tally.scenario.law, alpha=alpha, name=name)


add_form("adapter", PIPELINE, Form(description="the pipeline ran: no exception, no hang, a [B, n] int64 tensor "
                                   "returned"))  # fmt: skip
add_form("t0_valid_ids", PIPELINE, Form(description="every continuation token is an id in [0, V)"))
add_form("joint_law", PIPELINE, Form(lambda s: TEST, _joint_law, ("continuations",), "the n-token continuations of "
                                     "the prompt follow the target's exact law after its processors"))  # fmt: skip
add_form("rare_edge", PIPELINE, Form(description="not tested: the forced probe cannot give a pipeline's accept tests "
                                   "a draft of probability 0 (pipeline.py)"))  # fmt: skip


#: The kinds with a pipeline form, once this module has declared them: importing DECLARED is what declares them.
DECLARED = tuple(kind.name for kind in for_contract(PIPELINE))
