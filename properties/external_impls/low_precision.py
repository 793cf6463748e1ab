"""A correct verifier that asks for bf16 (or fp16) rows, as a kernel fed by a bf16 model would.

It computes in float32 after the cast, accepts with u < p/q, and draws corrections with torch.multinomial.
"""

from __future__ import annotations

import torch


class LowPrecisionVerifier:
    def __init__(self, dtype):
        self.dtype = dtype
        self.name = f"exact-{str(dtype).replace('torch.', '')}"

    def verify(self, target_probs, draft_probs, draft_tokens, generator):
        assert target_probs.dtype == self.dtype, target_probs.dtype
        batch, gamma = draft_tokens.shape
        p, q = target_probs.float(), draft_probs.float()
        rows = torch.arange(batch)
        p_draft = p[:, :gamma].gather(2, draft_tokens[..., None])[..., 0]  # [B, g]
        q_draft = q.gather(2, draft_tokens[..., None])[..., 0]
        u = torch.rand(batch, gamma, generator=generator)
        accepted = (u * q_draft < p_draft).long().cumprod(1).sum(1)  # [B]
        stop = accepted.clamp(max=gamma - 1)
        residual = (p[rows, stop] - q[rows, stop]).clamp(min=0)
        weights = torch.where((accepted < gamma)[:, None], residual, p[:, gamma])
        last = torch.multinomial(weights, 1, generator=generator)[:, 0]
        out = torch.where(torch.arange(gamma)[None, :] < accepted[:, None], draft_tokens, -1)
        out = torch.cat([out, torch.full((batch, 1), -1)], 1)
        out[rows, accepted] = last
        return out


BF16 = LowPrecisionVerifier(torch.bfloat16)
FP16 = LowPrecisionVerifier(torch.float16)
