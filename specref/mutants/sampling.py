"""The sampling contract's mutants: verifiers that keep exact speculative sampling but get the processed law wrong
around it, one per bug class engines shipped in 2026 (docs/mutants.md names the threads).

Each is a black box of the sampling contract (kind "sampling"), declaring the chain it claims to follow and
logprobs="processed"; run one with `specref conform specref.mutants.sampling:MUTANTS.<name>`. Each builds its target
rows from specref.reference.processors (a law per row and position, cached per request, path and logits), changes
one thing, and verifies with specref.batched.verify.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from ..batched.chain import verify as chain_verify
from ..conformance.engine.registry import check_caught_by
from ..conformance.sampling.kinds import DECLARED as _SAMPLING_KINDS  # noqa: F401 -- the kinds caught_by names
from ..reference.processors import History, SamplingParams, processed_law
from ..reference.sampling import _log_softmax

#: law(chain, logits [V], params, history, position i, gamma g) -> [V]: the law a mutant uses at position i (0-based)
RowLaw = Callable[[str, np.ndarray, SamplingParams, History, int, int], np.ndarray]


def _rows(row_law: RowLaw, chain: str, logits: np.ndarray, draft_tokens: np.ndarray, params, histories) -> np.ndarray:
    """[B, g+1, V] float64 target rows by row_law, computed once per (request, history, drafted path, logits)."""
    batch, width, vocab = logits.shape
    out = np.empty((batch, width, vocab))
    cache: dict = {}
    for b in range(batch):
        for i in range(width):
            key = (id(params[b]), id(histories[b]), tuple(draft_tokens[b, :i]), i, logits[b, i].tobytes())
            if key not in cache:
                cache[key] = row_law(chain, logits[b, i], params[b], histories[b].extended(draft_tokens[b, :i]), i,
                                     width - 1)  # fmt: skip
            out[b, i] = cache[key]
    return out


def _verify_with(row_law: RowLaw, chain: str, raw_logprobs: bool = False):
    def verify(target_logits, draft_probs, draft_tokens, params, histories, generator=None):
        logits = target_logits.double().cpu().numpy()
        tokens_np = draft_tokens.cpu().numpy()
        target = torch.from_numpy(_rows(row_law, chain, logits, tokens_np, params, histories))
        draft = None if draft_probs is None else draft_probs.double().cpu()
        tokens = chain_verify(target, draft, draft_tokens.cpu(), generator, validate=False)
        law = np.stack([_log_softmax(row) for row in logits.reshape(-1, logits.shape[-1])]).reshape(logits.shape) \
            if raw_logprobs else np.log(np.where(target.numpy() > 0, target.numpy(), np.nan))  # fmt: skip
        picked = np.take_along_axis(law, tokens.clamp(min=0).numpy()[..., None], -1)[..., 0]
        logprobs = torch.from_numpy(np.where(tokens.numpy() >= 0, picked, np.nan))
        return tokens.to(target_logits.device), logprobs

    return verify


# --- the laws each mutant uses ---------------------------------------------------------------------------------------


def _processors_skipped_on_verified_rows(chain, logits, params, history, i, gamma):
    """min_p and logit_bias skipped on the verified rows (the accept tests and corrections), applied to the bonus
    row only: vLLM #42744."""
    if i < gamma:
        params = replace(params, min_p=0.0, logit_bias=())
    return processed_law(chain, logits, params, history)


def _top_k_renormalised_before_top_p(chain, logits, params, history, i, gamma):
    """Declares SGLang's plain sampler (top-p on the original law); on the verified rows, top-k is applied and the
    law renormalised before top-p, as vLLM's chain does; the bonus row keeps the plain sampler's: SGLang PR 36173
    and 10617."""
    return processed_law("vllm" if i < gamma else chain, logits, params, history)


def _penalties_before_the_step(chain, logits, params, history, i, gamma):
    """Penalties count only the history before the step: the drafts d_1..d_{i-1} accepted earlier in the same
    step are not in the history at position i (SGLang PR 33643: only the last accepted token was accumulated)."""
    before = History(history.prompt, history.output[: len(history.output) - i])
    return processed_law(chain, logits, params, before)


def _processed(chain, logits, params, history, i, gamma):
    """Tokens from the processed law, but the logprobs returned are log softmax of the raw logits while the adapter
    declares processed logprobs: vLLM #34497 and PR #44727."""
    return processed_law(chain, logits, params, history)


@dataclass
class SamplingMutant:
    name: str
    description: str
    verify: Callable
    caught_by: list[str]
    reference: str
    chain: str = "vllm"
    kind: str = "sampling"
    logprobs: str = "processed"
    point_mass_drafts: bool = True
    bug_class: str = "Sampling path"
    extra: dict = field(default_factory=dict)

    @property
    def notes(self) -> str:
        return f"mutant ({self.bug_class}): {self.description} [{self.reference}]"


def _mutant(row_law, caught_by, reference, chain="vllm", raw_logprobs=False) -> SamplingMutant:
    name = row_law.__name__.lstrip("_")
    if raw_logprobs:
        name = "raw_logprobs_as_processed"
    caught_by = check_caught_by(name, caught_by)
    return SamplingMutant(name, " ".join(row_law.__doc__.split()), _verify_with(row_law, chain, raw_logprobs),
                          caught_by, reference, chain=chain)  # fmt: skip


_ENTRIES = [
    _mutant(_processors_skipped_on_verified_rows, ["t0_zero_prob_emitted", "first_token_law", "greedy_argmax"],
            "vLLM #42744"),
    _mutant(_top_k_renormalised_before_top_p, ["first_token_law", "correction_law"], "SGLang PR #36173, #10617",
            chain="sglang"),
    _mutant(_penalties_before_the_step, ["penalty_draft_law", "greedy_argmax"], "SGLang PR #33643"),
    _mutant(_processed, ["logprob_value"], "vLLM #34497, PR #44727", raw_logprobs=True),
]  # fmt: skip
#: name -> mutant, in catalogue order.
CATALOGUE: dict[str, SamplingMutant] = {m.name: m for m in _ENTRIES}


class _Namespace:
    def __init__(self, entries):
        self.__dict__.update(entries)


#: `specref conform specref.mutants.sampling:MUTANTS.<name>` resolves through this namespace.
MUTANTS = _Namespace(CATALOGUE)

__all__ = ["CATALOGUE", "MUTANTS", "SamplingMutant"]
