"""Conformance for whole pipelines (kind "pipeline"): prompts in, n-token continuations out, checked against the
target's exact continuation law after its logits processors (specref.hf).

A pipeline adapter (specref.hf.pipelines.PipelineAdapter) offers generate(prompts [B, T], n_new, seed) ->
[B, n_new] and exact_law(prompt, n_new). The law check is a Pearson chi-square over the V^n continuations; an
impossible continuation that shows up fails outright. The run's alpha is split over its prompts by Bonferroni.
"""

from __future__ import annotations

import time

import torch

from ..stats import ErrorBudget
from .adapters import Adapter
from .checks import t0_result
from .report import Report

N_NEW = 3
MAX_SAMPLES = 40_000
PROBE = 200


def run_pipeline(pipeline, *, seed: int = 0, budget_seconds: float = 300.0, alpha: float = 1e-3, progress=None):
    from ..hf.lawcheck import law_check

    tell = progress or (lambda message, fraction: None)
    started = time.perf_counter()
    prompts = list(pipeline.suggested_prompts[:1]) or [(0,)]  # one prompt: row-loop pipelines need every sample
    adapter = Adapter(pipeline.name, verify=None, kind="pipeline", notes=pipeline.description)
    report = Report(adapter, seed=seed, budget_seconds=budget_seconds, alpha=alpha)
    alphas = ErrorBudget(alpha).split([f"joint_law[prompt{i}]" for i in range(len(prompts))])
    for i, prompt in enumerate(prompts):
        name = f"prompt{i}"
        law = pipeline.law_array(prompt, N_NEW)
        share = (budget_seconds * 0.9 - (time.perf_counter() - started)) / (len(prompts) - i)
        samples, seconds, error = [], 0.0, None
        try:
            probe, seconds = _generate(pipeline, prompt, PROBE, seed * 1000 + i * 100)
            samples.append(probe)
            rate = PROBE / max(seconds, 1e-6)
            n = int(min(MAX_SAMPLES, max(PROBE, rate * share))) - PROBE
            if n > 0:
                rest, more = _generate(pipeline, prompt, n, seed * 1000 + i * 100 + 1)
                samples.append(rest)
                seconds += more
        except (ValueError, RuntimeError, TypeError) as failure:
            error = f"{type(failure).__name__}: {failure}"
        rows = sum(len(s) for s in samples)
        report.scenarios[name] = {"description": f"continuations of prompt {list(prompt)}", "gamma": None,
                                  "vocab_size": pipeline.vocab_size, "rows": rows,
                                  "rows_per_second": rows / seconds if seconds else None}  # fmt: skip
        report.add_t0(name, [t0_result("adapter", int(error is not None), rows, {"error": error})])
        if error is None:
            try:
                check = f"joint_law[{name}]"
                result = law_check(torch.cat(samples), law, alpha=alphas[check], name=check)
                report.add_t2(name, [result])
            except ValueError as failure:  # out-of-range ids: a certain failure
                report.add_t0(name, [t0_result("t0_valid_ids", 1, rows, {"error": str(failure)})])
        tell(f"{name}: {rows:,} continuations", (i + 1) / len(prompts))
    report.finish(ErrorBudget(alpha), time.perf_counter() - started, family_size=len(alphas))
    return report


def _generate(pipeline, prompt, n: int, seed: int) -> tuple[torch.Tensor, float]:
    start = time.perf_counter()
    out = pipeline.generate(torch.tensor([list(prompt)] * n, dtype=torch.long), N_NEW, seed)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (n, N_NEW):
        raise ValueError(f"generate returned {type(out).__name__} of shape {getattr(out, 'shape', None)}, "
                         f"expected [{n}, {N_NEW}]")  # fmt: skip
    return out.detach().cpu().long(), time.perf_counter() - start


__all__ = ["run_pipeline", "N_NEW"]
