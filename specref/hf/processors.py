"""Logits processors applied identically to target and draft: temperature, then top-k, then top-p.

The order and the tie rules follow transformers' sampling warpers (TemperatureLogitsWarper, TopKLogitsWarper,
TopPLogitsWarper), so a law computed here is the law transformers' `generate(do_sample=True)` aims at:
  * temperature t: logits / t;
  * top-k: keep every token whose logit is >= the k-th largest (ties at the boundary are kept);
  * top-p: sort ascending, drop tokens whose cumulative probability is <= 1 - top_p, keep at least one.
Removed tokens get logit -inf, hence probability exactly 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Processors:
    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None

    def __post_init__(self):
        if not self.temperature > 0:
            raise ValueError(f"temperature={self.temperature!r}: must be > 0")
        if self.top_k is not None and (isinstance(self.top_k, bool) or int(self.top_k) != self.top_k or self.top_k < 1):
            raise ValueError(f"top_k={self.top_k!r}: must be an integer >= 1 or None")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ValueError(f"top_p={self.top_p!r}: must lie in (0, 1] or be None")

    @property
    def label(self) -> str:
        parts = [f"T={self.temperature:g}"]
        if self.top_k is not None:
            parts.append(f"top_k={self.top_k}")
        if self.top_p is not None:
            parts.append(f"top_p={self.top_p:g}")
        return ",".join(parts)

    def generate_kwargs(self) -> dict:
        """The same settings as transformers `generate()` keyword arguments (top_k=0 turns its default 50 off)."""
        return {"temperature": self.temperature, "top_k": self.top_k or 0, "top_p": self.top_p or 1.0}

    def logits(self, logits: torch.Tensor) -> torch.Tensor:  # [..., V] -> [..., V]
        """Processed logits; removed tokens are -inf."""
        out = logits / self.temperature
        if self.top_k is not None and self.top_k < out.shape[-1]:
            kth = torch.topk(out, self.top_k, dim=-1).values[..., -1:]
            out = out.masked_fill(out < kth, float("-inf"))
        if self.top_p is not None and self.top_p < 1:
            sorted_logits, order = torch.sort(out, dim=-1, descending=False)
            cumulative = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
            drop_sorted = cumulative <= (1 - self.top_p)
            drop_sorted[..., -1] = False  # keep at least the most likely token
            drop = drop_sorted.scatter(-1, order, drop_sorted)
            out = out.masked_fill(drop, float("-inf"))
        return out

    def probs(self, logits: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:  # [..., V]
        """softmax, in `dtype`, of the logits processed in their own dtype (as transformers does, in float32)."""
        return torch.softmax(self.logits(logits).to(dtype), dim=-1)


IDENTITY = Processors()
