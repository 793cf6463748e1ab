"""Acceptance rate of the tiny pair: a(c) = sum_x min(p(x|c), q(x|c)) averaged over in-distribution contexts."""

from __future__ import annotations

import torch

from . import forward
from .processors import Processors


def mean_acceptance(target, draft, contexts: torch.Tensor, processors: Processors) -> float:
    """Mean of a(c) over every prefix (length >= 1) of the given contexts [N, L]."""
    p = processors.probs(forward.logits(target, contexts))  # [N, L, V]
    q = processors.probs(forward.logits(draft, contexts))
    return float(torch.minimum(p, q).sum(-1).mean())
