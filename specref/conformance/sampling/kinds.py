"""The sampling contract's check kinds (engine/registry.py): the chain's kinds on the processed laws, and its own.

The chain's law and rule kinds get a sampling form that runs the chain's plan predicate and test on the scenario's
processed chain scenario (scenarios.Scenario.chain): first_token_law holds p_1 after the processors, correction_law
the residual of the processed p_i at every state, bonus_law the processed p_{g+1} (the bonus row). Its own kinds:
  greedy_argmax      (certain) a greedy row emits the argmax of the processed logits at every position, bit for bit
  logprob_value      (certain) returned logprobs equal log of the declared law of the emitted token (tally.py)
  penalty_draft_law  (T2) where penalties make the law depend on this step's drafts, the tokens emitted after one or
                     more accepted drafts (corrections and bonus tokens at states of depth >= 1) follow the processed
                     law whose history holds those drafts: a verifier whose penalties count only the history before
                     the step draws them from the root's law instead
"""

from __future__ import annotations

import numpy as np

from ...stats import chisquare_strata
from ..chain import laws
from ..chain.kinds import DECLARED as _CHAIN_KINDS  # noqa: F401 -- the kinds whose sampling forms this module adds
from ..engine.registry import CONTRACT, LAW, TEST, CheckKind, Form, add_form, declare, for_contract
from .tally import SAMPLING

#: Chain kinds that have no sampling form: the scenarios have no ragged, identical-row or joint designs.
NOT_HERE = ("ragged_law", "row_independence", "joint_law")
_WORDS = {
    "adapter": "the adapter ran: no exception, no hang, tokens [B, g+1] int64 (and logprobs [B, g+1] if declared)",
    "t0_zero_prob_emitted": "no emitted token has processed target probability 0 (a token the processors exclude)",
    "first_token_law": "law of the first emitted token equals the processed p_1",
    "batch_composition": "each request of a mixed batch keeps its own processed first-token law",
    "correction_law": "given a rejection, the correction follows max(0, p - q) / Z of the processed p at its state",
    "bonus_law": "given all drafts accepted, the bonus follows the processed p_{g+1} (the bonus row)",
    "rare_edge": "not tested here: the forced probe runs on the chain contract (specref conform of the kernel)",
    "coupling": "with injected uniforms, tokens equal specref's reference sampling verifier's, token for token",
}


def _df(rows: np.ndarray) -> int:
    return int(np.maximum((rows > 0).sum(1) - 1, 0).sum())


def _correction_every_state(chain_plan):
    """The chain's plan on one request; on a mixed batch (several requests), the correction law per state too: its
    strata are states, so each request's processed residual is held at every position, not only its first token."""

    def plan(sc, rule):
        ch = sc.chain
        if len(ch.starts) == 1:
            return chain_plan(ch, rule)
        rejects = (ch.draft * (1 - ch.target)).ravel() > 0 if ch.point_mass else laws.rejection_mass(ch, rule) > 0
        if not rejects.any():
            return "not tested: no rejection is possible (Z = 0)"
        return TEST if _df(laws.correction_law(ch, rule)[rejects]) > 0 else "implied by T0 (t0_residual_support)"

    return plan


def _bonus_every_request(chain_plan):
    """The chain's plan on one request; on a mixed batch, the bonus law per state after the last draft."""

    def plan(sc, rule):
        ch = sc.chain
        if len(ch.starts) == 1:
            return chain_plan(ch, rule)
        if max(laws.length_law(ch, int(s), ch.gamma, rule)[-1] for s in ch.starts) <= 0:
            return "not tested: all drafts are never accepted"
        return TEST if _df(ch.target) > 0 else "implied by T0 (t0_zero_prob_emitted: the target rows are one-hot)"

    return plan


_WIDER = {"correction_law": _correction_every_state, "bonus_law": _bonus_every_request}


def _on_chain(name: str, form: Form):
    if form.plan is None:
        return Form(description=_WORDS.get(name))
    widen = _WIDER.get(name)
    plan = widen(form.plan) if widen else (lambda sc, rule: form.plan(sc.chain, rule))
    return Form(plan, form.evaluate, form.counters, _WORDS.get(name))


for _kind in [k for k in for_contract("chain") if k.name not in NOT_HERE]:
    add_form(_kind.name, SAMPLING, _on_chain(_kind.name, _kind.forms["chain"]))


def _deep(sc) -> np.ndarray:
    """[S] states of depth >= 1 whose processed law differs from their component's root law (drafts matter)."""
    root = sc.starts[np.searchsorted(sc.starts, np.arange(len(sc.paths)), side="right") - 1]
    differs = np.abs(sc.target - sc.target[root]).max(1) > 1e-12
    return (sc.depth >= 1) & differs


def _penalty_plan(sc, rule):
    if sc.point_mass or sc.chain is None or not _deep(sc).any():
        return None
    return TEST


def _penalty_law(t, alpha, rule, name):
    sc, deep = t.sampling, _deep(t.sampling)
    observed = np.concatenate([t.correction[deep], t.bonus[deep]])
    expected = np.concatenate([laws.correction_law(t.scenario, rule)[deep], t.scenario.target[deep]])
    labels = [f"correction at path {sc.paths[s]}" for s in np.flatnonzero(deep)]
    labels += [f"bonus at path {sc.paths[s]}" for s in np.flatnonzero(deep)]
    return chisquare_strata(observed, expected, alpha=alpha, name=name, labels=labels)


_T0 = Form()
declare(CheckKind("greedy_argmax", LAW, "T0", "a greedy row (temperature 0) emits the argmax of the processed "
                  "logits at every position, bit for bit", statistic="violations", bins="row",
                  forms={SAMPLING: _T0}))  # fmt: skip
declare(CheckKind("logprob_value", CONTRACT, "T0", "each returned logprob equals log of the declared law "
                  "(processed, or raw if declared) of the emitted token, within 1e-3", statistic="violations",
                  bins="row", forms={SAMPLING: _T0}))  # fmt: skip
declare(CheckKind("penalty_draft_law", LAW, "T2", "where penalties depend on this step's drafts, corrections and "
                  "bonus tokens after accepted drafts follow the processed law whose history holds them",
                  statistic="Pearson X^2 over strata", bins="token", strata="(correction or bonus, drafted path)",
                  forms={SAMPLING: Form(_penalty_plan, _penalty_law, ("correction", "bonus"))}))  # fmt: skip

#: The kinds with a sampling form, once this module has declared them: importing DECLARED is what declares them.
DECLARED = tuple(kind.name for kind in for_contract(SAMPLING))

__all__ = ["DECLARED", "NOT_HERE"]
