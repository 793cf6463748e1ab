"""mistral.rs (the `mistralrs` Python package): its Runner with sampling, end to end (pipeline kind).

    Runner(Which.Plain(model_id=folder, arch=Architecture.Llama, tokenizer_json=...))
        .send_completion_request(CompletionRequest(prompt="w3 w5 ...", max_tokens=n, temperature=0.8, top_k=8,
                                                   ignore_eos=True)).choices[0].text  ->  " w7 w9 w3"

Speculative paths of mistralrs 0.9.5's Python package: one, an MTP assistant (Runner(mtp_model=..., mtp_n_predict=...));
target/draft speculative decoding was removed ("legacy target/draft speculative decoding in TOML configs was removed;
use MTP through --mtp-model or the MTP API instead", in its binary). `mistralrs_mtp` builds that Runner: on a CPU the
engine refuses it at load ("MTP speculative decoding currently requires PagedAttention for this pipeline.", and with
paged_attn=True: "paged attention is unavailable on this device or with no_kv_cache"), before it reads the assistant.
Its MTP assistants are Gemma 4 assistant checkpoints, Qwen3.5/Qwen3.8 built-in MTP heads or DFlash drafts; this row
passes the target's own folder, which is enough to reach that refusal, not to draft on a GPU.

`mistralrs_plain` is the control: the same Runner without speculative decoding, the tiny Llama of
transformers_candidates (save_pretrained, config.json with rope_theta at the top level, which mistral.rs's Llama
config requires), and a word-level tokenizer over "w0".."w15" with a byte-level pre-tokenizer and decoder (mistral.rs
needs a decoder it can read bytes from; WordLevel's default and WordPiece are refused: "can't determine decoder
type"). Prompts go in as text ("w3 w5 ..." tokenizes to [3, 5, ...], no BOS) and continuations come back as text; the
rows of one prompt go out as requests of up to 32 choices (n_choices = best_of: with best_of left at 1, 0.9.5
returns one choice whatever n_choices is; with best_of = n_choices every sequence comes back, none is selected).
KV cache: f32 (MISTRALRS_CPU_KV_F32=1; on a CPU it is f16 by default, "Using f16 KV cache on CPU (set
MISTRALRS_CPU_KV_F32=1 for f32)"). Randomness: the engine's own RNG; Runner(seed=...) is refused on a CPU
("cannot seed the CPU rng with set_seed"), so runs are not reproducible from the harness's seed.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import torch

__all__ = ["mistralrs_plain", "mistralrs_mtp", "model_folder"]

TEMPERATURE, TOP_K, GAMMA = 0.8, 8, 3
CHOICES = 32  # sequences per request (n_choices), at most Runner's default max_seqs


def _tokenizer(vocab_size: int):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({f"Ġw{i}": i for i in range(vocab_size)}, unk_token="Ġw0"))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=False)]
    )
    tokenizer.decoder = decoders.ByteLevel()
    return tokenizer


def model_folder() -> Path:
    """The tiny Llama as mistral.rs loads it, once: weights, config.json with rope_theta, tokenizer.json."""
    from ...hf import tiny
    from .transformers_candidates import tiny_llama

    model = tiny_llama()
    folder = tiny.cache_dir() / "mistralrs" / f"llama-{model.config.hidden_size}-{model.config.num_hidden_layers}"
    if (folder / "tokenizer.json").is_file():
        return folder
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    model.save_pretrained(tmp)
    config = json.loads((tmp / "config.json").read_text())
    config["rope_theta"] = (config.get("rope_parameters") or {}).get("rope_theta", 10000.0)
    (tmp / "config.json").write_text(json.dumps(config, indent=1))
    _tokenizer(config["vocab_size"]).save(str(tmp / "tokenizer.json"))
    folder.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(tmp, folder)
    except OSError:  # built by another process first
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _runner(**speculative):
    os.environ.setdefault("MISTRALRS_CPU_KV_F32", "1")  # its CPU KV cache is f16 unless this is set (its log says)
    from mistralrs import Architecture, Runner, Which

    folder = model_folder()
    which = Which.Plain(model_id=str(folder), arch=Architecture.Llama, tokenizer_json=str(folder / "tokenizer.json"))
    return Runner(which=which, **speculative)


def _adapter(speculative: bool):
    from mistralrs import CompletionRequest

    from ...hf.pipelines import PipelineAdapter, _check_prompts, _exact_law, with_prompts
    from ...hf.processors import Processors
    from . import version
    from .transformers_candidates import tiny_llama

    target = tiny_llama()
    extra = {"mtp_model": str(model_folder()), "mtp_n_predict": GAMMA} if speculative else {}
    try:
        runner = _runner(**extra)
    except Exception as error:  # noqa: BLE001 -- the engine's refusal is the row's outcome; its Rust backtrace is cut
        raise RuntimeError(f"mistralrs.Runner({', '.join(extra) or 'plain'}): {str(error).splitlines()[0]}") from None

    def generate(prompts: torch.Tensor, n_new: int, seed: int) -> torch.Tensor:
        _check_prompts(prompts)
        rows: list[list[int] | None] = [None] * len(prompts)
        by_prompt: dict[tuple[int, ...], list[int]] = {}
        for i, prompt in enumerate(prompts.tolist()):
            by_prompt.setdefault(tuple(prompt), []).append(i)
        for prompt, indices in by_prompt.items():
            for start in range(0, len(indices), CHOICES):  # n_choices: independent sequences of one request
                chunk = indices[start : start + CHOICES]
                request = CompletionRequest(prompt=" ".join(f"w{t}" for t in prompt), model="tiny", max_tokens=n_new,
                                            n_choices=len(chunk), best_of=len(chunk), temperature=TEMPERATURE,
                                            top_k=TOP_K, ignore_eos=True)  # fmt: skip
                choices = sorted(runner.send_completion_request(request).choices, key=lambda c: c.index)
                if len(choices) != len(chunk):
                    raise RuntimeError(f"asked for n_choices={len(chunk)}, got {len(choices)} choices")
                for i, choice in zip(chunk, choices):
                    tokens = [int(word.removeprefix("w")) for word in choice.text.split()]
                    if len(tokens) != n_new:
                        raise RuntimeError(f"a choice was {choice.text!r}: {len(tokens)} tokens for n_new={n_new}")
                    rows[i] = tokens
        return torch.tensor(rows, dtype=torch.long)

    mode = f"mtp_model, mtp_n_predict={GAMMA}" if speculative else "no speculative decoding"
    return with_prompts(
        PipelineAdapter(
            f"mistralrs[{mode},T={TEMPERATURE},top_k={TOP_K}]",
            generate,
            _exact_law(target, Processors(temperature=TEMPERATURE, top_k=TOP_K)),
            target.config.vocab_size,
            True,
            f"{version('mistralrs')} Runner.send_completion_request ({mode}), temperature={TEMPERATURE}, "
            f"top_k={TOP_K}, on CPU; tiny Llama (f32 safetensors, f32 KV cache), the engine's own unseeded RNG",
        )
    )


def mistralrs_plain():
    return _adapter(speculative=False)


def mistralrs_mtp():
    return _adapter(speculative=True)
