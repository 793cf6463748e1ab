"""Law-check scenarios for the batched engine on a device: fixed rows, a simulator that counts, and exact laws.

Rows are fixed per draft position (the target row at position i does not depend on the drafts), so the exact laws
of one verify step have closed forms. They are computed in float64 from the rows exactly as the engine receives
them (after the cast to fp16/bf16, which leaves rows that sum to 1 only up to rounding): with p~ and q~ the rows
as given and S_q = sum(q~), drafts are drawn from q~ / S_q, and

  a_i           = sum_x min(p~_i, q~_i)(x) / S_q            acceptance at position i
  first token   = min(p~_1, q~_1) / S_q + (1 - a_1) * max(0, p~_1 - q~_1) / Z~_1      (= p_1 when normalised)
  length k      = a_1 .. a_k (1 - a_{k+1}) for k < n, a_1 .. a_n for k = n drafts
  correction    = max(0, p~_1 - q~_1) / Z~_1, given a rejection at the first position
  bonus         = p~_{g+1} / sum(p~_{g+1}), given g accepts
"""

from __future__ import annotations

import os
import zlib
from dataclasses import dataclass

import numpy as np
import torch

from specref import batched

#: The device gpu_tests run on: SPECREF_DEVICE, default cuda (conftest.py skips everything when it is absent).
DEVICE = os.environ.get("SPECREF_DEVICE", "cuda")


@dataclass(frozen=True)
class Scenario:
    name: str
    vocab_size: int
    gamma: int
    dtype: torch.dtype = torch.float32
    point_mass: bool = False  # fixed drafts, draft_probs=None
    ragged: bool = False  # num_draft = row index mod (g+1), with -1 placeholders
    slow_on_cpu: bool = False

    @property
    def seed(self) -> int:
        return zlib.crc32(self.name.encode())


SCENARIOS = [
    Scenario("fp32-V1000-g3", 1000, 3),
    Scenario("bf16-V1000-g2", 1000, 2, dtype=torch.bfloat16),
    Scenario("fp16-V1000-g2", 1000, 2, dtype=torch.float16),
    Scenario("ragged-V257-g3", 257, 3, ragged=True),
    Scenario("point-mass-V300-g3", 300, 3, point_mass=True),
    Scenario("fp32-V151936-g4", 151936, 4, slow_on_cpu=True),
]


def rows(scenario: Scenario) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """target [g+1, V] and draft [g, V] rows in the scenario's dtype (None for point-mass), fixed drafts [g]."""
    rng = np.random.Generator(np.random.PCG64(scenario.seed))
    g, v = scenario.gamma, scenario.vocab_size

    def softmax_with_zeros(n: int, zeros: float) -> np.ndarray:
        logits = rng.normal(size=(n, v)) * 2.0
        logits[rng.random((n, v)) < zeros] = -np.inf
        logits[np.arange(n), rng.integers(v, size=n)] = 0.0  # at least one positive entry per row
        w = np.exp(logits - logits.max(-1, keepdims=True))
        return w / w.sum(-1, keepdims=True)

    target = softmax_with_zeros(g + 1, 0.2)
    draft = 0.5 * softmax_with_zeros(g, 0.2) + 0.5 * target[:g]  # overlapping supports, a_i well inside (0, 1)
    target_t = torch.tensor(target).to(scenario.dtype)
    if scenario.point_mass:  # greedy drafts: the target's top token gets 0.6 extra mass, so all-accepts are common
        fixed = target[:g].argmax(-1)
        target[np.arange(g), fixed] += 1.5
        target_t = torch.tensor(target / target.sum(-1, keepdims=True)).to(scenario.dtype)
        return target_t, None, torch.tensor(fixed)
    return target_t, torch.tensor(draft).to(scenario.dtype), None


def exact_laws(scenario: Scenario) -> dict[str, np.ndarray]:
    """The four laws of the module docstring, mixed over num_draft for ragged scenarios."""
    target, draft, fixed = rows(scenario)
    p = target.double().numpy()  # [g+1, V] rows as given
    g, v = scenario.gamma, scenario.vocab_size
    q = np.eye(v)[fixed.numpy()] if draft is None else draft.double().numpy()  # [g, V]
    s_q = q.sum(-1)
    overlap = np.minimum(p[:g], q)  # [g, V]
    accept = overlap.sum(-1) / s_q  # [g]
    residual = np.maximum(p[:g] - q, 0)
    correction = residual[0] / residual[0].sum()
    first = overlap[0] / s_q[0] + (1 - accept[0]) * correction
    counts = range(g + 1) if scenario.ragged else [g]
    length = np.zeros(g + 1)
    first_mixed = np.zeros(v)
    for n in counts:
        prefix = np.concatenate([[1.0], np.cumprod(accept[:n])])  # P(at least k accepts), k = 0..n
        length[: n + 1] += (prefix - np.append(prefix[1:], 0)) / len(counts)
        first_mixed += (first if n > 0 else p[0] / p[0].sum()) / len(counts)
    return {"first": first_mixed, "length": length, "correction": correction, "bonus": p[g] / p[g].sum()}


def simulate(scenario: Scenario, num_rows: int, device: torch.device, seed: int) -> dict[str, np.ndarray]:
    """Verify num_rows i.i.d. rows on the device in chunks; return the counts matching exact_laws' keys."""
    target, draft, fixed = rows(scenario)
    g, v = scenario.gamma, scenario.vocab_size
    target = target.to(device)
    draft = None if draft is None else draft.to(device)
    gen = torch.Generator(device=device).manual_seed(seed)
    if draft is not None:  # drafting by inverse CDF on float64 partial sums (a sequential, monotone cumsum)
        cdf = torch.cumsum(draft.double().cpu(), dim=-1).to(device)  # [g, V]
    counts = {k: torch.zeros(n, dtype=torch.int64, device=device) for k, n in
              (("first", v), ("length", g + 1), ("correction", v), ("bonus", v))}  # fmt: skip
    chunk = max(1, min(num_rows, (2**28 if device.type == "cuda" else 2**22) // v))  # [chunk, V] temporaries
    for start in range(0, num_rows, chunk):
        b = min(chunk, num_rows - start)
        if draft is None:
            draft_tokens = fixed.to(device).expand(b, g).clone()
        else:
            u = torch.rand(g, b, generator=gen, device=device, dtype=torch.float64) * cdf[:, -1:]
            draft_tokens = torch.searchsorted(cdf, u, right=True).clamp_(max=v - 1).T.contiguous()  # [b, g]
        num_draft = None
        if scenario.ragged:
            num_draft = torch.arange(start, start + b, device=device) % (g + 1)
            draft_tokens[torch.arange(g, device=device) >= num_draft[:, None]] = -1
        tokens = batched.verify(
            target.expand(b, g + 1, v), None if draft is None else draft.expand(b, g, v), draft_tokens, gen,
            num_draft=num_draft, validate=start == 0,
        )  # fmt: skip
        accepted = batched.num_emitted(tokens) - 1
        drafts = torch.full_like(accepted, g) if num_draft is None else num_draft
        counts["first"] += torch.bincount(tokens[:, 0], minlength=v)
        counts["length"] += torch.bincount(accepted, minlength=g + 1)
        counts["correction"] += torch.bincount(tokens[(accepted == 0) & (drafts >= 1), 0], minlength=v)
        counts["bonus"] += torch.bincount(tokens[(drafts == g) & (accepted == g), g], minlength=v)
    return {k: c.cpu().numpy() for k, c in counts.items()}
