"""llama.cpp's speculative path with its penalties and truncations, under the pipeline contract.

    Llama(model_path, draft_model=LlamaPromptLookupDecoding(...)).generate(prompt, top_k, top_p, min_p, temp,
        repeat_penalty, frequency_penalty, presence_penalty)           # llama-cpp-python 0.3.36

The same engine, models and draft model as `llama-cpp-generate` (peers/llama_cpp.py: the tiny target in GGUF F32,
prompt lookup, sample-and-match), with PARAMS: the penalties and top-p/min-p llama.cpp's chain applies. Its law is
llama.cpp's own non-speculative sampler's (peers/llama_cpp_sampling_law.py: libllama's chain) at every prefix, with
the history llama-cpp-python's `generate()` gives its sampler: `Llama.sample` accepts each token it samples
(`llama_sampler_sample`) and no prompt token, so the penalties count the output only (llama.cpp's own server accepts
the prompt too; the reference chain `llama.cpp` counts both). logit_bias is not a generate() argument (refused).
"""

from __future__ import annotations

import torch

from ...reference.processors import SamplingParams
from . import llama_cpp_sampling_law, prefix_law

PARAMS = SamplingParams(temperature=0.8, top_k=8, top_p=0.9, min_p=0.05, repetition_penalty=1.3,
                        frequency_penalty=0.2, presence_penalty=0.3)  # fmt: skip


def llama_cpp_generate_penalties():
    import llama_cpp

    from ...hf import tiny
    from ...hf.pipelines import PipelineAdapter, with_prompts
    from .llama_cpp import GAMMA, DraftStats, _counting_lookup, convert_to_gguf

    target = tiny.load_or_build(tiny.TARGET)
    folder = tiny.cache_dir() / tiny.recipe_key(tiny.TARGET)
    gguf_file = convert_to_gguf(folder, tiny.cache_dir() / "gguf" / f"{tiny.recipe_key(tiny.TARGET)}-f32.gguf")
    stats = DraftStats()
    llm = llama_cpp.Llama(model_path=str(gguf_file), n_ctx=64, n_batch=64, n_threads=1,
                          draft_model=_counting_lookup(stats), verbose=False)  # fmt: skip
    p = PARAMS

    def generate(prompts: torch.Tensor, n_new: int, seed: int) -> torch.Tensor:
        seeds = torch.randint(0, 2**31 - 1, (len(prompts),), generator=torch.Generator().manual_seed(seed)).tolist()
        rows = []
        for prompt, row_seed in zip(prompts.tolist(), seeds, strict=True):
            llm.set_seed(row_seed)
            tokens = llm.generate(prompt, top_k=p.top_k, top_p=p.top_p, min_p=p.min_p, typical_p=1.0,
                                  temp=p.temperature, repeat_penalty=p.repetition_penalty,
                                  frequency_penalty=p.frequency_penalty, presence_penalty=p.presence_penalty,
                                  reset=True)  # fmt: skip
            rows.append([next(tokens) for _ in range(n_new)])
            tokens.close()
        return torch.tensor(rows, dtype=torch.long)

    law = prefix_law.exact_law(target, llama_cpp_sampling_law.law, p, prompt_in_history=False)
    adapter = PipelineAdapter(
        f"llama-cpp-generate-penalties[prompt-lookup g<={GAMMA}]", generate, law, target.config.vocab_size, True,
        f"llama-cpp-python {llama_cpp.__version__} Llama.generate with draft_model=LlamaPromptLookupDecoding on the "
        f"tiny target in GGUF (F32), {p}; sample-and-match (rule 'match'); law: libllama's own chain at every "
        "prefix, the output in its penalties' history",
    )  # fmt: skip
    adapter = with_prompts(adapter)
    object.__setattr__(adapter, "draft_stats", stats)
    return adapter


__all__ = ["PARAMS", "llama_cpp_generate_penalties"]
