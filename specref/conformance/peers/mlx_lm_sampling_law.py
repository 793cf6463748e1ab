"""MLX-LM's own non-speculative processed law, from its code: (logits [V], SamplingParams, History) -> probs [V].

    law(logits, params, history)   # mlx-lm 0.32.2 on mlx's CPU device; run, never ported

`mlx_lm.sample_utils.make_logits_processors(logit_bias, repetition_penalty, presence_penalty, frequency_penalty)`
(each over the last `context_size` tokens; here the whole history) runs on the logits as `generate_step` runs it,
then the log-softmax, then the filters `make_sampler` chains (read from the sampler it returns, in its order:
top-p, min-p, top-k, on the law at temperature 1); `categorical_sampling` divides by the temperature last. The
law is the softmax of the filtered logprobs / temperature; at temperature 0 `make_sampler` returns the greedy
sampler (argmax of the processed logits).
MLX-LM has no allowed-token-ids list (`SUPPORTS`). specref has no reference chain of its order (the nearest is
llama.cpp's, which applies top-k before top-p): properties/test_processor_fixtures_exact.py names where they differ.
"""

from __future__ import annotations

import numpy as np

ENGINE = "mlx-lm"
SUPPORTS = frozenset({"temperature", "top_k", "top_p", "min_p", "logit_bias", "repetition_penalty",
                      "presence_penalty", "frequency_penalty"})  # fmt: skip


def version() -> str:
    from importlib.metadata import version as dist_version

    return f"mlx-lm {dist_version('mlx-lm')} (mlx {dist_version('mlx')})"


def law(logits: np.ndarray, params, history) -> np.ndarray:
    """[V] float64: the law MLX-LM's sampler draws the next token from."""
    import mlx.core as mx
    from mlx_lm import sample_utils

    extra = params.set_names() - SUPPORTS
    if extra:
        raise ValueError(f"params={params!r}: MLX-LM has no {', '.join(sorted(extra))}")
    tokens = list(history.prompt) + list(history.output)
    size = max(len(tokens), 1)
    processors = sample_utils.make_logits_processors(
        logit_bias=dict(params.logit_bias) or None,
        repetition_penalty=params.repetition_penalty if params.repetition_penalty != 1 else None,
        repetition_context_size=size, presence_penalty=params.presence_penalty or None, presence_context_size=size,
        frequency_penalty=params.frequency_penalty or None, frequency_context_size=size,
    )  # fmt: skip
    x = mx.array(np.asarray(logits, dtype=np.float32))[None]  # [1, V]
    history_tokens = mx.array(tokens, dtype=mx.int32)
    for processor in processors:
        x = processor(history_tokens, x)
    logprobs = x - mx.logsumexp(x, axis=-1, keepdims=True)
    vocab_size = int(np.asarray(logits).size)
    sampler = sample_utils.make_sampler(temp=params.temperature, top_p=params.top_p, min_p=params.min_p,
                                        top_k=params.top_k)  # fmt: skip
    if sampler is sample_utils.greedy_sampler:
        out = np.zeros(vocab_size)
        out[int(sampler(logprobs).item())] = 1.0
        return out
    chain = dict(zip(sampler.__code__.co_freevars, (c.cell_contents for c in sampler.__closure__), strict=True))
    for method in chain["sampling_methods"]:  # make_sampler's own filters, in its order
        logprobs = method(logprobs)
    scaled = np.array(logprobs[0].astype(mx.float32), dtype=np.float64) * (1.0 / chain["temp"])  # categorical_sampling
    out = np.zeros(vocab_size)
    finite = np.isfinite(scaled)
    weights = np.exp(scaled[finite] - scaled[finite].max())
    out[finite] = weights / weights.sum()
    return out


__all__ = ["ENGINE", "SUPPORTS", "law", "version"]
