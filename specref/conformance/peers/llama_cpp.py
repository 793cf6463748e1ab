"""llama.cpp through llama-cpp-python: its own speculative generation, run end to end on GGUF files (pipeline kind).

    Llama(model_path, draft_model=LlamaPromptLookupDecoding(...)).generate(prompt, top_k, temp, ...)

What the binding exposes (llama_cpp/llama.py `Llama.generate`, llama_cpp/llama_speculative.py, 0.3.36): a
`draft_model` that proposes draft tokens and no draft probabilities; the one it ships is prompt lookup
(`LlamaPromptLookupDecoding`, n-gram matches in the context). generate() evaluates the last token and the drafts
in one batch (logits for every position, logits_all=True), then at each position samples a token with its
sampler chain from that position's logits and keeps going while the sampled token equals the draft: speculative
sampling by sample-and-match (rule "match"). Every emitted token is a draw from the target's processed law, so
the law of the continuation must be the target's, whatever the drafts; the acceptance of draft d is p(d).

The models are specref.hf's tiny GPT-2 target, converted to GGUF (F32) offline by llama.cpp's own converter
(convert_hf_to_gguf.py and gguf-py from the llama-cpp-python source distribution, found through
$SPECREF_LLAMA_CPP_SRC = its vendor/llama.cpp folder). The tiny models have no tokenizer: the converter's
`set_vocab` is replaced by a plain list of 16 byte-level names (prompts are token ids: no tokenizer ever runs).

Sampling: top_k=8, temp=0.8, everything else in the chain neutral (top_p=1, min_p=0, typical_p=1, no penalties),
so the law is softmax(top-8(logits) / 0.8), the specref.hf Processors(temperature=0.8, top_k=8) law. One
continuation per generate() call; its seed (llama.cpp's dist sampler, std::mt19937) is drawn per row from the
harness's seed.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

__all__ = ["llama_cpp_generate", "convert_to_gguf", "llama_cpp_source", "DraftStats"]

TEMPERATURE, TOP_K, GAMMA = 0.8, 8, 3


def llama_cpp_source() -> Path:
    """llama.cpp's source folder (vendor/llama.cpp of the llama-cpp-python sdist), from $SPECREF_LLAMA_CPP_SRC."""
    where = os.environ.get("SPECREF_LLAMA_CPP_SRC")
    if not where or not (Path(where) / "convert_hf_to_gguf.py").is_file():
        raise RuntimeError(
            f"SPECREF_LLAMA_CPP_SRC={where!r} is not a llama.cpp source folder with convert_hf_to_gguf.py; "
            "`pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36`, unpack it and point "
            "SPECREF_LLAMA_CPP_SRC at its vendor/llama.cpp (`nox -s peers` does this)"
        )
    return Path(where)


def convert_to_gguf(model_dir: Path, out_file: Path) -> Path:
    """model_dir (a GPT-2 save_pretrained folder) -> out_file (GGUF, F32) with llama.cpp's converter."""
    if out_file.is_file():
        return out_file
    source = llama_cpp_source()
    for path in (source / "gguf-py", source):  # the converter's own gguf-py first, as convert_hf_to_gguf.py does
        if str(path) not in sys.path:
            sys.path.insert(0, str(path))
    import gguf
    from conversion.gpt2 import GPT2Model

    class TinyGPT2(GPT2Model):
        model_arch = gguf.MODEL_ARCH.GPT2  # the converter wants it declared on every subclass

        def set_vocab(self):  # no tokenizer files: byte-level names, one per id, never used to tokenize
            vocab_size = self.hparams["vocab_size"]
            names = ["\u010a"] + [chr(ord("a") + i) for i in range(vocab_size - 1)]  # llama.cpp looks up "\n"
            self.gguf_writer.add_tokenizer_model("gpt2")
            self.gguf_writer.add_tokenizer_pre("default")
            self.gguf_writer.add_token_list(names)
            self.gguf_writer.add_token_types([gguf.TokenType.NORMAL] * vocab_size)
            self.gguf_writer.add_token_merges(["a b"])  # llama.cpp's BPE vocab requires the key

        def set_gguf_parameters(self):
            self.hparams.setdefault("n_ctx", self.hparams["n_positions"])
            super().set_gguf_parameters()

    out_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_file.with_name(out_file.name + f".tmp{os.getpid()}")
    TinyGPT2(model_dir, gguf.LlamaFileType.ALL_F32, tmp).write()
    os.replace(tmp, out_file)
    return out_file


@dataclass
class DraftStats:
    """What the shipped prompt-lookup draft model proposed, counted by wrapping it (it stays llama.cpp's code)."""

    calls: int = 0
    proposed: int = 0
    proposals: list = field(default_factory=list)  # (context, drafts) of the first few calls


def _counting_lookup(stats: DraftStats):
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    class CountingLookup(LlamaPromptLookupDecoding):
        def __call__(self, input_ids, /, **kwargs):
            drafts = super().__call__(input_ids, **kwargs)
            stats.calls += 1
            stats.proposed += len(drafts)
            return drafts

    return CountingLookup(max_ngram_size=2, num_pred_tokens=GAMMA)


def llama_cpp_generate():
    """The pipeline adapter: llama-cpp-python generate() with prompt lookup over the tiny target in GGUF."""
    import llama_cpp

    from ...hf import tiny
    from ...hf.pipelines import PipelineAdapter, _exact_law, with_prompts
    from ...hf.processors import Processors

    target = tiny.load_or_build(tiny.TARGET)
    folder = tiny.cache_dir() / tiny.recipe_key(tiny.TARGET)
    gguf_file = convert_to_gguf(folder, tiny.cache_dir() / "gguf" / f"{tiny.recipe_key(tiny.TARGET)}-f32.gguf")
    stats = DraftStats()
    llm = llama_cpp.Llama(
        model_path=str(gguf_file),
        n_ctx=64,
        n_batch=64,
        n_threads=1,
        draft_model=_counting_lookup(stats),
        verbose=False,
    )

    def generate(prompts: torch.Tensor, n_new: int, seed: int) -> torch.Tensor:
        seeds = torch.randint(0, 2**31 - 1, (len(prompts),), generator=torch.Generator().manual_seed(seed)).tolist()
        rows = []
        for prompt, row_seed in zip(prompts.tolist(), seeds):
            llm.set_seed(row_seed)
            tokens = llm.generate(prompt, top_k=TOP_K, top_p=1.0, min_p=0.0, typical_p=1.0, temp=TEMPERATURE,
                                  repeat_penalty=1.0, reset=True)  # fmt: skip
            rows.append([next(tokens) for _ in range(n_new)])
            tokens.close()
        return torch.tensor(rows, dtype=torch.long)

    adapter = PipelineAdapter(
        f"llama-cpp-generate[prompt-lookup g<={GAMMA},T={TEMPERATURE},top_k={TOP_K}]",
        generate,
        _exact_law(target, Processors(temperature=TEMPERATURE, top_k=TOP_K)),
        target.config.vocab_size,
        True,
        f"llama-cpp-python {llama_cpp.__version__} Llama.generate with draft_model=LlamaPromptLookupDecoding "
        f"(max_ngram_size=2, num_pred_tokens={GAMMA}) on a GGUF (F32) conversion of the tiny target; "
        "sample-and-match verification (rule 'match')",
    )
    adapter = with_prompts(adapter)
    object.__setattr__(adapter, "draft_stats", stats)  # read by the peers report
    return adapter
