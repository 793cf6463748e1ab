"""The sampling tally: the chain tally (chain/tally.py) on the processed target laws, and the sampling contract's own
certain counts.

The chain's T0 checks and counters run unchanged on `batch.chain` (the processed rows): an emitted token that the
processors exclude has processed probability 0 (t0_zero_prob_emitted), and the first-token, correction, bonus and
accepted-count laws are the processed law's. On top of them, on every call:
  greedy_argmax     every token a greedy row emits equals the argmax of the processed logits at its position
  logprob_value     each returned logprob equals log of the declared law (processed or raw) of the emitted token,
                    within LOGPROB_TOLERANCE (absolute; -inf matches -inf)
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...stats import CheckResult
from ...stats.record import CheckId
from ..chain.tally import Tally
from ..engine import registry
from ..engine.registry import SAMPLING
from ..engine.results import t0_result
from .scenarios import SamplingBatch, Scenario

#: |returned logprob - log p(emitted)| allowed: float32 log-softmax of logits up to |60| rounds to ~1e-5.
LOGPROB_TOLERANCE = 1e-3
SAMPLING_T0 = ("greedy_argmax", "logprob_value")


@dataclass
class SamplingTally(Tally):
    CONTRACT = SAMPLING

    sampling: Scenario | None = None
    logprobs: str | None = None  # what the adapter declares its logprobs are
    own: dict = field(default_factory=lambda: {name: 0 for name in SAMPLING_T0})

    def add(self, batch: SamplingBatch, out, probs_seen, where: dict) -> np.ndarray:
        tokens, logprobs = out
        good = super().add(batch.chain, tokens, (batch.chain.target_probs, probs_seen[1]), where)
        sc = self.sampling
        emitted = (tokens >= 0) & (tokens < sc.vocab_size)
        states = batch.chain.states  # [B, g+1]
        greedy = sc.greedy[states]  # [B, g+1]
        argmax = sc.target.argmax(1)[states]
        bad = (emitted & greedy & (tokens != argmax)).any(1)
        self._own("greedy_argmax", bad, batch, tokens, where)
        if self.logprobs is not None:
            law = sc.raw_law() if self.logprobs == "raw" else sc.target
            with np.errstate(divide="ignore"):
                expected = np.log(law[states, np.where(emitted, tokens, 0)])  # [B, g+1]
            got = np.asarray(logprobs, dtype=np.float64)
            both_inf = np.isneginf(expected) & np.isneginf(got)
            off = emitted & ~both_inf & ~(np.abs(got - expected) <= LOGPROB_TOLERANCE)
            self._own("logprob_value", off.any(1), batch, tokens, where)
            if off.any() and "logprob_value" in self.examples and "logprob" not in self.examples["logprob_value"]:
                row = int(np.flatnonzero(off.any(1))[0])
                pos = int(np.flatnonzero(off[row])[0])
                self.examples["logprob_value"].update(position=pos, logprob=float(got[row, pos]),
                                                      expected=float(expected[row, pos]),
                                                      law=self.logprobs)  # fmt: skip
        return good

    def _own(self, name: str, bad: np.ndarray, batch: SamplingBatch, tokens: np.ndarray, where: dict) -> None:
        hits = int(bad.sum())
        if not hits:
            return
        self.own[name] += hits
        if name not in self.examples:
            row = int(np.flatnonzero(bad)[0])
            self.examples[name] = {**where, "row": row, "output": tokens[row].tolist(),
                                   "draft_tokens": batch.draft_tokens[row].tolist(),
                                   "num_draft": int(batch.num_draft[row]), "params": repr(batch.params[row]),
                                   "history": repr(batch.histories[row])}  # fmt: skip

    def t0_kinds(self) -> tuple[str, ...]:
        return (*super().t0_kinds(), *self._own_kinds())

    def _own_kinds(self) -> tuple[str, ...]:
        return ("greedy_argmax", "logprob_value") if self.logprobs is not None else ("greedy_argmax",)

    def t0_results(self) -> list[CheckResult]:
        own = [t0_result(name, self.own[name], self.rows, {"example": self.examples.get(name)})
               for name in self._own_kinds()]  # fmt: skip
        return super().t0_results() + own

    def _t2(self, kind: str, alpha: float, rule: str | None = None) -> CheckResult:
        form = registry.get(kind).forms.get(SAMPLING)
        return form.evaluate(self, alpha, rule or self.rule, str(CheckId(kind, self.scenario.name)))

    def counts(self) -> dict:
        return {**super().counts(), "own": self.own}


__all__ = ["LOGPROB_TOLERANCE", "SAMPLING", "SamplingTally"]
