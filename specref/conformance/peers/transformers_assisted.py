"""transformers' assisted generation with its logits processors, under the pipeline contract.

    generate(prompts [B, T], n_new, seed) -> [B, n_new]: target.generate(assistant_model=draft, do_sample=True,
        temperature, top_p, min_p, repetition_penalty, sequence_bias), one prompt per call

The kernel contract cannot express it: transformers applies its processors inside generate(), to the target's and
the assistant's logits, over input_ids that hold the prompt, the output and (on the verify pass) this step's
candidates, and hands `_speculative_sampling` only the processed probabilities. So the whole pipeline is run, and
its 3-token continuations are checked against the exact law of transformers' own non-speculative sampler: at every
prefix, peers/transformers_sampling_law.law (the LogitsProcessorList transformers' `_get_logits_processor` builds,
over the prompt and the tokens so far), multiplied along the continuation (enumerated: V^2 prefixes of the tiny
target, V = 16).

PARAMS: temperature 0.8, top-p 0.9, min-p 0.05, repetition penalty 1.3 and a logit bias (`sequence_bias` on one
token): the processors whose order and history the verify path must keep. The control (`transformers-sampling-plain`)
is generate() without the assistant, same processors. Models: specref.hf's tiny pair. Seeding as
transformers-generate's (torch's global RNG, forked, from the harness's generator).
"""

from __future__ import annotations

import torch

from ...conformance.engine.seeds import global_rng_from
from ...hf.pipelines import PipelineAdapter, with_prompts
from ...reference.processors import SamplingParams
from . import prefix_law, transformers_sampling_law

PARAMS = SamplingParams(temperature=0.8, top_p=0.9, min_p=0.05, repetition_penalty=1.3, logit_bias=((3, 1.0),))
GAMMA = 3


def generate_kwargs(params: SamplingParams) -> dict:
    """The parameters as generate() keywords (top_k=0: transformers' default 50 off)."""
    return {"do_sample": True, "temperature": params.temperature, "top_k": params.top_k or 0, "top_p": params.top_p,
            "min_p": params.min_p or None, "repetition_penalty": params.repetition_penalty,
            "sequence_bias": {(t,): b for t, b in params.logit_bias} or None}  # fmt: skip


def exact_law(target, params: SamplingParams):
    """prompt, n_new -> {continuation: probability} under transformers' own processors at every prefix."""
    return prefix_law.exact_law(target, transformers_sampling_law.law, params)


def _pipeline(name: str, params: SamplingParams, assisted: bool, description: str) -> PipelineAdapter:
    from ...hf.tiny import tiny_pair

    target, draft = tiny_pair()

    def generate(prompts: torch.Tensor, n_new: int, seed) -> torch.Tensor:
        generator = seed if isinstance(seed, torch.Generator) else torch.Generator().manual_seed(int(seed))
        extra = {"assistant_model": draft} if assisted else {}
        if assisted:
            draft.generation_config.num_assistant_tokens = GAMMA
            draft.generation_config.num_assistant_tokens_schedule = "constant"
        rows = []
        with torch.random.fork_rng(devices=[]), torch.no_grad(), global_rng_from(generator):
            for prompt in prompts:
                out = target.generate(input_ids=prompt[None], attention_mask=torch.ones_like(prompt)[None],
                                      max_new_tokens=n_new, min_new_tokens=n_new, pad_token_id=0, eos_token_id=None,
                                      **generate_kwargs(params), **extra)  # fmt: skip
                rows.append(out[0, prompts.shape[1] :])
        return torch.stack(rows)

    import transformers

    adapter = PipelineAdapter(name, generate, exact_law(target, params), target.config.vocab_size, True,
                              f"transformers {transformers.__version__} {description}; {params}")  # fmt: skip
    return with_prompts(adapter)


def transformers_assisted_sampling() -> PipelineAdapter:
    return _pipeline("transformers-assisted-sampling", PARAMS, True,
                     f"generate(assistant_model=draft, do_sample=True), g = {GAMMA}, with its processors")  # fmt: skip


def transformers_sampling_plain() -> PipelineAdapter:
    return _pipeline("transformers-sampling-plain", PARAMS, False, "generate(do_sample=True), the control")


__all__ = ["PARAMS", "exact_law", "generate_kwargs", "transformers_assisted_sampling", "transformers_sampling_plain"]
