"""Measured tau against tau predicted from the models' own p and q along the generated contexts.

For a cycle that starts at context c, E[tau | c] = sum_{k=0..g} P(A >= k | c) with
  P(A >= k | c) = sum_{x_1..x_k} prod_{i<=k} min(p_i(x_i), q_i(x_i))     (specref.theory.accepted_at_least)
             = E_{d ~ q}[ prod_{i<=k} min(1, p_i(d_i) / q_i(d_i)) ].
The second form gives an unbiased estimate from one fresh draft path per context (drafted independently of the
generation run): r_c = sum_{k=0..g} prod_{i<=k} min(1, p_i(d_i)/q_i(d_i)). Given the contexts, the measured count
m_c and r_c are independent with the same mean, so the check is a t interval for mean(m_c - r_c) = 0
(specref.stats.mean_ci). `exact_expected_tau` computes E[tau | c] by enumeration through specref.theory, for
cross-checking r_c on a few contexts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from .. import theory
from ..stats import CheckResult, mean_ci
from . import forward
from .generation import SpecConfig


def rao_blackwell_tau(
    target, draft, contexts: Sequence[Sequence[int]], config: SpecConfig, generator: torch.Generator, *, chunk=512
) -> np.ndarray:  # [C]
    """r_c for every context (see module docstring), from fresh drafts d ~ q."""
    g, proc = config.gamma, config.processors
    out = []
    for start in range(0, len(contexts), chunk):
        input_ids, attention_mask = forward.left_pad(contexts[start : start + chunk])
        drafted = []
        draft_rows = []
        for _ in range(g):
            q = proc.probs(forward.logits(draft, input_ids, attention_mask)[:, -1])  # [A, V]
            token = torch.multinomial(q, 1, generator=generator)  # [A, 1]
            drafted.append(token)
            draft_rows.append(q.gather(1, token))
            input_ids = torch.cat([input_ids, token], dim=1)
            attention_mask = torch.cat([attention_mask, torch.ones_like(token)], dim=1)
        p = proc.probs(forward.logits(target, input_ids, attention_mask)[:, -(g + 1) : -1])  # [A, g, V]
        p_at = p.gather(2, torch.cat(drafted, 1)[:, :, None]).squeeze(-1)  # [A, g]  p_i(d_i)
        ratios = torch.clamp(p_at / torch.cat(draft_rows, 1), max=1.0)  # [A, g]  min(1, p/q)
        out.append((1.0 + torch.cumprod(ratios, dim=1).sum(1)).numpy())
    return np.concatenate(out)


def exact_expected_tau(target, draft, context: Sequence[int], config: SpecConfig) -> float:
    """E[tau | context] = sum_k P(A >= k) by enumeration (specref.theory.accepted_at_least); V^g model calls."""
    proc = config.processors

    def model_fn(model):
        def probs(ctx):
            ids = torch.as_tensor([list(ctx)], dtype=torch.long)
            return proc.probs(forward.logits(model, ids)[0, -1]).tolist()

        return probs

    return float(theory.expected_tau_contextual(model_fn(target), model_fn(draft), tuple(context), config.gamma))


def tau_check(measured: Sequence[int], predicted: np.ndarray, *, alpha: float, name: str) -> CheckResult:
    """t interval for mean(measured - predicted) = 0, over paired cycles."""
    measured = np.asarray(measured, dtype=np.float64)
    if measured.shape != predicted.shape:
        raise ValueError(f"measured has shape {measured.shape} but predicted has {predicted.shape}; pair them")
    result = mean_ci(measured - predicted, expected_mean=0.0, alpha=alpha, name=name, method="t")
    n = measured.size
    details = {
        **result.details,
        "tau_measured": float(measured.mean()),
        "tau_measured_se": float(measured.std(ddof=1) / np.sqrt(n)),
        "tau_predicted": float(predicted.mean()),
        "tau_predicted_se": float(predicted.std(ddof=1) / np.sqrt(n)),
    }
    return CheckResult(**{**result.__dict__, "details": details})
