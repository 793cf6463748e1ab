"""vllm.LLM end to end: the tiny target with a tiny draft model as its speculative_config (pipeline kind).

    LLM(model=target_dir, speculative_config={"method": "draft_model", "model": draft_dir, ...}).generate(...)

The models are specref.hf's tiny GPT-2 target and a one-head variant of its draft (see draft_spec), loaded from
their save_pretrained folders (local paths, no hub, no tokenizer: skip_tokenizer_init=True, token-id prompts).
Sampling: temperature 0.8, top_k 8, exactly n_new tokens (min_tokens = max_tokens, ignore_eos). Each prompt is its
own request with its own `seed` (vLLM's per-request generator), drawn from the harness's seed. The engine runs
in-process (VLLM_ENABLE_V1_MULTIPROCESSING=0) with a 1 GiB KV cache on CPU (VLLM_CPU_KVCACHE_SPACE) unless the
caller set them.
"""

from __future__ import annotations

import dataclasses
import functools
import os

import torch

__all__ = ["vllm_generate", "GAMMA", "TEMPERATURE", "TOP_K"]

TEMPERATURE, TOP_K, GAMMA = 0.8, 8, 3


def draft_spec():
    """specref.hf's tiny draft with one head of 32 instead of two of 16: vLLM's CPU attention rejects head_dim 16
    ("RuntimeError: Unsupported CPU attention configuration: head_dim=16 isa=2 kv_cache_idx=0", raised by
    torch.ops._C.get_scheduler_metadata from vllm/v1/attention/backends/cpu_attn.py). Any draft keeps the law."""
    from ...hf import tiny

    return dataclasses.replace(tiny.DRAFT, n_head=1)


@functools.cache
def _llm(target_dir: str, draft_dir: str | None):
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    from vllm import LLM

    return LLM(
        model=target_dir,
        skip_tokenizer_init=True,
        dtype="float32",
        max_model_len=64,
        max_num_seqs=256,
        enforce_eager=True,
        speculative_config=None
        if draft_dir is None
        else {"method": "draft_model", "model": draft_dir, "num_speculative_tokens": GAMMA},
    )


def vllm_generate_temperature_only():
    """The same at temperature 0.8 without top-k (vLLM's apply_top_k_only raises on CPU; see vllm_generate)."""
    return vllm_generate(top_k=None)


def vllm_generate_plain():
    """The control: the same engine, target and sampling without speculative decoding (temperature 0.8 only)."""
    return vllm_generate(top_k=None, speculative=False)


def vllm_generate(top_k: int | None = TOP_K, speculative: bool = True):
    """The pipeline adapter over vllm.LLM.generate with a draft model (or none: speculative=False)."""
    import vllm
    from vllm import SamplingParams

    from ...hf import tiny
    from ...hf.pipelines import PipelineAdapter, _exact_law, with_prompts
    from ...hf.processors import Processors

    target = tiny.load_or_build(tiny.TARGET)
    tiny.load_or_build(draft_spec())
    folders = [str(tiny.cache_dir() / tiny.recipe_key(spec)) for spec in (tiny.TARGET, draft_spec())]
    llm = _llm(folders[0], folders[1] if speculative else None)

    def generate(prompts: torch.Tensor, n_new: int, seed: int) -> torch.Tensor:
        seeds = torch.randint(0, 2**31 - 1, (len(prompts),), generator=torch.Generator().manual_seed(seed)).tolist()
        params = [
            SamplingParams(
                temperature=TEMPERATURE,
                top_k=top_k or -1,
                max_tokens=n_new,
                min_tokens=n_new,
                ignore_eos=True,
                seed=row_seed,
                detokenize=False,
            )  # fmt: skip
            for row_seed in seeds
        ]
        outputs = llm.generate([{"prompt_token_ids": row} for row in prompts.tolist()], params, use_tqdm=False)
        return torch.tensor([list(out.outputs[0].token_ids) for out in outputs], dtype=torch.long)

    adapter = PipelineAdapter(
        f"vllm-generate[{f'draft_model g={GAMMA}' if speculative else 'no speculation'},T={TEMPERATURE},top_k={top_k}]",
        generate,
        _exact_law(target, Processors(temperature=TEMPERATURE, top_k=top_k)),
        target.config.vocab_size,
        True,
        f"vllm {vllm.__version__} LLM.generate "
        + (
            f"with speculative_config method=draft_model, num_speculative_tokens={GAMMA}"
            if speculative
            else "without speculative decoding (the control)"
        )
        + f", on {'cuda' if torch.cuda.is_available() else 'cpu'}",
        kernel="vllm" if speculative else "",
    )
    return with_prompts(adapter)
