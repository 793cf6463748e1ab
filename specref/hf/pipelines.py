"""Pipeline adapters: whole speculative pipelines (two models, processors, sampling) as the harness sees them.

    PipelineAdapter.generate(prompts [B, T] int64, n_new, seed) -> [B, n_new] int64
    PipelineAdapter.exact_law(prompt, n_new) -> {continuation tuple: probability}   (the target's processed law)

A pipeline conforms when its continuations follow exact_law. Built here:
  * specref-generate      specref's own generation (specref.hf.generation, batched verify);
  * transformers-generate transformers' `generate(assistant_model=draft, do_sample=True)`;
  * two processor-mismatch mutants of specref's generation (expected to fail):
      mutant-ratio-q-unprocessed   q in the accept ratio is the draft law before processing, drafts after it;
      mutant-verify-skips-top-k    the target's top-k is skipped on the verify path.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from ..conformance.engine.seeds import global_rng_from
from . import target_law
from .generation import SpecConfig, Verify, speculative_generate
from .processors import Processors
from .requests import RequestSeeding

Generate = Callable[[torch.Tensor, int, int], torch.Tensor]


@dataclass(frozen=True)
class PipelineAdapter:
    name: str
    generate: Generate  # (prompts [B, T], n_new, seed) -> [B, n_new]
    exact_law: Callable[[Sequence[int], int], dict[tuple[int, ...], float]]
    vocab_size: int
    expected_conforming: bool = True
    description: str = ""
    suggested_prompts: tuple[tuple[int, ...], ...] = ()  # in-distribution prompts for the models behind it
    kind: str = "pipeline"  # as specref.conformance.adapters.Adapter.kind
    kernel: str = ""  # the built-in that runs its verification kernel alone (where the rare-edge probe reaches it)
    # Request-level capabilities (docs/pipelines.md, "Requests"): generate takes seed=None (an unseeded request),
    # a per-row list of seeds, and counters() gives the last call's acceptance counters, one dict per row.
    unseeded: bool = False
    request_seeds: bool = False
    counters: Callable[[], list[dict]] | None = None
    eos_token_id: int | None = None  # the token after which a row's counters count nothing

    def law_array(self, prompt: Sequence[int], n_new: int) -> np.ndarray:  # [V] * n
        law = np.zeros((self.vocab_size,) * n_new)
        for outcome, prob in self.exact_law(prompt, n_new).items():
            law[outcome] = prob
        return law


def _exact_law(target, processors: Processors, eos_token_id: int | None = None):
    def exact_law(prompt: Sequence[int], n_new: int) -> dict[tuple[int, ...], float]:
        law = target_law.continuation_law(target, prompt, n_new, processors, eos_token_id=eos_token_id)
        return target_law.as_dict(law)

    return exact_law


def _check_prompts(prompts: torch.Tensor) -> None:
    if not isinstance(prompts, torch.Tensor) or prompts.dim() != 2 or prompts.dtype != torch.long:
        raise ValueError(f"prompts: expected a [B, T] int64 tensor, got {prompts!r:.80}")


def specref_pipeline(
    target,
    draft,
    config: SpecConfig,
    *,
    verify: Verify | None = None,
    name: str | None = None,
    expected_conforming: bool = True,
    description: str = "",
    fixed_stream: bool = False,
    seeds_ignored_in_batches: bool = False,
) -> PipelineAdapter:
    """specref's own speculative generation; a seed drives one torch.Generator for drafts and verification, and
    requests are seeded as specref.hf.requests says (the two mutant hooks are its)."""

    def run_rows(prompts: torch.Tensor, n_new: int, generator: torch.Generator, counters: list) -> torch.Tensor:
        _check_prompts(prompts)
        return speculative_generate(target, draft, prompts, n_new, config, generator, verify=verify, counters=counters)

    seeding = RequestSeeding(run_rows, fixed_stream, seeds_ignored_in_batches)
    return PipelineAdapter(
        name or f"specref-generate[g={config.gamma},{config.processors.label}]",
        seeding,
        _exact_law(target, config.processors, config.eos_token_id),
        target.config.vocab_size,
        expected_conforming,
        description or "specref.hf.generation with specref.batched.verify",
        kernel="batched" if verify is None else "",
        unseeded=True,
        request_seeds=True,
        counters=seeding.counters,
        eos_token_id=config.eos_token_id,
    )


def transformers_pipeline(target, draft, processors: Processors, gamma: int) -> PipelineAdapter:
    """transformers' assisted generation with sampling, one prompt per call (it supports batch size 1 only).

    transformers samples from the global torch RNG: generate() seeds it with torch.manual_seed(seed) inside
    torch.random.fork_rng, so the caller's global RNG state is left as it was. `seed` may also be a CPU
    torch.Generator: its state is copied into the global RNG (a forced state from specref.forced reaches
    transformers' draws) and the generator takes the advanced state back. Before each call the assistant's
    generation_config is set to num_assistant_tokens = gamma with the "constant" schedule ("heuristic" would change g
    from call to call and persist it on the assistant). transformers' assistant_confidence_threshold stays at its
    default (0.4): the assistant stops drafting early when its last draft has probability below it, so gamma is the
    most drafts per cycle. Neither setting may change the law.
    """

    def generate(prompts: torch.Tensor, n_new: int, seed: int | torch.Generator) -> torch.Tensor:
        _check_prompts(prompts)
        draft.generation_config.num_assistant_tokens = gamma
        draft.generation_config.num_assistant_tokens_schedule = "constant"
        generator = seed if isinstance(seed, torch.Generator) else torch.Generator().manual_seed(seed)
        with torch.random.fork_rng(devices=[]), torch.no_grad(), global_rng_from(generator):
            return sample_rows(target, prompts, n_new, processors, assistant_model=draft)

    return PipelineAdapter(
        f"transformers-generate[g={gamma},{processors.label}]",
        generate,
        _exact_law(target, processors),
        target.config.vocab_size,
        True,
        "transformers generate(assistant_model=draft, do_sample=True)",
        kernel="transformers",
    )


def mutant_pipelines(target, draft, gamma: int) -> list[PipelineAdapter]:
    """The two processor-mismatch mutants; both must be flagged by the law check."""
    ratio = Processors(temperature=0.6, top_k=6)
    ratio_config = SpecConfig(gamma, ratio, ratio_draft_processors=Processors())
    top_k = Processors(temperature=1.0, top_k=3)
    top_k_config = SpecConfig(gamma, top_k, verify_target_processors=dataclasses.replace(top_k, top_k=None))
    return [
        specref_pipeline(
            target,
            draft,
            ratio_config,
            name=f"mutant-ratio-q-unprocessed[g={gamma},{ratio.label}]",
            expected_conforming=False,
            description="drafts sampled from processed q; the accept ratio uses q before processing",
        ),
        specref_pipeline(
            target,
            draft,
            top_k_config,
            name=f"mutant-verify-skips-top-k[g={gamma},{top_k.label}]",
            expected_conforming=False,
            description="the target's top-k is skipped on the verify path (temperature still applied)",
        ),
    ]


def with_prompts(adapter: PipelineAdapter, num: int = 4, length: int = 4, seed: int = 7) -> PipelineAdapter:
    """The adapter with suggested prompts drawn from the tiny models' training chain."""
    from .tiny import sample_prompts

    prompts = tuple(tuple(int(t) for t in row) for row in sample_prompts(num, length, seed=seed))
    return dataclasses.replace(adapter, suggested_prompts=prompts)


def builtin_pipelines(gamma: int = 3) -> dict[str, Callable[[], PipelineAdapter]]:
    """Named factories over the cached tiny models, for `specref conform <name>`."""
    from .tiny import tiny_pair

    def specref_default() -> PipelineAdapter:
        target, draft = tiny_pair()
        return with_prompts(specref_pipeline(target, draft, SpecConfig(gamma, Processors(temperature=0.8, top_k=8))))

    def transformers_default() -> PipelineAdapter:
        target, draft = tiny_pair()
        return with_prompts(transformers_pipeline(target, draft, Processors(temperature=0.8, top_k=8), gamma))

    def mutant(index: int) -> Callable[[], PipelineAdapter]:
        return lambda: with_prompts(mutant_pipelines(*tiny_pair(), gamma)[index])

    return {
        "specref-generate": specref_default,
        "transformers-generate": transformers_default,
        "mutant-ratio-q-unprocessed": mutant(0),
        "mutant-verify-skips-top-k": mutant(1),
    }


def builtin_pipeline(name: str, gamma: int = 3) -> PipelineAdapter:
    """The built-in pipeline `name` (a row of specref.builtins), built."""
    return builtin_pipelines(gamma)[name]()


def sample_rows(target, prompts: torch.Tensor, n_new: int, processors, **generate_kwargs) -> torch.Tensor:
    """`target.generate(do_sample=True)` on each prompt [P, L] alone: the n_new tokens after each, [P, n_new]."""
    rows = []
    for prompt in prompts:
        out = target.generate(
            input_ids=prompt[None],
            attention_mask=torch.ones_like(prompt)[None],
            do_sample=True,
            max_new_tokens=n_new,
            min_new_tokens=n_new,
            pad_token_id=0,
            eos_token_id=None,
            **processors.generate_kwargs(),
            **generate_kwargs,
        )
        rows.append(out[0, prompts.shape[1] :])
    return torch.stack(rows)
