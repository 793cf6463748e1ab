"""Buggy verifiers, each a mistake seen in real engines; plain functions (no optional capabilities)."""

from __future__ import annotations

import torch


def _verify(target_probs, draft_probs, draft_tokens, generator, *, coins=None, softmax=False, bonus=True, le=False):
    batch, gamma = draft_tokens.shape
    rows = torch.arange(batch)
    p, q = target_probs.double(), draft_probs.double()
    p_of_draft = p[:, :gamma].gather(2, draft_tokens[..., None])[..., 0]
    q_of_draft = q.gather(2, draft_tokens[..., None])[..., 0]
    if coins is None:
        coins = torch.rand(batch, gamma, generator=generator, dtype=torch.float64)
    ratio = p_of_draft / q_of_draft
    ok = coins <= ratio if le else coins < ratio
    kept = ok.long().cumprod(1).sum(1)
    rejected = kept < gamma
    stop = kept.clamp(max=gamma - 1)
    leftover = (p[rows, stop] - q[rows, stop]).clamp(min=0)
    if softmax:
        leftover = leftover.softmax(-1)  # transformers PR 28508: softmax instead of dividing by the sum
    leftover = torch.where(leftover.sum(1, keepdim=True) > 0, leftover, p[rows, stop])
    weights = torch.where(rejected[:, None], leftover, p[:, gamma])
    last = torch.multinomial(weights, 1, generator=generator)[:, 0]
    if not bonus:
        last = torch.where(rejected, last, -1)  # forgot the bonus token after g accepts
    out = torch.where(torch.arange(gamma)[None, :] < kept[:, None], draft_tokens, -1)
    out = torch.cat([out, torch.full((batch, 1), -1)], 1)
    out[rows, kept] = last
    return out


def softmax_residual(target_probs, draft_probs, draft_tokens, generator):
    return _verify(target_probs, draft_probs, draft_tokens, generator, softmax=True)


def bonus_missing(target_probs, draft_probs, draft_tokens, generator):
    return _verify(target_probs, draft_probs, draft_tokens, generator, bonus=False)


#: 8-bit coins, as from a kernel that packs random bytes: P(coin = 0) = 1/256.
COIN_LEVELS = 256


def accept_le_coarse_coins(target_probs, draft_probs, draft_tokens, generator):
    batch, gamma = draft_tokens.shape
    coins = torch.randint(0, COIN_LEVELS, (batch, gamma), generator=generator).double() / COIN_LEVELS
    return _verify(target_probs, draft_probs, draft_tokens, generator, coins=coins, le=True)


def accept_le_fp32(target_probs, draft_probs, draft_tokens, generator):
    """The non-strict test on ordinary fp32 uniforms (torch.rand): P(u = 0) = 2^-24, only a designed probe sees it."""
    batch, gamma = draft_tokens.shape
    coins = torch.rand(batch, gamma, generator=generator, dtype=torch.float32).double()
    return _verify(target_probs, draft_probs, draft_tokens, generator, coins=coins, le=True)
