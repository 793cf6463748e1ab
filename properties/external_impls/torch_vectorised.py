"""A correct verifier in its own vectorised torch style, exposed as an adapter object with capabilities."""

from __future__ import annotations

import torch


class TorchVerifier:
    name = "torch-vectorised"
    ragged = True  # accepts num_draft=[B]
    point_mass = True  # accepts draft_probs=None

    def verify(self, target_probs, draft_probs, draft_tokens, generator, num_draft=None):
        batch, gamma = draft_tokens.shape
        vocab = target_probs.shape[-1]
        rows = torch.arange(batch)
        p = target_probs.double()
        if num_draft is None:
            num_draft = torch.full((batch,), gamma, dtype=torch.int64)
        live = torch.arange(gamma)[None, :] < num_draft[:, None]
        tokens = draft_tokens.clamp(min=0)
        p_of_draft = p[:, :gamma].gather(2, tokens[..., None])[..., 0]
        if draft_probs is None:
            q_of_draft = torch.ones_like(p_of_draft)
        else:
            q_of_draft = draft_probs.double().gather(2, tokens[..., None])[..., 0]
        coins = torch.rand(batch, gamma, generator=generator, dtype=torch.float64)
        ok = (coins * q_of_draft < p_of_draft) & live
        kept = ok.long().cumprod(1).sum(1)
        rejected = kept < num_draft
        stop = kept.clamp(max=gamma - 1)
        if draft_probs is None:
            q_row = torch.nn.functional.one_hot(tokens[rows, stop], vocab).double()
        else:
            q_row = draft_probs.double()[rows, stop]
        target_row = p[rows, kept]  # at the rejected position, or p_{n+1} for the bonus
        leftover = (target_row - q_row).clamp(min=0)
        use_leftover = rejected & (leftover.sum(1) > 0)
        weights = torch.where(use_leftover[:, None], leftover, target_row)
        # inverse CDF: the first token whose cumulative weight exceeds u * total, so a weight-0 token is never drawn
        # (torch.multinomial draws the same law at 6x the CPU at V = 151936)
        cdf = weights.cumsum(1)
        total = cdf[:, -1:]
        u = torch.rand(batch, 1, generator=generator, dtype=torch.float64)
        below_total = torch.minimum(u * total, torch.nextafter(total, torch.zeros_like(total)))
        last = torch.searchsorted(cdf, below_total, right=True)[:, 0]
        out = torch.where(torch.arange(gamma)[None, :] < kept[:, None], draft_tokens, -1)
        out = torch.cat([out, torch.full((batch, 1), -1)], 1)
        out[rows, kept] = last
        return out


VERIFIER = TorchVerifier()
