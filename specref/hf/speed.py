"""Wall time per generated token: plain target sampling against speculative generation, in one run.

Latency model (per cycle of the batch): every active row gains tau tokens for one drafting phase (g draft passes,
T_draft) and one verify phase (one target pass plus verify, T_verify), so the time per token step is
  L = (T_draft + T_verify) / tau,
against T_target for plain sampling (one target pass per token step). Predicted speed-up: T_target / L.
Both paths recompute the whole context each pass (no KV cache), so their costs grow alike with length.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from functools import partial

import numpy as np
import torch

from .generation import GenerationTrace, SpecConfig, plain_generate, speculative_generate
from .processors import Processors


@dataclass
class SpeedRow:
    gamma: int  # 0 for plain target sampling
    seconds: float  # median over repeats
    tokens: int  # tokens delivered per repeat (batch * n_new)
    tokens_per_s: float
    tau: float  # mean tokens per (row, cycle), pooled over repeats; 1 for plain
    tau_se: float
    cycles: float  # cycles per repeat (target passes of the batch), median
    t_draft: float  # seconds per drafting phase (g draft passes), median over repeats of the mean
    t_verify: float  # seconds per verify phase (target pass + verify), likewise
    t_target: float  # seconds per plain target step (from the plain runs)
    predicted_speedup: float  # latency model: T_target * tau / (T_draft + T_verify)
    cycle_predicted_speedup: float  # the same costs with the measured cycle count: steps * T_target / (cycles * ...)
    measured_speedup: float  # median plain seconds / median speculative seconds

    def to_dict(self) -> dict:
        return asdict(self)


def measure(
    target,
    draft,
    prompts: torch.Tensor,  # [B, T]
    n_new: int,
    processors: Processors,
    gammas: tuple[int, ...] = (1, 2, 4, 8),
    *,
    seed: int = 0,
    one_at_a_time: bool = False,
    repeats: int = 3,
) -> list[SpeedRow]:
    """Plain sampling and speculative generation for every g, interleaved, `repeats` times; medians reported.

    one_at_a_time runs each prompt as its own batch of 1 (sequence latency, where the latency model applies
    directly); otherwise the whole batch runs together (throughput: the batch needs as many cycles as its slowest
    row, which the per-row tau does not see; cycle_predicted_speedup shows that part).
    """
    from ..batched import verify as batched_verify

    verify = partial(batched_verify, validate=False)  # production setting: no data checks on the hot path
    generator = torch.Generator().manual_seed(seed)
    plain_generate(target, prompts[:2], 2, processors, generator)  # warm-up
    speculative_generate(target, draft, prompts[:2], 2, SpecConfig(1, processors), generator)
    groups = [prompts[i : i + 1] for i in range(len(prompts))] if one_at_a_time else [prompts]
    tokens, steps = prompts.shape[0] * n_new, n_new * len(groups)

    plain_seconds: list[float] = []
    spec_seconds: dict[int, list[float]] = {g: [] for g in gammas}
    traces: dict[int, list[GenerationTrace]] = {g: [] for g in gammas}
    for _ in range(repeats):
        start = time.perf_counter()
        for group in groups:
            plain_generate(target, group, n_new, processors, generator)
        plain_seconds.append(time.perf_counter() - start)
        for gamma in gammas:
            trace, config = GenerationTrace(), SpecConfig(gamma, processors)
            start = time.perf_counter()
            for group in groups:
                speculative_generate(target, draft, group, n_new, config, generator, verify=verify, trace=trace)
            spec_seconds[gamma].append(time.perf_counter() - start)
            traces[gamma].append(trace)

    plain = float(np.median(plain_seconds))
    t_target = plain / steps
    rows = [SpeedRow(0, plain, tokens, tokens / plain, 1.0, 0.0, steps, 0.0, t_target, t_target, 1.0, 1.0, 1.0)]
    for gamma in gammas:
        seconds = float(np.median(spec_seconds[gamma]))
        emitted = np.concatenate([np.asarray(t.emitted_per_cycle, dtype=np.float64) for t in traces[gamma]])
        tau = float(emitted.mean())
        t_draft = float(np.median([np.mean(t.draft_seconds) for t in traces[gamma]]))
        t_verify = float(np.median([np.mean(t.verify_seconds) for t in traces[gamma]]))
        cycles = float(np.median([len(t.draft_seconds) for t in traces[gamma]]))
        rows.append(
            SpeedRow(
                gamma,
                seconds,
                tokens,
                tokens / seconds,
                tau,
                float(emitted.std(ddof=1) / np.sqrt(emitted.size)),
                cycles,
                t_draft,
                t_verify,
                t_target,
                predicted_speedup=t_target * tau / (t_draft + t_verify),
                cycle_predicted_speedup=steps * t_target / (cycles * (t_draft + t_verify)),
                measured_speedup=plain / seconds,
            )
        )
    return rows
