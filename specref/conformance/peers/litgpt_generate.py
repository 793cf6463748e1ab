"""LitGPT (Lightning AI's `litgpt`): its speculative decoding with a draft model, end to end (pipeline kind).

    litgpt.generate.speculative_decoding.generate(draft_model, target_model, prompt [T], max_returned_tokens,
        temperature=0.8, top_k=8 | top_p=0.9, speculative_k=3, include_prompt=False) -> (tokens, acceptance_rate)
    litgpt.generate.base.generate(model, prompt, max_returned_tokens, temperature, top_k, include_prompt=False)

Read in litgpt 0.5.13 (litgpt/generate/speculative_decoding.py): `speculative_decoding` drafts k tokens with the
draft model (`sample`: top-k, temperature, top-p, softmax), scores them with the target in one pass, keeps draft x
when p(x) >= q(x) or when `torch.rand(1) <= 1 - p/q` is false, and on a rejection samples from
normalize(max(0, p - q)) through `sample(..., apply_softmax=False, **sample_kwargs)`, which applies top-k and top-p
a second time, to the residual's probabilities. `generate` prefills both models, samples the first token from the
target (`next_token`), then loops speculative_decoding from it.

The models are the tiny Llamas of onnxruntime_genai (transformers_candidates.tiny_llama: the 4-layer target and the
1-layer draft), converted to litgpt's GPT by litgpt's own converter (litgpt.scripts.convert_hf_checkpoint
copy_weights_hf_llama) into a litgpt Config of the same shape; their logits equal the HF models' (max difference 0
on a test prompt). KV caches are reset after every call, as litgpt's `main` does. Randomness: torch's global RNG
(litgpt's sampling takes no generator), seeded per generate() call from the harness's seed, inside
torch.random.fork_rng.

Rows: litgpt-speculative (T=0.8, top_k=8), litgpt-speculative-top-p (T=0.8, top_p=0.9) and the control
litgpt-plain (base.generate, T=0.8, top_k=8). speculative_decoding's `generate` returns a variable number of tokens
that does not start with the first token it generated (see reports/peers/litgpt-speculative/upstream.md), so the
adapter asks it for one token more than n_new (max_returned_tokens = len(prompt) + n_new + 1, which returns at least
n_new) and keeps the first n_new it returns, as a caller asking for n tokens would.
"""

from __future__ import annotations

import torch

__all__ = ["litgpt_speculative", "litgpt_speculative_top_p", "litgpt_plain", "to_litgpt"]

TEMPERATURE, TOP_K, TOP_P, GAMMA = 0.8, 8, 0.9, 3
MAX_SEQ = 64


def to_litgpt(hf_model):
    """The HF tiny Llama as a litgpt GPT (litgpt's own weight converter), in eval mode."""
    from litgpt import GPT, Config
    from litgpt.scripts.convert_hf_checkpoint import copy_weights_hf_llama

    c = hf_model.config
    config = Config(name="specref-tiny-llama", block_size=MAX_SEQ, vocab_size=c.vocab_size,
                    padded_vocab_size=c.vocab_size, n_layer=c.num_hidden_layers, n_head=c.num_attention_heads,
                    n_query_groups=c.num_key_value_heads, n_embd=c.hidden_size,
                    head_size=c.hidden_size // c.num_attention_heads, rotary_percentage=1.0, parallel_residual=False,
                    bias=False, norm_class_name="RMSNorm", norm_eps=c.rms_norm_eps, mlp_class_name="LLaMAMLP",
                    intermediate_size=c.intermediate_size,
                    rope_base=int((c.rope_parameters or {}).get("rope_theta", 10000)))  # fmt: skip
    state: dict = {}
    copy_weights_hf_llama(config, {}, state, dict(hf_model.state_dict()))
    model = GPT(config)
    model.load_state_dict(state, strict=True)
    model.eval()
    model.max_seq_length = MAX_SEQ
    model.set_kv_cache(batch_size=1)
    return model


def _reset(*models) -> None:
    for model in models:
        for block in model.transformer.h:
            block.attn.kv_cache.reset_parameters()


def _adapter(mode: str):
    from ...hf.pipelines import PipelineAdapter, _check_prompts, _exact_law, with_prompts
    from ...hf.processors import Processors
    from . import version
    from .onnxruntime_genai import _draft_spec
    from .transformers_candidates import tiny_llama

    hf_target = tiny_llama()
    target = to_litgpt(hf_target)
    draft = to_litgpt(tiny_llama(_draft_spec())) if mode != "plain" else None
    top_p = TOP_P if mode == "top_p" else 1.0
    top_k = None if mode == "top_p" else TOP_K
    sampling = {"temperature": TEMPERATURE, "top_k": top_k, "top_p": top_p}

    def one(prompt: torch.Tensor, n_new: int) -> list[int]:
        if draft is None:
            from litgpt.generate.base import generate

            out = generate(target, prompt, len(prompt) + n_new, include_prompt=False, **sampling)
            _reset(target)
            return out.tolist()
        from litgpt.generate.speculative_decoding import generate

        out, _ = generate(draft, target, prompt, len(prompt) + n_new + 1, speculative_k=GAMMA,
                          include_prompt=False, **sampling)  # fmt: skip
        _reset(draft, target)
        return out.tolist()[:n_new]

    def generate_rows(prompts: torch.Tensor, n_new: int, seed: int) -> torch.Tensor:
        _check_prompts(prompts)
        rows = []
        with torch.random.fork_rng(devices=[]), torch.inference_mode():
            torch.manual_seed(seed)
            for prompt in prompts:
                tokens = one(prompt.clone(), n_new)
                if len(tokens) != n_new:
                    raise RuntimeError(f"litgpt returned {len(tokens)} tokens for n_new={n_new}: {tokens}")
                rows.append(tokens)
        return torch.tensor(rows, dtype=torch.long)

    what = {"plain": f"litgpt.generate.base.generate, T={TEMPERATURE}, top_k={TOP_K} (the control)",
            "top_k": f"speculative_decoding.generate with the draft model, speculative_k={GAMMA}, T={TEMPERATURE}, "
                     f"top_k={TOP_K}",
            "top_p": f"speculative_decoding.generate with the draft model, speculative_k={GAMMA}, T={TEMPERATURE}, "
                     f"top_p={TOP_P}"}[mode]  # fmt: skip
    processors = Processors(temperature=TEMPERATURE, top_k=top_k, top_p=top_p if top_p < 1 else None)
    return with_prompts(
        PipelineAdapter(
            f"litgpt[{mode},T={TEMPERATURE}]",
            generate_rows,
            _exact_law(hf_target, processors),
            hf_target.config.vocab_size,
            True,
            f"{version('litgpt')} {what}, on CPU; tiny Llamas converted by litgpt's copy_weights_hf_llama; torch's "
            "global RNG seeded per call (fork_rng)"
            + ("; asks max_returned_tokens = len(prompt) + n_new + 1 and keeps the first n_new" if draft else ""),
        )
    )


def litgpt_speculative():
    return _adapter("top_k")


def litgpt_speculative_top_p():
    return _adapter("top_p")


def litgpt_plain():
    return _adapter("plain")
