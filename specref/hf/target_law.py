"""The exact law of a real model's n-token continuation, after processors, by batched enumeration.

All V^(n-1) continuations x_1..x_{n-1} of the prompt run in one batched forward pass (chunked). A causal model's
logits at position T-1+k depend only on prompt + x_1..x_k, so that pass yields every conditional
p(x_{k+1} | prompt, x_1..x_k), k = 0..n-1; the law is their float64 product:
  P(x_1..x_n) = prod_k p_proc(x_{k+1} | prompt, x_<=k).
With an EOS id the law is absorbing: after EOS the next token is EOS with probability 1 (generation fills with EOS).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import torch

from . import forward
from .processors import Processors


def conditionals(
    model, prompt: Sequence[int], n_new: int, processors: Processors, *, chunk: int = 4096
) -> torch.Tensor:  # [V^(n-1), n, V] float64
    """Row r enumerates x_1..x_{n-1} (base V, x_1 most significant); [r, k] is p_proc(. | prompt, x_<=k)."""
    if isinstance(n_new, bool) or not isinstance(n_new, int) or n_new < 1:
        raise ValueError(f"n_new={n_new!r}: must be an integer >= 1")
    vocab_size = model.config.vocab_size
    prefixes = torch.tensor(list(itertools.product(range(vocab_size), repeat=n_new - 1)), dtype=torch.long)
    prefixes = prefixes.reshape(vocab_size ** (n_new - 1), n_new - 1)  # [R, n-1]
    prompt_ids = torch.as_tensor(list(prompt), dtype=torch.long)
    if prompt_ids.numel() == 0:
        raise ValueError("prompt is empty; the model needs at least one token of context")
    out = []
    for start in range(0, len(prefixes), chunk):
        part = prefixes[start : start + chunk]
        input_ids = torch.cat([prompt_ids.expand(len(part), -1), part], dim=1)  # [r, T+n-1]
        logits = forward.logits(model, input_ids)[:, len(prompt_ids) - 1 :]  # [r, n, V]
        out.append(processors.probs(logits))
    return torch.cat(out)


def continuation_law(
    model, prompt: Sequence[int], n_new: int, processors: Processors, *, eos_token_id: int | None = None
) -> np.ndarray:  # [V] * n float64
    """law[x_1, ..., x_n] = P(prompt is continued by x_1..x_n)."""
    cond = conditionals(model, prompt, n_new, processors).numpy()  # [R, n, V]
    vocab_size = cond.shape[-1]
    if eos_token_id is not None:
        rows = np.array(list(itertools.product(range(vocab_size), repeat=n_new - 1)), dtype=np.int64)
        rows = rows.reshape(len(cond), n_new - 1)
        ended = np.zeros(len(cond), dtype=bool)
        for k in range(1, n_new):
            ended |= rows[:, k - 1] == eos_token_id
            cond[ended, k] = 0.0
            cond[ended, k, eos_token_id] = 1.0
    law = np.ones((len(cond),))
    # weight of prefix row r: prod_{k < n-1} cond[r, k, x_{k+1}]
    for k in range(n_new - 1):
        x = (np.arange(len(cond)) // vocab_size ** (n_new - 2 - k)) % vocab_size
        law = law * cond[np.arange(len(cond)), k, x]
    full = law[:, None] * cond[:, n_new - 1, :]  # [R, V]
    return full.reshape((vocab_size,) * n_new)


def as_dict(law: np.ndarray) -> dict[tuple[int, ...], float]:
    """{continuation: probability} over the outcomes of positive probability."""
    return {tuple(int(i) for i in idx): float(law[idx]) for idx in zip(*np.nonzero(law), strict=True)}
