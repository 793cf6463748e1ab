"""The exact law of a pipeline's n-token continuation when its sampler reads the history (penalties): an engine's own
non-speculative law (law(logits [V], SamplingParams, History) -> [V]) at every prefix, multiplied along.

    exact_law(target, law, params, prompt_in_history=True)(prompt, n_new) -> {continuation: probability}

All V^(n-1) prefixes run in one batched forward pass of the target (specref.hf.forward); at position k the law reads
History(prompt, x_1..x_k) (or History((), x_1..x_k) for an engine whose penalties count its output only). V^(n-1)
laws per position at most, each computed once per distinct prefix.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import torch

from ...hf import forward
from ...reference.processors import History


def exact_law(target, law: Callable, params, *, prompt_in_history: bool = True):
    def continuation_law(prompt: Sequence[int], n_new: int) -> dict[tuple[int, ...], float]:
        vocab_size = target.config.vocab_size
        prefixes = list(itertools.product(range(vocab_size), repeat=n_new - 1))
        input_ids = torch.tensor([list(prompt) + list(p) for p in prefixes], dtype=torch.long)
        with torch.no_grad():
            logits = forward.logits(target, input_ids)[:, len(prompt) - 1 :].double().numpy()  # [R, n, V]
        seen = tuple(prompt) if prompt_in_history else ()
        out: dict[tuple[int, ...], float] = {}
        laws: dict[tuple[int, ...], object] = {}
        for r, prefix in enumerate(prefixes):
            weight = 1.0
            for k in range(n_new):
                key = tuple(prefix[:k])
                if key not in laws:
                    laws[key] = law(logits[r, k], params, History(seen, key))
                if k < n_new - 1:
                    weight *= laws[key][prefix[k]]
            for token, p in enumerate(laws[tuple(prefix)]):
                if weight * p > 0:
                    out[(*prefix, token)] = weight * p
        return out

    return continuation_law


__all__ = ["exact_law"]
