"""The end-to-end law check: n-token continuations from a pipeline against the target's exact law.

Pearson chi-square over the V^n outcomes (specref.stats.chisquare_gof: bins merged by expected counts only;
an outcome of probability 0 that shows up is a certain failure).
"""

from __future__ import annotations

import numpy as np
import torch

from ..stats import CheckResult, chisquare_gof


def outcome_counts(samples: torch.Tensor, vocab_size: int) -> np.ndarray:  # [N, n] -> [V^n]
    """Counts of each continuation, indexed base V with the first token most significant."""
    if samples.dim() != 2:
        raise ValueError(f"samples: expected [N, n], got shape {tuple(samples.shape)}")
    if samples.numel() and (samples.min() < 0 or samples.max() >= vocab_size):
        bad = samples[(samples < 0) | (samples >= vocab_size)][0].item()
        raise ValueError(f"samples holds token id {bad}, outside [0, {vocab_size})")
    weights = vocab_size ** torch.arange(samples.shape[1] - 1, -1, -1)
    index = (samples.long() * weights).sum(1).numpy()
    return np.bincount(index, minlength=vocab_size ** samples.shape[1])


def law_check(samples: torch.Tensor, law: np.ndarray, *, alpha: float, name: str, beta: float = 1e-3) -> CheckResult:
    """Chi-square of the continuation samples [N, n] against law [V]*n (float64, sums to 1)."""
    return counts_check(outcome_counts(samples, law.shape[0]), law, alpha=alpha, name=name, beta=beta)


def counts_check(observed: np.ndarray, law: np.ndarray, *, alpha: float, name: str, beta: float = 1e-3) -> CheckResult:
    """Chi-square of continuation counts [V^n] (outcome_counts' index) against law [V]*n or [V^n]."""
    expected = law.reshape(-1)
    expected = expected / expected.sum()  # float64 products leave ~1e-16 of slack
    result = chisquare_gof(observed, expected, alpha=alpha, name=name, beta=beta)
    empirical_tv = 0.5 * float(np.abs(observed / observed.sum() - expected).sum())
    details = {**result.details, "empirical_tv": empirical_tv, "outcomes": int(expected.size)}
    details["support"] = int(np.count_nonzero(expected))
    return CheckResult(**{**result.__dict__, "details": details})
