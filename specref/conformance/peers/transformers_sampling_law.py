"""transformers' own non-speculative processed law, from its code: (logits [V], SamplingParams, History) -> probs [V].

    law(logits, params, history)   # run, never ported

The processors are the ones `GenerationMixin._get_logits_processor` builds from a `GenerationConfig` (so the order is
transformers'): `sequence_bias` for the logit bias, `repetition_penalty`, `suppress_tokens` (every id not allowed:
transformers has no allow list), then, sampling, the warpers temperature, top-k, top-p and min-p. They run on float32
scores, as `generate()` runs them; input_ids are the prompt and the output so far. Greedy (temperature 0) is the
argmax of the processed scores. transformers has no presence or frequency penalty: `SUPPORTS` leaves them out.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

ENGINE = "transformers"
SUPPORTS = frozenset({"temperature", "top_k", "top_p", "min_p", "logit_bias", "allowed_token_ids",
                      "repetition_penalty"})  # fmt: skip


def version() -> str:
    import transformers

    return f"transformers {transformers.__version__}"


@functools.lru_cache(maxsize=4)
def _model(vocab_size: int):
    import transformers

    config = transformers.GPT2Config(
        vocab_size=vocab_size, n_layer=1, n_embd=8, n_head=2, n_positions=256, bos_token_id=None, eos_token_id=None
    )
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config)  # its _get_logits_processor only: its weights are never used


def generation_config(params, vocab_size: int):
    """specref's SamplingParams as a transformers GenerationConfig."""
    import transformers

    greedy = params.temperature == 0
    allowed = params.allowed_token_ids
    return transformers.GenerationConfig(
        do_sample=not greedy, temperature=None if greedy else params.temperature, top_k=params.top_k or None,
        top_p=params.top_p if params.top_p < 1 else None, min_p=params.min_p or None,
        repetition_penalty=params.repetition_penalty if params.repetition_penalty != 1 else None,
        sequence_bias={(t,): b for t, b in params.logit_bias} or None,
        suppress_tokens=None if allowed is None else [t for t in range(vocab_size) if t not in allowed],
        eos_token_id=None, bos_token_id=None, pad_token_id=None,
    )  # fmt: skip


def processors(params, vocab_size: int, input_length: int):
    """transformers' LogitsProcessorList for these parameters, built by its own _get_logits_processor."""
    import transformers

    ids = torch.zeros((1, max(input_length, 1)), dtype=torch.long)
    return _model(vocab_size)._get_logits_processor(
        generation_config=generation_config(params, vocab_size), input_ids_seq_length=ids.shape[1],
        encoder_input_ids=ids, prefix_allowed_tokens_fn=None, logits_processor=transformers.LogitsProcessorList(),
        device="cpu",
    )  # fmt: skip


def law(logits: np.ndarray, params, history) -> np.ndarray:
    """[V] float64: the law transformers' generate(do_sample=True) draws the next token from."""
    extra = params.set_names() - SUPPORTS
    if extra:
        raise ValueError(f"params={params!r}: transformers has no {', '.join(sorted(extra))}")
    if not history.prompt:
        raise ValueError("history.prompt=(): transformers generates after a prompt of at least one token")
    vocab_size = int(np.asarray(logits).size)
    input_ids = torch.tensor([list(history.prompt + history.output)])
    chain = processors(params, vocab_size, input_ids.shape[1])
    scores = chain(input_ids, torch.tensor(np.asarray(logits, dtype=np.float32))[None])[0]  # [V] float32
    if params.temperature == 0:
        out = np.zeros(vocab_size)
        out[int(scores.argmax())] = 1.0
        return out
    return torch.softmax(scores.double(), -1).numpy()


__all__ = ["ENGINE", "SUPPORTS", "generation_config", "law", "processors", "version"]
