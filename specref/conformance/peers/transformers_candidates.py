"""transformers' other candidate generators, each through `generate(..., do_sample=True)` (pipeline kind).

    transformers-prompt-lookup  generate(prompt_lookup_num_tokens=3)            PromptLookupCandidateGenerator
    transformers-universal      generate(assistant_model=a, tokenizer=t, assistant_tokenizer=ta)
                                                                                UniversalSpeculativeDecodingGenerator
    transformers-early-exit     generate(assistant_early_exit=1)                EarlyExitCandidateGenerator

Prompt lookup returns no draft logits, so generate() verifies by sample-and-match (rule "match"); the other two
return the assistant's processed scores as q and verify with `_speculative_sampling` (rule "exact").

Universal assisted decoding: the target keeps specref.hf's tiny target and a word-level tokenizer over its 16 ids
("w0".."w15"). The assistant is the tiny draft re-indexed into another vocabulary of 20 tokens: its id i < 16 is the
target's token PERMUTATION[i] (its embedding row moved there: the same draft law, under other ids), and ids 16..19
are tokens the target does not have ("x0".."x3", random rows). transformers then prunes the assistant's LM head to
the shared tokens and maps ids through the tokens' strings (AssistantToTargetTranslator).

Early exit: GPT-2 ignores config.num_hidden_layers (its forward runs every block), so there the early exit would
silently be the full model. This row uses a tiny Llama (whose forward runs layers[:num_hidden_layers]) trained on
the same corpus as the GPT-2 models, deterministically, cached beside them; the assistant is its first layer.

Sampling as transformers-generate: temperature 0.8, top_k 8, exactly n_new tokens, one prompt per call (assisted
generation supports batch size 1), transformers' global RNG seeded per call inside torch.random.fork_rng.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import asdict, dataclass

import torch

__all__ = [
    "prompt_lookup_pipeline",
    "universal_pipeline",
    "early_exit_pipeline",
    "reindexed_assistant",
    "tiny_llama",
    "PERMUTATION",
]

TEMPERATURE, TOP_K, GAMMA = 0.8, 8, 3
EARLY_EXIT_LAYER = 1
PERMUTATION = (3, 0, 7, 12, 1, 15, 9, 4, 14, 2, 11, 6, 13, 5, 10, 8)  # assistant id i < 16 -> target id
EXTRA_TOKENS = 4  # assistant tokens the target does not have


def _generate_fn(target, per_call_kwargs):
    """(prompts [B, T], n_new, seed) -> [B, n_new] through target.generate, one prompt per call."""
    from ...hf.pipelines import _check_prompts, sample_rows
    from ...hf.processors import Processors

    processors = Processors(temperature=TEMPERATURE, top_k=TOP_K)

    def generate(prompts: torch.Tensor, n_new: int, seed: int) -> torch.Tensor:
        _check_prompts(prompts)
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.manual_seed(seed)
            return sample_rows(target, prompts, n_new, processors, **per_call_kwargs())

    return generate, processors


def _adapter(name, target, generate, processors, description):
    import transformers

    from ...hf.pipelines import PipelineAdapter, _exact_law, with_prompts

    adapter = PipelineAdapter(
        name,
        generate,
        _exact_law(target, processors),
        target.config.vocab_size,
        True,
        f"transformers {transformers.__version__} {description}",
    )
    return with_prompts(adapter)


def prompt_lookup_pipeline():
    """generate(prompt_lookup_num_tokens=3, do_sample=True) on the tiny target."""
    from ...hf import tiny

    target = tiny.load_or_build(tiny.TARGET)
    generate, processors = _generate_fn(target, lambda: {"prompt_lookup_num_tokens": GAMMA})
    return _adapter(
        f"transformers-prompt-lookup[g={GAMMA},T={TEMPERATURE},top_k={TOP_K}]",
        target,
        generate,
        processors,
        f"generate(prompt_lookup_num_tokens={GAMMA}, do_sample=True): PromptLookupCandidateGenerator, no draft "
        "logits, sample-and-match verification (rule 'match')",
    )


def word_level_tokenizer(vocab: dict[str, int]):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    unk = min(vocab, key=vocab.get)
    core = Tokenizer(models.WordLevel(vocab, unk_token=unk))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(tokenizer_object=core, unk_token=unk)


def reindexed_assistant(draft, seed: int = 5):
    """The draft under the assistant vocabulary: row i < 16 of its (tied) embedding is the draft's row
    PERMUTATION[i]; rows 16.. are random (seeded) tokens the target lacks. Returns (assistant, its tokenizer)."""
    from transformers import GPT2LMHeadModel

    config = draft.config.to_dict()
    vocab_size = draft.config.vocab_size + EXTRA_TOKENS
    assistant = GPT2LMHeadModel(type(draft.config).from_dict({**config, "vocab_size": vocab_size}))
    state = {k: v.clone() for k, v in draft.state_dict().items()}
    wte = state["transformer.wte.weight"]  # [V, H]
    extra = torch.randn(EXTRA_TOKENS, wte.shape[1], generator=torch.Generator().manual_seed(seed)) * wte.std()
    state["transformer.wte.weight"] = torch.cat([wte[list(PERMUTATION)], extra])  # [V + extra, H]
    state["lm_head.weight"] = state["transformer.wte.weight"]
    assistant.load_state_dict(state)
    assistant.eval()
    vocab = {f"w{target_id}": i for i, target_id in enumerate(PERMUTATION)}
    vocab.update({f"x{j}": len(PERMUTATION) + j for j in range(EXTRA_TOKENS)})
    return assistant, word_level_tokenizer(vocab)


def universal_pipeline():
    """generate(assistant_model, tokenizer, assistant_tokenizer, do_sample=True): universal assisted decoding."""
    from ...hf import tiny

    target, draft = tiny.tiny_pair()
    assistant, assistant_tokenizer = reindexed_assistant(draft)
    target_tokenizer = word_level_tokenizer({f"w{i}": i for i in range(target.config.vocab_size)})
    assistant.generation_config.num_assistant_tokens = GAMMA
    assistant.generation_config.num_assistant_tokens_schedule = "constant"
    kwargs = {"assistant_model": assistant, "tokenizer": target_tokenizer, "assistant_tokenizer": assistant_tokenizer}
    generate, processors = _generate_fn(target, lambda: kwargs)
    return _adapter(
        f"transformers-universal[g={GAMMA},T={TEMPERATURE},top_k={TOP_K}]",
        target,
        generate,
        processors,
        "generate(assistant_model, tokenizer, assistant_tokenizer, do_sample=True): "
        "UniversalSpeculativeDecodingGenerator (assistant = the tiny draft re-indexed into a 20-token vocabulary, "
        "16 shared by string), _speculative_sampling (rule 'exact')",
    )


@dataclass(frozen=True)
class LlamaSpec:
    hidden_size: int = 64
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    intermediate_size: int = 128
    train_steps: int = 150
    batch_size: int = 32
    lr: float = 5e-3
    seed: int = 3


LLAMA = LlamaSpec()


def tiny_llama(spec: LlamaSpec = LLAMA):
    """A tiny Llama trained on specref.hf.tiny's corpus (same recipe as tiny.train), cached under $SPECREF_CACHE."""
    import transformers
    from transformers import LlamaForCausalLM

    from ...hf import tiny

    recipe = {"spec": asdict(spec), "corpus": asdict(tiny.CORPUS), "torch": torch.__version__,
              "transformers": transformers.__version__}  # fmt: skip
    path = tiny.cache_dir() / f"llama-{zlib.crc32(json.dumps(recipe, sort_keys=True).encode()):08x}"
    return tiny.cached(path, lambda: LlamaForCausalLM.from_pretrained(path, local_files_only=True),
                       lambda: _train(spec))  # fmt: skip


def _train(spec: LlamaSpec):
    from transformers import LlamaConfig, LlamaForCausalLM

    from ...hf import tiny

    config = LlamaConfig(vocab_size=tiny.CORPUS.vocab_size, hidden_size=spec.hidden_size,
                         num_hidden_layers=spec.num_hidden_layers, num_attention_heads=spec.num_attention_heads,
                         num_key_value_heads=spec.num_attention_heads, intermediate_size=spec.intermediate_size,
                         max_position_embeddings=64, bos_token_id=0, eos_token_id=None, pad_token_id=0,
                         tie_word_embeddings=False)  # fmt: skip
    torch.manual_seed(spec.seed)
    return tiny.fit(LlamaForCausalLM(config), tiny.CORPUS, seed=spec.seed, lr=spec.lr, train_steps=spec.train_steps,
                    batch_size=spec.batch_size)  # fmt: skip


def early_exit_pipeline():
    """generate(assistant_early_exit=1, do_sample=True) on the tiny Llama."""
    target = tiny_llama()
    target.generation_config.num_assistant_tokens = GAMMA
    target.generation_config.num_assistant_tokens_schedule = "constant"
    generate, processors = _generate_fn(target, lambda: {"assistant_early_exit": EARLY_EXIT_LAYER})
    return _adapter(
        f"transformers-early-exit[layer {EARLY_EXIT_LAYER},g={GAMMA},T={TEMPERATURE},top_k={TOP_K}]",
        target,
        generate,
        processors,
        f"generate(assistant_early_exit={EARLY_EXIT_LAYER}, do_sample=True): EarlyExitCandidateGenerator on a "
        f"tiny Llama ({LLAMA.num_hidden_layers} layers; the draft is its first {EARLY_EXIT_LAYER}), "
        "_speculative_sampling (rule 'exact')",
    )
