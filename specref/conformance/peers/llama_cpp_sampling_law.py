"""llama.cpp's own non-speculative processed law, from its code: (logits [V], SamplingParams, History) -> probs [V].

    law(logits, params, history)   # llama-cpp-python 0.3.36 and the llama.cpp it vendors; run, never ported

The sampler chain is llama.cpp's (libllama, through llama-cpp-python's ctypes binding), built in the order
llama-cpp-python's `Llama._init_sampler` builds it, with a logit-bias sampler first as llama.cpp's
`common_sampler_init` adds one: logit_bias -> penalties (repeat, frequency, presence over the last n tokens; n = the
whole history) -> top_k -> typical (off) -> top_p -> min_p -> temp. Every history token (prompt, then output) is
accepted into the chain (`llama_sampler_accept`), then the chain is applied (`llama_sampler_apply`) to a
`llama_token_data_array` of the logits; the candidates it leaves, with their logits, are the law (softmax over them:
what the `dist` sampler draws from). At temperature 0 `Llama._init_sampler` uses the greedy sampler after the
penalties: the law is one-hot at the token it selects.
llama.cpp has no allowed-token-ids list (`SUPPORTS`).
"""

from __future__ import annotations

import ctypes

import numpy as np

ENGINE = "llama.cpp"
SUPPORTS = frozenset({"temperature", "top_k", "top_p", "min_p", "logit_bias", "repetition_penalty",
                      "presence_penalty", "frequency_penalty"})  # fmt: skip


def version() -> str:
    import llama_cpp

    return f"llama-cpp-python {llama_cpp.__version__}"


def _chain(params, vocab_size: int, history_length: int):
    import llama_cpp as lc

    chain = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
    if params.logit_bias:
        biases = (lc.llama_logit_bias * len(params.logit_bias))()
        for i, (token, bias) in enumerate(params.logit_bias):
            biases[i].token, biases[i].bias = int(token), float(bias)
        lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_logit_bias(vocab_size, len(params.logit_bias), biases))
    lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_penalties(
        vocab_size, max(history_length, 1), params.repetition_penalty, params.frequency_penalty,
        params.presence_penalty))  # fmt: skip
    if params.temperature > 0:
        lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_top_k(params.top_k))
        lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_typical(1.0, 1))
        lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_top_p(params.top_p, 1))
        lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_min_p(params.min_p, 1))
        lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_temp(params.temperature))
    else:
        lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_greedy())
    return chain


def law(logits: np.ndarray, params, history) -> np.ndarray:
    """[V] float64: the law llama.cpp's sampler chain draws the next token from."""
    import llama_cpp as lc

    extra = params.set_names() - SUPPORTS
    if extra:
        raise ValueError(f"params={params!r}: llama.cpp has no {', '.join(sorted(extra))}")
    values = np.asarray(logits, dtype=np.float32)
    vocab_size = values.size
    tokens = list(history.prompt) + list(history.output)
    chain = _chain(params, vocab_size, len(tokens))
    try:
        for token in tokens:
            lc.llama_sampler_accept(chain, int(token))
        data = (lc.llama_token_data * vocab_size)()
        for i in range(vocab_size):
            data[i].id, data[i].logit, data[i].p = i, float(values[i]), 0.0
        array = lc.llama_token_data_array(data=data, size=vocab_size, selected=-1, sorted=False)
        lc.llama_sampler_apply(chain, ctypes.byref(array))
        kept = [(data[i].id, data[i].logit) for i in range(array.size)]
        chosen = int(data[array.selected].id) if params.temperature == 0 else None
    finally:
        lc.llama_sampler_free(chain)
    ids = np.array([t for t, _ in kept], dtype=np.int64)
    kept_logits = np.array([x for _, x in kept], dtype=np.float64)
    out = np.zeros(vocab_size)
    finite = np.isfinite(kept_logits)
    if chosen is not None:  # the greedy sampler's choice
        out[chosen] = 1.0
        return out
    weights = np.exp(kept_logits[finite] - kept_logits[finite].max())
    out[ids[finite]] = weights / weights.sum()
    return out


__all__ = ["ENGINE", "SUPPORTS", "law", "version"]
