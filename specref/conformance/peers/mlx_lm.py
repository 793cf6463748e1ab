"""MLX-LM's speculative generation on Linux CPU (mlx[cpu]), end to end with the tiny target and draft (pipeline).

    mlx_lm.generate.speculative_generate_step(prompt, model, draft_model, num_draft_tokens=3, sampler=...)

Read in mlx-lm 0.32.2 (mlx_lm/generate.py): the draft model samples num_draft_tokens tokens with the sampler; the
target scores them in one forward pass and samples its own token at every position with the same sampler
(`_step(model, ..., n_predict=num_draft + 1)`); drafts are kept while the target's sample equals them, then the
target's sample at the first mismatch (or after the last draft) is emitted. Sample-and-match (rule "match"): every
emitted token is the target's own draw, so the law must be the target's; the acceptance of draft d is p(d).

The models are specref.hf's tiny GPT-2 pair, loaded from their save_pretrained folders by mlx_lm.utils.load_model
(its gpt2 model, its weight sanitising; no tokenizer). Sampler: make_sampler(temp=0.8, top_k=8), i.e.
softmax(top-8(logits) / 0.8). Randomness: mx.random's global key, seeded with mx.random.seed(seed) once per
generate() call; rows consume it in turn.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

__all__ = ["mlx_lm_generate", "mlx_status"]

TEMPERATURE, TOP_K, GAMMA = 0.8, 8, 3


def mlx_status() -> str:
    """Whether mlx imports and computes on this machine's CPU, in words (for the peers report)."""
    try:
        import mlx.core as mx

        value = float(mx.softmax(mx.array([0.0, 0.0]), axis=-1)[0])
        return f"mlx {mx.__version__} runs here on {mx.default_device()} (softmax check {value:g})"
    except Exception as error:  # noqa: BLE001
        return f"mlx does not run here: {type(error).__name__}: {error}"


def _gpt2_layout(spec) -> Path:
    """The tiny model saved as the hub's GPT-2 checkpoints are (GPT2Model keys: no "transformer." prefix, no tied
    lm_head), the layout mlx_lm's gpt2 `sanitize` reads; config.json gains n_ctx, which its ModelArgs requires."""
    from safetensors.torch import load_file, save_file

    from ...hf import tiny

    source = tiny.cache_dir() / tiny.recipe_key(spec)
    folder = tiny.cache_dir() / "mlx" / tiny.recipe_key(spec)
    if not (folder / "model.safetensors").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        weights = load_file(source / "model.safetensors")
        save_file({k.removeprefix("transformer."): v for k, v in weights.items() if k != "lm_head.weight"},
                  folder / "model.safetensors")  # fmt: skip
        config = json.loads((source / "config.json").read_text())
        (folder / "config.json").write_text(json.dumps({**config, "n_ctx": config["n_positions"]}))
    return folder


def mlx_lm_generate():
    """The pipeline adapter over mlx_lm's speculative_generate_step."""
    import mlx.core as mx
    import mlx_lm
    from mlx_lm.generate import speculative_generate_step
    from mlx_lm.sample_utils import make_sampler
    from mlx_lm.utils import load_model

    from ...hf import tiny
    from ...hf.pipelines import PipelineAdapter, _exact_law, with_prompts
    from ...hf.processors import Processors

    target = tiny.load_or_build(tiny.TARGET)
    tiny.load_or_build(tiny.DRAFT)
    mlx_target, _ = load_model(_gpt2_layout(tiny.TARGET))
    mlx_draft, _ = load_model(_gpt2_layout(tiny.DRAFT))
    sampler = make_sampler(temp=TEMPERATURE, top_k=TOP_K)

    def generate(prompts: torch.Tensor, n_new: int, seed: int) -> torch.Tensor:
        mx.random.seed(seed)
        rows = []
        for prompt in prompts.tolist():
            steps = speculative_generate_step(mx.array(prompt), mlx_target, mlx_draft, num_draft_tokens=GAMMA,
                                              max_tokens=n_new, sampler=sampler)  # fmt: skip
            rows.append([int(token) for token, _, _ in steps])
        return torch.tensor(rows, dtype=torch.long)

    adapter = PipelineAdapter(
        f"mlx-lm-generate[g={GAMMA},T={TEMPERATURE},top_k={TOP_K}]",
        generate,
        _exact_law(target, Processors(temperature=TEMPERATURE, top_k=TOP_K)),
        target.config.vocab_size,
        True,
        f"mlx-lm {mlx_lm.__version__} (mlx {mx.__version__}, {mx.default_device()}) speculative_generate_step with "
        f"the tiny draft model, num_draft_tokens={GAMMA}; sample-and-match (rule 'match')",
    )
    return with_prompts(adapter)
