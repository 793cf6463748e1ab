"""A correct verifier written from the paper alone: a plain row loop in numpy (float64)."""

from __future__ import annotations

import numpy as np
import torch


def _draw(weights: np.ndarray, rng: np.random.Generator) -> int:
    cdf = np.cumsum(weights)
    return int(min(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"), len(weights) - 1))


def verify(target_probs, draft_probs, draft_tokens, generator):
    seed = int(torch.randint(0, 2**62, (1,), generator=generator))
    rng = np.random.Generator(np.random.PCG64(seed))
    p = target_probs.double().cpu().numpy()  # [B, g+1, V]
    q = draft_probs.double().cpu().numpy()  # [B, g, V]
    drafts = draft_tokens.cpu().numpy()  # [B, g]
    batch, gamma = drafts.shape
    out = np.full((batch, gamma + 1), -1, dtype=np.int64)
    for b in range(batch):
        for i in range(gamma):
            d = drafts[b, i]
            if rng.random() * q[b, i, d] < p[b, i, d]:  # accept with min(1, p/q)
                out[b, i] = d
                continue
            residual = np.maximum(p[b, i] - q[b, i], 0.0)
            out[b, i] = _draw(residual if residual.sum() > 0 else p[b, i], rng)
            break
        else:
            out[b, gamma] = _draw(p[b, gamma], rng)  # bonus token
    return torch.from_numpy(out)
