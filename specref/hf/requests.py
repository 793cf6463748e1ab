"""How a pipeline seeds its requests, the way a serving engine does: one call's `seed` argument is

    an int               the call's own generator, torch.Generator().manual_seed(seed) (every row of the call);
    None                 an unseeded request: the pipeline's own stream, one generator seeded once from the OS's
                         entropy and advanced by every unseeded request, so serial requests are independent;
    [s_0, ..., s_{B-1}]  one seed per row (an int or None): a seeded row is drawn alone from its own generator, so
                         its tokens are the same alone, beside other requests and after other requests; the
                         unseeded rows share the pipeline's stream.

The pipeline contract's request-level checks (specref.conformance.pipeline.requests) hold a pipeline to this, where
it declares `unseeded` and `request_seeds`. Two mutant hooks model engine bugs: `fixed_stream` (an unseeded request
starts a fresh generator at torch's default seed, so serial requests repeat each other: TensorRT-LLM #19487) and
`seeds_ignored_in_batches` (a batch of more than one row is drawn from the shared stream whatever its per-row seeds:
PR #17599).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

#: run(prompts [B, T], n_new, generator, counters) -> [B, n_new]; counters is filled with one dict per row.
RunRows = Callable[[torch.Tensor, int, torch.Generator, list], torch.Tensor]


def _fresh_stream() -> torch.Generator:
    generator = torch.Generator()
    generator.seed()  # from the OS's entropy
    return generator


@dataclass
class RequestSeeding:
    """A pipeline's generate(prompts, n_new, seed) over run_rows, seeding as the module docstring says."""

    run_rows: RunRows
    fixed_stream: bool = False  # mutant hook (TensorRT-LLM #19487)
    seeds_ignored_in_batches: bool = False  # mutant hook (PR #17599)
    stream: torch.Generator = field(default_factory=_fresh_stream)
    last_counters: list = field(default_factory=list)  # the last call's counters, one dict per row

    def unseeded(self) -> torch.Generator:
        return torch.Generator() if self.fixed_stream else self.stream

    def __call__(self, prompts: torch.Tensor, n_new: int, seed) -> torch.Tensor:
        if isinstance(seed, torch.Generator):
            return self._run(prompts, n_new, seed)
        if seed is None:
            return self._run(prompts, n_new, self.unseeded())
        if isinstance(seed, int):
            return self._run(prompts, n_new, torch.Generator().manual_seed(seed))
        return self._per_row(prompts, n_new, list(seed))

    def _run(self, prompts, n_new, generator) -> torch.Tensor:
        counters: list = []
        out = self.run_rows(prompts, n_new, generator, counters)
        self.last_counters = counters
        return out

    def _per_row(self, prompts: torch.Tensor, n_new: int, seeds: Sequence) -> torch.Tensor:
        if len(seeds) != len(prompts):
            raise ValueError(f"seed: {len(seeds)} per-row seeds for {len(prompts)} prompts")
        if self.seeds_ignored_in_batches and len(prompts) > 1:
            return self._run(prompts, n_new, self.unseeded())
        out = torch.empty((len(prompts), n_new), dtype=torch.long)
        counters: list = [None] * len(prompts)
        unseeded = [i for i, s in enumerate(seeds) if s is None]
        groups = [([i], torch.Generator().manual_seed(int(s))) for i, s in enumerate(seeds) if s is not None]
        groups += [(unseeded, self.unseeded())] if unseeded else []
        for rows, generator in groups:
            out[rows] = self._run(prompts[rows], n_new, generator)
            for i, count in zip(rows, self.last_counters, strict=True):
                counters[i] = count
        self.last_counters = counters
        return out

    def counters(self) -> list[dict]:
        """The last call's acceptance counters, one dict per row (drafted, accepted, steps)."""
        return list(self.last_counters)
