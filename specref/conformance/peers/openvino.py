"""OpenVINO GenAI: its LLMPipeline with a draft model, speculative decoding with sampling, end to end (pipeline kind).

    LLMPipeline(target_dir, "CPU", draft_model=draft_model(draft_dir, "CPU"), scheduler_config=...)
        .generate(ov.Tensor(ids [1, T]), GenerationConfig(do_sample=True, num_assistant_tokens=3, rng_seed=s, ...))

The models are specref.hf's tiny GPT-2 target and draft, exported once to OpenVINO IR by optimum-intel
(`OVModelForCausalLM.from_pretrained(dir, export=True)`) and cached under $SPECREF_CACHE/openvino/. The pipeline
needs tokenizer files even for token-id input: a word-level tokenizer over the 16 ids ("w0".."w15") converted by
openvino_tokenizers; no text is ever tokenized. Inference precision is f32 on both models, and prefix caching is
off (with it on, about 1 call in 300 failed a `content_length` check in sequence_group.cpp, the crash of
openvinotoolkit/openvino.genai#4190).

Sampling: temperature 0.8, top_k 8, everything else neutral, exactly n_new tokens (max_new_tokens, ignore_eos; the
EOS id is set to 0 because -1 fails the engine's check, and min_new_tokens stays 0 since it would mask that id). One
prompt per generate() call; its rng_seed (the sampler's std::mt19937) is drawn per row from the harness's seed.
The control (`openvino_genai_plain`) is the same pipeline without the draft model.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import torch

__all__ = ["openvino_genai", "openvino_genai_plain", "export", "AcceptanceStats"]

TEMPERATURE, TOP_K, GAMMA = 0.8, 8, 3


def export(model_dir: Path, out_dir: Path) -> Path:
    """A save_pretrained folder -> OpenVINO IR (optimum-intel) plus openvino_tokenizers files, once (cached)."""
    if (out_dir / "openvino_model.xml").is_file() and (out_dir / "openvino_tokenizer.xml").is_file():
        return out_dir
    import openvino as ov
    from openvino_tokenizers import convert_tokenizer
    from optimum.intel import OVModelForCausalLM

    tmp = out_dir.with_name(out_dir.name + f".tmp{os.getpid()}")
    model = OVModelForCausalLM.from_pretrained(model_dir, export=True, compile=False)
    model.save_pretrained(tmp)
    from .transformers_candidates import word_level_tokenizer

    vocab_size = json.loads((model_dir / "config.json").read_text())["vocab_size"]
    hf_tokenizer = word_level_tokenizer({f"w{i}": i for i in range(vocab_size)})
    hf_tokenizer.save_pretrained(tmp)
    tokenizer, detokenizer = convert_tokenizer(hf_tokenizer, with_detokenizer=True)
    ov.save_model(tokenizer, tmp / "openvino_tokenizer.xml")
    ov.save_model(detokenizer, tmp / "openvino_detokenizer.xml")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(tmp, out_dir)
    except OSError:  # another process exported the same model first
        shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def _ir_dir(spec) -> Path:
    import openvino_genai

    from ...hf import tiny

    tiny.load_or_build(spec)
    key = tiny.recipe_key(spec)
    return export(tiny.cache_dir() / key, tiny.cache_dir() / "openvino" / f"{key}-ov{openvino_genai.__version__}")


@dataclass
class AcceptanceStats:
    """The engine's own counters, summed over the calls (SDPerModelsPerfMetrics of each result). They do not form
    an acceptance rate: measured here, `accepted` exceeds `drafted` on short generations (3 new tokens, 200 calls:
    50 drafted, 151 accepted), so they are kept as the engine reports them and compared with nothing."""

    calls: int = 0
    drafted: int = 0  # get_num_draft_tokens()
    accepted: int = 0  # get_num_accepted_tokens()
    generated: int = 0  # tokens the calls returned


def _scheduler_config():
    import openvino_genai

    config = openvino_genai.SchedulerConfig()
    config.enable_prefix_caching = False
    config.cache_size = 1  # GB of KV cache: plenty for the tiny models
    return config


def _pipeline(speculative: bool):
    import openvino_genai

    from ...hf import tiny

    properties = {"INFERENCE_PRECISION_HINT": "f32"}
    extra = {}
    if speculative:
        extra["draft_model"] = openvino_genai.draft_model(str(_ir_dir(tiny.DRAFT)), "CPU", **properties)
    return openvino_genai.LLMPipeline(
        str(_ir_dir(tiny.TARGET)), "CPU", scheduler_config=_scheduler_config(), **extra, **properties
    )


def _generation_config(n_new: int, seed: int, speculative: bool):
    import openvino_genai

    config = openvino_genai.GenerationConfig()
    config.do_sample = True
    config.temperature = TEMPERATURE
    config.top_k = TOP_K
    config.top_p = 1.0
    config.repetition_penalty = 1.0
    config.max_new_tokens = n_new
    # The tiny models have no EOS: the engine wants a valid id there (-1 fails its check), and ignore_eos keeps
    # it from stopping. min_new_tokens stays 0: it would mask that id's logit, which changes the law.
    config.eos_token_id = 0
    config.ignore_eos = True
    config.rng_seed = seed
    if speculative:
        config.num_assistant_tokens = GAMMA
    return config


def openvino_genai(speculative: bool = True):
    """The pipeline adapter over LLMPipeline.generate with the tiny draft model (or none: speculative=False)."""
    import openvino as ov
    import openvino_genai as genai

    from ...hf import tiny
    from ...hf.pipelines import PipelineAdapter, _check_prompts, _exact_law, with_prompts
    from ...hf.processors import Processors

    target = tiny.load_or_build(tiny.TARGET)
    pipe = _pipeline(speculative)
    stats = AcceptanceStats()

    def generate(prompts: torch.Tensor, n_new: int, seed: int) -> torch.Tensor:
        _check_prompts(prompts)
        seeds = torch.randint(0, 2**31 - 1, (len(prompts),), generator=torch.Generator().manual_seed(seed)).tolist()
        rows = []
        for prompt, row_seed in zip(prompts.tolist(), seeds):
            ids = ov.Tensor(torch.tensor([prompt], dtype=torch.long).numpy())
            result = pipe.generate(ids, _generation_config(n_new, row_seed, speculative))
            tokens = list(result.tokens[0])
            if len(tokens) != n_new:
                raise RuntimeError(f"LLMPipeline.generate returned {len(tokens)} tokens, asked for n_new={n_new}")
            rows.append(tokens)
            stats.calls += 1
            stats.generated += n_new
            if speculative:
                metrics = result.extended_perf_metrics
                stats.drafted += int(metrics.get_num_draft_tokens())
                stats.accepted += int(metrics.get_num_accepted_tokens())
        return torch.tensor(rows, dtype=torch.long)

    mode = f"draft_model num_assistant_tokens={GAMMA}" if speculative else "no draft model"
    adapter = PipelineAdapter(
        f"openvino-genai[{mode},T={TEMPERATURE},top_k={TOP_K}]",
        generate,
        _exact_law(target, Processors(temperature=TEMPERATURE, top_k=TOP_K)),
        target.config.vocab_size,
        True,
        f"openvino-genai {genai.__version__} LLMPipeline.generate "
        + (f"with draft_model (num_assistant_tokens={GAMMA})" if speculative else "without a draft model (the control)")
        + ", do_sample=True, on CPU (f32, prefix caching off); models exported by optimum-intel",
    )
    adapter = with_prompts(adapter)
    object.__setattr__(adapter, "acceptance_stats", stats)
    return adapter


def openvino_genai_plain():
    """The control: the same pipeline, models and sampling without the draft model."""
    return openvino_genai(speculative=False)
