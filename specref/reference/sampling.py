"""The reference sampling verifier: raw logits, sampling parameters and a history in, tokens (and their logprobs) out,
for one row, written as the math. It is the chain verifier (chain.py) on the processed target law.

At draft position i (1-based) the target law is p_i = processed_law(chain, logits_i, params, history + d_1..d_{i-1}):
the history a penalty sees holds the drafts accepted before position i in this step, as the engine's own sampler
would have seen them had it generated d_1..d_{i-1} one at a time. Then speculative sampling keeps p_i exactly:
accept d_i with min(1, p_i(d_i) / q_i(d_i)), on the first rejection draw from max(0, p_i - q_i) / Z_i, after g
acceptances draw the bonus from p_{g+1}. A greedy row (temperature 0) has a one-hot p_i at the processed argmax, so
it keeps d_i iff d_i is that argmax and emits the argmax otherwise.

Logprobs: log p_i(x_i) of each emitted token under the law it was drawn from (processed); `raw` gives log softmax of
the raw logits instead (what vLLM returns by default, logprobs_mode="raw_logprobs").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..randomness import Randomness
from . import chain
from .processors import History, SamplingParams, processed_law

#: law(logits [V], params, history) -> [V]: a chain of processors.py bound to its name, or an engine's own sampler.
Law = Callable[[np.ndarray, SamplingParams, History], np.ndarray]


def chain_law(name: str) -> Law:
    """The law of the reference processor chain `name` (processors.CHAINS)."""
    return lambda logits, params, history: processed_law(name, logits, params, history)


def target_laws(law: Law, target_logits: Sequence, params: SamplingParams, history: History,
                draft_tokens: Sequence[int]) -> list[np.ndarray]:  # fmt: skip
    """[g+1] processed target rows p_1..p_{g+1}: row i sees the history extended by d_1..d_i (0-based: d_<i)."""
    return [law(np.asarray(target_logits[i], dtype=np.float64), params, history.extended(draft_tokens[:i]))
            for i in range(len(target_logits))]  # fmt: skip


def verify_row(law: Law, target_logits: Sequence, draft_probs: Sequence | None, draft_tokens: Sequence[int],
               params: SamplingParams, history: History, rng: Randomness,
               logprobs: str | None = None) -> tuple[list[int], list[float] | None]:  # fmt: skip
    """(the 1..g+1 emitted tokens, their logprobs or None): target_logits [g+1][V] raw, draft_probs [g][V] (None:
    point-mass drafts), the history before this step."""
    rows = target_laws(law, target_logits, params, history, draft_tokens)
    emitted = chain.verify([r.tolist() for r in rows], draft_probs, list(draft_tokens), rng, validate=False)
    if logprobs is None:
        return emitted, None
    if logprobs == "raw":
        rows = [_log_softmax(np.asarray(target_logits[i], dtype=np.float64)) for i in range(len(emitted))]
        return emitted, [float(rows[i][x]) for i, x in enumerate(emitted)]
    with np.errstate(divide="ignore"):
        return emitted, [float(np.log(rows[i][x])) for i, x in enumerate(emitted)]


def _log_softmax(logits: np.ndarray) -> np.ndarray:
    finite = np.isfinite(logits)
    top = logits[finite].max()
    return logits - (top + np.log(np.exp(logits[finite] - top).sum()))


__all__ = ["Law", "chain_law", "target_laws", "verify_row"]
