"""The whole pipeline's check kinds (engine/registry.py): the pipeline forms of kinds the chain declares.

A pipeline is checked on its continuations alone: every id in [0, V) (t0_valid_ids), and the law of the n-token
continuations of a prompt against the target's exact law after its logits processors (joint_law; specref.hf).
"""

from __future__ import annotations

from ..chain.kinds import DECLARED as _CHAIN_KINDS  # noqa: F401 -- the kinds whose pipeline forms this module adds
from ..engine.registry import CONTRACT, LAW, PIPELINE, TEST, CheckKind, Form, add_form, declare, for_contract


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

# The request-level kinds (pipeline/requests.py): run after the main pass, on the run's first prompt. The T2 one is
# planned (it takes alpha from the run's split) and computed by requests.run_checks, so its form has no evaluate.
declare(CheckKind("unseeded_independence", LAW, "T2", "serial requests without a seed are independent: Pearson X^2 "
                  "of independence of paired requests' first tokens", statistic="Pearson X^2 of independence",
                  bins="token category pair", forms={PIPELINE: Form(lambda s: TEST)}))  # fmt: skip
declare(CheckKind("seeded_request", CONTRACT, "run", "a request with a seed gives the same tokens alone, beside "
                  "other requests and after other requests", statistic="violations", bins="request",
                  forms={PIPELINE: Form()}))  # fmt: skip
declare(CheckKind("acceptance_counters", CONTRACT, "run", "the acceptance counters the engine reports (drafted, "
                  "accepted, steps) agree with the tokens it emitted, counting nothing past an EOS",
                  statistic="violations", bins="row", forms={PIPELINE: Form()}))  # fmt: skip


#: The kinds with a pipeline form, once this module has declared them: importing DECLARED is what declares them.
DECLARED = tuple(kind.name for kind in for_contract(PIPELINE))
