"""ONNX Runtime GenAI: its Generator with speculative decoding (a draft model, or n-gram lookup), end to end (pipeline).

    og.Model(folder with genai_config.json)  ->  og.Generator(model, GeneratorParams(do_sample=True, T, top_k, seed))
        .append_tokens(prompt); while not is_done(): generate_next_token(); get_next_tokens()

The models are tiny Llamas trained on specref.hf.tiny's corpus (transformers_candidates.tiny_llama: the 4-layer
target, and a 1-layer, 32-wide draft), exported to ONNX once by onnxruntime_genai's own model builder
(`python -m onnxruntime_genai.models.builder -i <hf folder> -o <out> -p fp32 -e cpu`) and cached under
$SPECREF_CACHE/onnxruntime-genai/. Three configurations of the same target, as docs/SpeculativeDecoding.md of
onnxruntime-genai describes them:
  draft   genai_config.json with a `model.draft` decoder (the draft's export) and speculative.max_draft_tokens=3
  ngram   speculative.ngram_size=2, max_draft_tokens=3 (n-gram lookup over the committed history, no draft model)
  plain   no speculative section (the control)
The builder needs the model's eos_token_id and the engine requires it inside the vocabulary: it is id 0, and a
row that ends early on it is padded with it, as the expected law is (target_law with eos_token_id=0). Sampling:
do_sample=True, temperature 0.8, top_k 8 (the engine requires top_k > 0 to sample drafts); one prompt per
Generator; random_seed drawn per row from the harness's seed.

pad_token_id: the builder writes the model's (0 here), and the Generator then treats prompt tokens equal to it as
padding (masked out of attention): prompt [15, 14, 0, 0] was continued as [15, 14] (first-token counts over 300 seeds
matched the HF model on [15, 14], not on the prompt; the first runs failed joint_law, the plain control too). The
config sets pad_token_id = vocab_size (16), outside the vocabulary, which the engine accepts, so no prompt token is
padding; with it the first-token law matches the HF model on the whole prompt.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import torch

__all__ = ["ortgenai_draft", "ortgenai_ngram", "ortgenai_plain", "MODES", "model_folder"]

TEMPERATURE, TOP_K, GAMMA, NGRAM, EOS = 0.8, 8, 3, 2, 0
MODES = {
    "draft": {"max_draft_tokens": GAMMA},
    "ngram": {"ngram_size": NGRAM, "max_draft_tokens": GAMMA},
    "plain": None,
}


def _draft_spec():
    from .transformers_candidates import LlamaSpec

    return LlamaSpec(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                     train_steps=40, seed=4)  # fmt: skip


def _hf_folder(model, out: Path) -> Path:
    """The tiny Llama as the builder reads it: save_pretrained, eos_token_id=0, a word-level tokenizer over ids."""
    from .transformers_candidates import word_level_tokenizer

    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    config = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, "eos_token_id": EOS}))
    word_level_tokenizer({f"w{i}": i for i in range(config["vocab_size"])}).save_pretrained(out)
    return out


def export(model, out_dir: Path) -> Path:
    """One tiny Llama -> ONNX (fp32, CPU) with genai_config.json, by onnxruntime_genai.models.builder; cached."""
    if (out_dir / "genai_config.json").is_file():
        return out_dir
    tmp = out_dir.with_name(out_dir.name + f".tmp{os.getpid()}")
    hf = _hf_folder(model, tmp / "hf")
    subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(hf), "-o", str(tmp / "onnx"),
                    "-p", "fp32", "-e", "cpu", "-c", str(tmp / "cache")], check=True, capture_output=True)  # fmt: skip
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(tmp / "onnx", out_dir)
    except OSError:  # another process exported it first
        pass
    shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def model_folder(mode: str) -> Path:
    """A folder whose genai_config.json runs `mode` (MODES): target/ and draft/ exports copied in, no `..` paths."""
    import onnxruntime_genai as og

    from ...hf import tiny
    from .transformers_candidates import tiny_llama

    root = tiny.cache_dir() / "onnxruntime-genai" / f"og{og.__version__}"
    folder = root / f"config-{mode}"
    if (folder / "genai_config.json").is_file():
        return folder
    parts = {"target": export(tiny_llama(), root / "export-target")}
    if mode == "draft":
        parts["draft"] = export(tiny_llama(_draft_spec()), root / "export-draft")
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    for name, src in parts.items():
        shutil.copytree(src, tmp / name, dirs_exist_ok=True)
    config = copy.deepcopy(json.loads((parts["target"] / "genai_config.json").read_text()))
    config["model"]["decoder"]["filename"] = "target/model.onnx"
    config["model"]["pad_token_id"] = config["model"]["vocab_size"]  # no id of the vocabulary: see the docstring
    if "draft" in parts:
        draft = json.loads((parts["draft"] / "genai_config.json").read_text())["model"]["decoder"]
        config["model"]["draft"] = {**draft, "filename": "draft/model.onnx"}
    if MODES[mode] is not None:
        config["speculative"] = dict(MODES[mode])
    (tmp / "genai_config.json").write_text(json.dumps(config, indent=1))
    for name in ("tokenizer.json", "tokenizer_config.json"):
        if (parts["target"] / name).is_file():
            shutil.copy(parts["target"] / name, tmp / name)
    try:
        os.replace(tmp, folder)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def _adapter(mode: str):
    import onnxruntime_genai as og

    from ...hf.pipelines import PipelineAdapter, _check_prompts, _exact_law, with_prompts
    from ...hf.processors import Processors
    from .transformers_candidates import tiny_llama

    target = tiny_llama()
    model = og.Model(str(model_folder(mode)))
    stats = {"calls": 0, "draft_tokens_proposed": 0, "draft_tokens_accepted": 0}

    def generate(prompts: torch.Tensor, n_new: int, seed: int) -> torch.Tensor:
        _check_prompts(prompts)
        seeds = torch.randint(0, 2**31 - 1, (len(prompts),), generator=torch.Generator().manual_seed(seed)).tolist()
        rows = []
        for prompt, row_seed in zip(prompts.tolist(), seeds):
            params = og.GeneratorParams(model)
            params.set_search_options(do_sample=True, temperature=TEMPERATURE, top_k=TOP_K, top_p=1.0,
                                      max_length=len(prompt) + n_new, random_seed=row_seed)  # fmt: skip
            generator = og.Generator(model, params)
            generator.append_tokens(prompt)
            tokens: list[int] = []
            while not generator.is_done():
                generator.generate_next_token()
                tokens.extend(int(t) for t in generator.get_next_tokens())
            if mode != "plain":
                spec = generator.get_speculative_stats()
                stats["draft_tokens_proposed"] += int(spec["draft_tokens_proposed"])
                stats["draft_tokens_accepted"] += int(spec["draft_tokens_accepted"])
            stats["calls"] += 1
            if len(tokens) > n_new or (len(tokens) < n_new and (not tokens or tokens[-1] != EOS)):
                raise RuntimeError(f"the Generator returned {tokens} for n_new={n_new} (no EOS ending it early)")
            rows.append(tokens + [EOS] * (n_new - len(tokens)))
        return torch.tensor(rows, dtype=torch.long)

    what = {"draft": f"a draft model (model.draft, max_draft_tokens={GAMMA})",
            "ngram": f"n-gram lookup (ngram_size={NGRAM}, max_draft_tokens={GAMMA})",
            "plain": "no speculative decoding (the control)"}[mode]  # fmt: skip
    adapter = PipelineAdapter(
        f"onnxruntime-genai[{mode},T={TEMPERATURE},top_k={TOP_K}]",
        generate,
        _exact_law(target, Processors(temperature=TEMPERATURE, top_k=TOP_K), eos_token_id=EOS),
        target.config.vocab_size,
        True,
        f"onnxruntime-genai {og.__version__} Generator with {what}, do_sample=True, on CPU (fp32); tiny Llamas "
        "exported by onnxruntime_genai.models.builder",
    )
    adapter = with_prompts(adapter)
    object.__setattr__(adapter, "acceptance_stats", stats)
    return adapter


def ortgenai_draft():
    return _adapter("draft")


def ortgenai_ngram():
    return _adapter("ngram")


def ortgenai_plain():
    return _adapter("plain")
