"""The reference processor chains: raw logits, a request's sampling parameters and its token history in, the law an
engine's own non-speculative sampler draws the next token from out. Each chain is written once, in its engine's
documented order; numpy float64, one row at a time.

    law = processed_law("vllm", logits [V], SamplingParams(temperature=0.7, top_k=20), History(prompt, output))

The chains (each step names the engine's code it follows):

  vllm          vllm/v1/sample/sampler.py (Sampler docstring, 0.32): allowed token ids -> logit bias (the
                non-argmax-invariant processors) -> penalties (repetition over prompt and output; frequency and
                presence over the output only: model_executor/layers/utils.apply_penalties) -> greedy argmax here ->
                temperature -> min_p (on the tempered law: logits_processor/builtin.MinPLogitsProcessor) -> top-k ->
                top-p on the law renormalised over the top-k (ops/topk_topp_sampler.apply_top_k_top_p_pytorch).
  transformers  transformers/generation/utils._get_logits_processor: processors (SequenceBiasLogitsProcessor,
                RepetitionPenaltyLogitsProcessor over input_ids = prompt and output, SuppressTokensLogitsProcessor for
                the ids not allowed) -> greedy argmax here -> warpers: Temperature -> TopK -> TopP (renormalised over
                the top-k) -> MinP (after top-p). It has no presence or frequency penalty.
  llama.cpp     common/sampling.cpp: logit_bias first, then the default sampler order penalties -> top_k -> top_p ->
                min_p -> temperature -> dist (typical, DRY, XTC and top-n-sigma off): penalties (repeat, frequency,
                presence) over the last n tokens of prompt and output (here n = the whole history); top-p and min-p on
                the law at temperature 1 (temperature comes last). It has no allowed-token-ids list.
  sglang        sglang/srt/layers/sampler.py, top_k_top_p_min_p_sampling_from_probs_torch (the plain sampler's
                truncation): logit bias -> temperature -> softmax -> top-k, top-p and min-p all decided on the
                original tempered law (top-p's cumulative sum is not renormalised over the top-k). No penalties here.

Where they differ, and why it matters (docs/sampling.md): top-p over the renormalised top-k rest keeps more tokens
than top-p over the original law; min-p before top-p (vLLM) or after it (transformers) keeps different sets;
temperature before truncation (vLLM, transformers, SGLang) or after it (llama.cpp) moves which tokens top-p and
min-p keep; presence and frequency penalties count the output only (vLLM) or the prompt too (llama.cpp). A
verifier must keep its own engine's law, so a conformance run declares the chain it follows.

Ties: top-k keeps every token tied with the k-th largest logit (vLLM's and transformers' `<` mask); greedy takes the
lowest id among maxima. Sorting is stable, so equal values keep id order.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ..errors import BadArgument


@dataclass(frozen=True)
class SamplingParams:
    """One request's sampling settings."""

    temperature: float = 1.0  # 0 = greedy (argmax of the processed logits)
    top_k: int = 0  # 0 = off
    top_p: float = 1.0  # 1 = off
    min_p: float = 0.0  # 0 = off
    logit_bias: tuple[tuple[int, float], ...] = ()  # (token id, bias) pairs
    allowed_token_ids: tuple[int, ...] | None = None  # None = all allowed
    repetition_penalty: float = 1.0  # 1 = off (CTRL-style: logit / r if > 0 else logit * r)
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    seed: int | None = None  # request-level: a seeded request must reproduce

    def set_names(self) -> frozenset[str]:
        """The parameters that differ from their defaults (seed aside: it changes no law)."""
        default = SamplingParams()
        return frozenset(f.name for f in fields(self) if f.name != "seed" and getattr(self, f.name) != getattr(
            default, f.name))  # fmt: skip

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True)
class History:
    """The tokens a row's penalties see."""

    prompt: tuple[int, ...] = ()
    output: tuple[int, ...] = ()  # output so far; at draft position i also d_1..d_{i-1} of this step

    def extended(self, tokens) -> History:
        """This history with `tokens` appended to the output."""
        return History(self.prompt, self.output + tuple(int(t) for t in tokens))


CHAINS: tuple[str, ...] = ("vllm", "transformers", "llama.cpp", "sglang")
#: The parameters each chain takes; a chain given another one set raises BadArgument.
_ALL = frozenset(f.name for f in fields(SamplingParams)) - {"seed"}
SUPPORTS: dict[str, frozenset[str]] = {
    "vllm": _ALL,
    "transformers": _ALL - {"presence_penalty", "frequency_penalty"},
    "llama.cpp": _ALL - {"allowed_token_ids"},
    "sglang": frozenset({"temperature", "top_k", "top_p", "min_p", "logit_bias"}),
}


# --- the steps -------------------------------------------------------------------------------------------------------


def _softmax(logits: np.ndarray) -> np.ndarray:
    finite = np.isfinite(logits)
    out = np.zeros_like(logits)
    shifted = np.exp(logits[finite] - logits[finite].max())
    out[finite] = shifted / shifted.sum()
    return out


def _allowed(logits: np.ndarray, ids) -> np.ndarray:
    if ids is None:
        return logits
    keep = np.zeros(logits.size, dtype=bool)
    keep[list(ids)] = True
    return np.where(keep, logits, -np.inf)


def _bias(logits: np.ndarray, pairs) -> np.ndarray:
    out = logits.copy()
    for token, bias in pairs:
        out[token] += bias
    return out


def _counts(tokens, vocab: int) -> np.ndarray:
    return np.bincount(np.asarray(tokens, dtype=np.int64), minlength=vocab)[:vocab]


def _repetition(logits: np.ndarray, seen: np.ndarray, r: float) -> np.ndarray:
    """CTRL's repetition penalty on the tokens `seen` [V] bool: logit / r where > 0, logit * r otherwise."""
    if r == 1.0:
        return logits
    penalised = np.where(logits > 0, logits / r, logits * r)
    return np.where(seen, penalised, logits)


def _presence_frequency(logits: np.ndarray, counts: np.ndarray, presence: float, frequency: float) -> np.ndarray:
    """OpenAI's definition: logit - frequency * count - presence * [count > 0]."""
    return logits - frequency * counts - presence * (counts > 0)


def _argmax_only(logits: np.ndarray) -> np.ndarray:
    out = np.full_like(logits, -np.inf)
    top = int(np.argmax(logits))  # the lowest id among maxima
    out[top] = logits[top]
    return out


def _top_k(logits: np.ndarray, k: int) -> np.ndarray:
    """Keep logits >= the k-th largest (ties with it kept)."""
    if k <= 0 or k >= logits.size:
        return logits
    kth = np.sort(logits)[logits.size - k]
    return np.where(logits < kth, -np.inf, logits)


def _top_p_ascending(logits: np.ndarray, p: float) -> np.ndarray:
    """vLLM's and transformers' top-p: sort ascending, remove where the cumulative softmax <= 1 - p, keep the largest.
    The softmax is over the logits as they are (after top-k: renormalised over the rest)."""
    if p >= 1.0:
        return logits
    order = np.argsort(logits, kind="stable")
    cumulative = np.cumsum(_softmax(logits[order]))
    remove = cumulative <= 1 - p
    remove[-1] = False
    out = logits.copy()
    out[order[remove]] = -np.inf
    return out


def _top_p_descending(logits: np.ndarray, p: float) -> np.ndarray:
    """llama.cpp's top-p: sort descending, keep the shortest prefix whose cumulative softmax reaches p."""
    if p >= 1.0:
        return logits
    order = np.argsort(-logits, kind="stable")
    cumulative = np.cumsum(_softmax(logits)[order])
    reached = np.flatnonzero(cumulative >= p)
    last = int(reached[0]) + 1 if reached.size else logits.size
    out = np.full_like(logits, -np.inf)
    out[order[:last]] = logits[order[:last]]
    return out


def _min_p(logits: np.ndarray, m: float) -> np.ndarray:
    """Remove tokens whose probability is < m times the largest one (the largest is always kept)."""
    if m <= 0.0:
        return logits
    probs = _softmax(logits)
    return np.where(probs < m * probs.max(), -np.inf, logits)


def _temperature(logits: np.ndarray, t: float) -> np.ndarray:
    return logits if t == 1.0 else logits / t


# --- the chains ------------------------------------------------------------------------------------------------------


def _vllm(logits, params: SamplingParams, history: History) -> np.ndarray:
    v = logits.size
    x = _allowed(logits, params.allowed_token_ids)
    x = _bias(x, params.logit_bias)
    output = _counts(history.output, v)
    x = _repetition(x, (_counts(history.prompt, v) + output) > 0, params.repetition_penalty)
    x = _presence_frequency(x, output, params.presence_penalty, params.frequency_penalty)
    if params.greedy:
        return _argmax_only(x)
    x = _temperature(x, params.temperature)
    x = _min_p(x, params.min_p)
    x = _top_k(x, params.top_k)
    return _top_p_ascending(x, params.top_p)


def _transformers(logits, params: SamplingParams, history: History) -> np.ndarray:
    v = logits.size
    x = _bias(logits, params.logit_bias)
    x = _repetition(x, (_counts(history.prompt, v) + _counts(history.output, v)) > 0, params.repetition_penalty)
    x = _allowed(x, params.allowed_token_ids)
    if params.greedy:
        return _argmax_only(x)
    x = _temperature(x, params.temperature)
    x = _top_k(x, params.top_k)
    x = _top_p_ascending(x, params.top_p)
    return _min_p(x, params.min_p)


def _llama_cpp(logits, params: SamplingParams, history: History) -> np.ndarray:
    v = logits.size
    x = _bias(logits, params.logit_bias)
    counts = _counts(history.prompt, v) + _counts(history.output, v)
    x = _repetition(x, counts > 0, params.repetition_penalty)
    x = _presence_frequency(x, counts, params.presence_penalty, params.frequency_penalty)
    if params.greedy:
        return _argmax_only(x)
    x = _top_k(x, params.top_k)
    x = _top_p_descending(x, params.top_p)
    x = _min_p(x, params.min_p)
    return _temperature(x, params.temperature)


def _sglang(logits, params: SamplingParams, history: History) -> np.ndarray:
    x = _bias(logits, params.logit_bias)
    if params.greedy:
        return _argmax_only(x)
    x = _temperature(x, params.temperature)
    probs = _softmax(x)
    order = np.argsort(-probs, kind="stable")
    sorted_probs = probs[order]
    before = np.cumsum(sorted_probs) - sorted_probs  # mass of the tokens ranked above, on the original law
    remove = before > params.top_p
    if params.top_k > 0:
        remove |= np.arange(x.size) >= params.top_k
    remove |= sorted_probs < sorted_probs[0] * params.min_p
    out = x.copy()
    out[order[remove]] = -np.inf
    return out


_CHAIN_FUNCTIONS = {"vllm": _vllm, "transformers": _transformers, "llama.cpp": _llama_cpp, "sglang": _sglang}


def check_chain(chain: str) -> str:
    if chain not in CHAINS:
        raise BadArgument(f"chain={chain!r} is not a processor chain specref knows; known: {', '.join(CHAINS)}")
    return chain


def check_params(chain: str, params: SamplingParams, vocab: int) -> SamplingParams:
    """params as `chain` takes them; BadArgument names a parameter the chain lacks or a value out of range."""
    extra = params.set_names() - SUPPORTS[check_chain(chain)]
    if extra:
        raise BadArgument(f"params={params!r}: chain {chain!r} has no {', '.join(sorted(extra))}")
    if not params.temperature >= 0:
        raise BadArgument(f"params.temperature={params.temperature!r} must be >= 0 (0 is greedy)")
    if not 0 < params.top_p <= 1:
        raise BadArgument(f"params.top_p={params.top_p!r} must be in (0, 1]")
    if not 0 <= params.min_p <= 1:
        raise BadArgument(f"params.min_p={params.min_p!r} must be in [0, 1]")
    if params.top_k < 0:
        raise BadArgument(f"params.top_k={params.top_k!r} must be >= 0 (0 is off)")
    if not params.repetition_penalty > 0:
        raise BadArgument(f"params.repetition_penalty={params.repetition_penalty!r} must be > 0 (1 is off)")
    ids = [t for t, _ in params.logit_bias] + list(params.allowed_token_ids or ())
    bad = [t for t in ids if not 0 <= t < vocab]
    if bad:
        raise BadArgument(f"params={params!r}: token ids {bad} are not in [0, {vocab})")
    if params.allowed_token_ids is not None and not params.allowed_token_ids:
        raise BadArgument("params.allowed_token_ids=(): an empty list allows no token")
    return params


def processed_logits(chain: str, logits: np.ndarray, params: SamplingParams, history: History) -> np.ndarray:
    """[V] float64 -> [V] float64, -inf where the chain excludes a token; its softmax is the law the chain samples
    from (temperature 0: every token but the argmax is -inf)."""
    logits = np.asarray(logits, dtype=np.float64)
    if logits.ndim != 1:
        raise BadArgument(f"logits has shape {logits.shape}; expected [V]")
    check_params(chain, params, logits.size)
    if not np.isfinite(logits).any() or np.isnan(logits).any() or np.isposinf(logits).any():
        raise BadArgument("logits must hold no NaN or +inf and at least one finite value")
    out = _CHAIN_FUNCTIONS[chain](logits, params, history)
    if not np.isfinite(out).any():
        raise BadArgument(f"params={params!r} exclude every token of these logits under chain {chain!r}")
    return out


def processed_law(chain: str, logits: np.ndarray, params: SamplingParams, history: History) -> np.ndarray:
    """[V] float64 probabilities summing to 1: the law `chain` samples the next token from (temperature 0: one-hot at
    the argmax of the processed logits, the lowest id on ties)."""
    return _softmax(processed_logits(chain, logits, params, history))


__all__ = ["CHAINS", "SUPPORTS", "History", "SamplingParams", "check_chain", "check_params", "processed_law",
           "processed_logits"]  # fmt: skip
