"""Speculative generation over two real causal LMs, batched over prompts, correct per row.

One cycle, for every unfinished row at once:
  1. the draft proposes d_1..d_g autoregressively, d_i ~ q_i = softmax(processed draft logits);
  2. the target scores prefix + d_1..d_g in one forward pass: p_1..p_{g+1} (processed the same way);
  3. a verify callable (default `specref.batched.verify`) returns 1..g+1 emitted tokens per row.
Each row keeps every token it emits; rows differ in length after a cycle and are left-padded in the next one
(`specref.hf.forward`). A row stops once it holds n_new tokens (or emits eos_token_id, after which it is filled with
EOS: the absorbing convention `target_law` uses); its output is its first n_new tokens, exactly as the reference
engine's `generate` does. Rows are never truncated to keep them in step.

Acceptance counters (`counters=`, a list filled with one dict per row): drafted (g per cycle the row took part in),
accepted (the drafts the row emitted: a cycle's emitted tokens less its correction or bonus, and none past an EOS)
and steps (its cycles), the numbers an engine's acceptance metrics report.

Mutants (for the end-to-end checks): `ratio_draft_processors` and `verify_target_processors` replace the processors
used for the q and p handed to verify, while the drafts are still sampled from the configured processors;
`count_after_eos` counts the accepted drafts of a cycle before cutting it at an EOS (vLLM #56101).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from . import forward
from .processors import IDENTITY, Processors

Verify = Callable[..., torch.Tensor]  # verify(target_probs, draft_probs, draft_tokens, generator) -> [B, g+1]


def default_verify() -> Verify:
    from ..batched import verify

    return verify


@dataclass
class SpecConfig:
    gamma: int
    processors: Processors = IDENTITY
    eos_token_id: int | None = None
    ratio_draft_processors: Processors | None = None  # mutant hook: q handed to verify
    verify_target_processors: Processors | None = None  # mutant hook: p handed to verify
    count_after_eos: bool = False  # mutant hook: accepted counts the drafts past an EOS inside the accepted prefix

    def __post_init__(self):
        if isinstance(self.gamma, bool) or not isinstance(self.gamma, int) or self.gamma < 1:
            raise ValueError(f"gamma={self.gamma!r}: the number of drafts per cycle must be an integer >= 1")


@dataclass
class GenerationTrace:
    """What a run measured: per-cycle emitted counts and contexts, and time spent drafting and verifying."""

    emitted_per_cycle: list[int] = field(default_factory=list)  # one entry per (row, cycle)
    cycle_contexts: list[tuple[int, ...]] = field(default_factory=list)  # the row's context at the cycle start
    draft_seconds: list[float] = field(default_factory=list)  # one entry per cycle (all active rows)
    verify_seconds: list[float] = field(default_factory=list)
    active_rows: list[int] = field(default_factory=list)


def _sample(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:  # [B, V] -> [B]
    return torch.multinomial(probs, 1, generator=generator).squeeze(-1)


def speculative_generate(
    target,
    draft,
    prompts: torch.Tensor,  # [B, T] int64 (one prompt per row; equal lengths)
    n_new: int,
    config: SpecConfig,
    generator: torch.Generator,
    *,
    verify: Verify | None = None,
    trace: GenerationTrace | None = None,
    record_contexts: bool = False,
    counters: list[dict] | None = None,
) -> torch.Tensor:  # [B, n_new]
    """Speculative sampling of n_new tokens after each prompt."""
    if prompts.dim() != 2 or prompts.dtype != torch.long:
        raise ValueError(f"prompts: expected a [B, T] int64 tensor, got {tuple(prompts.shape)} {prompts.dtype}")
    if isinstance(n_new, bool) or not isinstance(n_new, int) or n_new < 1:
        raise ValueError(f"n_new={n_new!r}: must be an integer >= 1")
    verify = verify or default_verify()
    g, proc = config.gamma, config.processors
    ratio_proc = config.ratio_draft_processors or proc
    verify_proc = config.verify_target_processors or proc
    contexts = [list(map(int, row)) for row in prompts]
    outputs: list[list[int]] = [[] for _ in contexts]
    active = list(range(len(contexts)))
    counts = [{"drafted": 0, "accepted": 0, "steps": 0} for _ in contexts]
    while active:
        rows = [contexts[i] for i in active]
        if trace is not None and record_contexts:
            trace.cycle_contexts.extend(tuple(r) for r in rows)
        input_ids, attention_mask = forward.left_pad(rows)  # [A, L]
        start = time.perf_counter()
        draft_tokens, draft_probs = [], []
        for _ in range(g):
            draft_logits = forward.logits(draft, input_ids, attention_mask)[:, -1]  # [A, V]
            q_sample = proc.probs(draft_logits)
            token = _sample(q_sample, generator)  # d_i ~ q_i
            draft_tokens.append(token)
            draft_probs.append(q_sample if ratio_proc is proc else ratio_proc.probs(draft_logits))
            input_ids = torch.cat([input_ids, token[:, None]], dim=1)
            attention_mask = torch.cat([attention_mask, torch.ones_like(token)[:, None]], dim=1)
        mid = time.perf_counter()
        target_logits = forward.logits(target, input_ids, attention_mask)[:, -(g + 1) :]  # [A, g+1, V]
        target_probs = verify_proc.probs(target_logits)  # [A, g+1, V]
        tokens = verify(target_probs, torch.stack(draft_probs, 1), torch.stack(draft_tokens, 1), generator)  # [A, g+1]
        end = time.perf_counter()
        if trace is not None:
            trace.draft_seconds.append(mid - start)
            trace.verify_seconds.append(end - mid)
            trace.active_rows.append(len(active))
        still_active = []
        for row_tokens, i in zip(tokens.tolist(), active, strict=True):
            emitted = [t for t in row_tokens if t >= 0]
            if trace is not None:
                trace.emitted_per_cycle.append(len(emitted))
            accepted = len(emitted) - 1  # the drafts kept before the correction or bonus
            if config.eos_token_id is not None and config.eos_token_id in emitted:
                emitted = emitted[: emitted.index(config.eos_token_id) + 1]
                accepted = accepted if config.count_after_eos else min(accepted, len(emitted))
            counts[i]["drafted"] += g
            counts[i]["accepted"] += accepted
            counts[i]["steps"] += 1
            contexts[i].extend(emitted)
            outputs[i].extend(emitted)
            ended = config.eos_token_id is not None and outputs[i][-1] == config.eos_token_id
            if len(outputs[i]) < n_new and not ended:
                still_active.append(i)
        active = still_active
    if counters is not None:
        counters[:] = counts
    return _finish(outputs, n_new, config.eos_token_id)


def plain_generate(
    target, prompts: torch.Tensor, n_new: int, processors: Processors, generator: torch.Generator
) -> torch.Tensor:  # [B, n_new]
    """Ancestral sampling from the processed target, one target pass per token (the speed baseline)."""
    input_ids = prompts.clone()
    for _ in range(n_new):
        probs = processors.probs(forward.logits(target, input_ids)[:, -1])  # [B, V]
        input_ids = torch.cat([input_ids, _sample(probs, generator)[:, None]], dim=1)
    return input_ids[:, prompts.shape[1] :]


def _finish(outputs: list[list[int]], n_new: int, eos_token_id: int | None) -> torch.Tensor:
    fill = eos_token_id if eos_token_id is not None else -1
    out = torch.full((len(outputs), n_new), fill, dtype=torch.long)
    for i, row in enumerate(outputs):
        row = row[:n_new]
        out[i, : len(row)] = torch.as_tensor(row, dtype=torch.long)
    return out
