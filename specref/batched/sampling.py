"""The batched sampling verifier: vLLM's processor chain (specref.reference.processors, chain "vllm") on B rows and
g+1 positions at once in torch, then `chain.verify` on the processed target law. CPU or CUDA; coupled token for token
with specref.reference.sampling through injected uniforms (specref.randomness's convention).

    tokens = verify_sampling(target_logits [B, g+1, V], draft_probs [B, g, V] | None, draft_tokens [B, g],
                             params (B SamplingParams), histories (B History, before this step), generator)

Position i's penalties count the history and the drafts d_1..d_{i-1} of this step (a cumulative one-hot over the
drafts). The per-row parameters become [B] tensors; rows sharing one SamplingParams or History object share one
conversion.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..errors import BadArgument
from ..reference.processors import SUPPORTS, History, SamplingParams, check_params
from .chain import verify


def _per_row(objects: Sequence, convert) -> list:
    cache: dict[int, object] = {}
    out = []
    for o in objects:
        if id(o) not in cache:
            cache[id(o)] = convert(o)
        out.append(cache[id(o)])
    return out


def _row_tensors(params: Sequence[SamplingParams], vocab: int, device, dtype) -> dict[str, torch.Tensor]:
    rows = _per_row(params, lambda p: check_params("vllm", p, vocab))
    t = {
        name: torch.tensor([getattr(p, name) for p in rows], dtype=dtype, device=device)
        for name in ("temperature", "top_p", "min_p", "repetition_penalty", "presence_penalty", "frequency_penalty")
    }
    t["top_k"] = torch.tensor([p.top_k for p in rows], dtype=torch.int64, device=device)
    bias = torch.zeros(len(rows), vocab, dtype=dtype)
    allowed = torch.ones(len(rows), vocab, dtype=torch.bool)
    for b, p in enumerate(rows):
        for token, value in p.logit_bias:
            bias[b, token] += value
        if p.allowed_token_ids is not None:
            allowed[b] = False
            allowed[b, list(p.allowed_token_ids)] = True
    t["bias"], t["allowed"] = bias.to(device), allowed.to(device)
    return t


def _history_counts(histories: Sequence[History], vocab: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """([B, V] prompt counts, [B, V] output counts) of the histories before this step."""

    def counts(tokens):
        return torch.bincount(torch.as_tensor(tokens, dtype=torch.int64), minlength=vocab)[:vocab]

    pairs = _per_row(histories, lambda h: (counts(h.prompt), counts(h.output)))
    return torch.stack([p for p, _ in pairs]).to(device), torch.stack([o for _, o in pairs]).to(device)


def processed_probs(target_logits: torch.Tensor, draft_tokens: torch.Tensor, params: Sequence[SamplingParams],
                    histories: Sequence[History]) -> torch.Tensor:  # fmt: skip
    """[B, g+1, V] the vLLM chain's law at every position (float64 for float64 logits, else float32)."""
    batch, width, vocab = target_logits.shape
    dtype = torch.float64 if target_logits.dtype == torch.float64 else torch.float32
    device = target_logits.device
    x = target_logits.to(dtype).clone()  # [B, g+1, V]
    t = _row_tensors(params, vocab, device, dtype)
    prompt, output = _history_counts(histories, vocab, device)
    drafts = torch.zeros(batch, width, vocab, dtype=torch.int64, device=device)  # d_<i one-hot, cumulative
    if width > 1:
        hot = torch.nn.functional.one_hot(draft_tokens.clamp(min=0), vocab) * (draft_tokens >= 0)[..., None]
        drafts[:, 1:] = hot.cumsum(1)
    out_counts = output[:, None, :] + drafts  # [B, g+1, V]
    x = x.masked_fill(~t["allowed"][:, None, :], float("-inf")) + t["bias"][:, None, :]
    r = t["repetition_penalty"][:, None, None]
    seen = (prompt[:, None, :] > 0) | (out_counts > 0)
    x = torch.where(seen, torch.where(x > 0, x / r, x * r), x)
    x = x - t["frequency_penalty"][:, None, None] * out_counts - t["presence_penalty"][:, None, None] * (out_counts > 0)
    greedy = t["temperature"] == 0  # [B]
    argmax = x.argmax(-1)  # [B, g+1], the first maximum
    x = x / torch.where(greedy, 1.0, t["temperature"])[:, None, None]
    probs = torch.softmax(x, -1)
    min_p = t["min_p"][:, None, None]
    x = x.masked_fill((probs < min_p * probs.amax(-1, keepdim=True)) & (min_p > 0), float("-inf"))
    x = _top_k_top_p(x, t["top_k"], t["top_p"])
    probs = torch.softmax(x, -1)
    one_hot = torch.nn.functional.one_hot(argmax, vocab).to(dtype)
    return torch.where(greedy[:, None, None], one_hot, probs)


def _top_k_top_p(x: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """vLLM's apply_top_k_top_p_pytorch on [B, g+1, V]: keep logits >= the k-th largest, then remove the ascending
    tokens whose cumulative softmax (over what top-k kept: renormalised) is <= 1 - p, never the largest. When every
    row has a top-k, only the k_max largest are sorted (torch.topk), not the vocabulary."""
    batch, width, vocab = x.shape
    k = torch.where(top_k > 0, top_k.clamp(max=vocab), vocab)
    if not ((top_k > 0).any() or (top_p < 1).any()):
        return x
    k_max = int(k.max())
    if k_max < vocab:  # every row has a top-k: only the tokens at or above the k-th largest (ties kept) are sorted
        kth = x.topk(k_max, dim=-1).values.gather(-1, (k - 1)[:, None, None].expand(batch, width, 1))
        kept = int((x >= kth).sum(-1).max())
        values, index = x.topk(kept, dim=-1)  # descending
        ordered, index = values.flip(-1), index.flip(-1)  # ascending, as vLLM sorts
        out = torch.full_like(x, float("-inf"))
    else:
        ordered, index = x.sort(dim=-1, descending=False, stable=True)
        out = torch.empty_like(x)
    width_kept = ordered.shape[-1]
    kth = ordered.gather(-1, (width_kept - k)[:, None, None].expand(batch, width, 1))
    ordered = ordered.masked_fill(ordered < kth, float("-inf"))
    cumulative = torch.softmax(ordered, -1).cumsum(-1)
    remove = cumulative <= 1 - top_p[:, None, None]
    remove[..., -1] = False
    ordered = ordered.masked_fill(remove & (top_p < 1)[:, None, None], float("-inf"))
    return out.scatter_(-1, index, ordered)


def verify_sampling(target_logits: torch.Tensor, draft_probs: torch.Tensor | None, draft_tokens: torch.Tensor,
                    params: Sequence[SamplingParams], histories: Sequence[History],
                    generator: torch.Generator | None = None, *, uniforms: torch.Tensor | None = None,
                    logprobs: bool = False):  # fmt: skip
    """tokens [B, g+1] int64 (-1 padded); with logprobs=True (tokens, logprobs [B, g+1]: log of the processed law of
    each emitted token, NaN past the last)."""
    batch, width, vocab = target_logits.shape
    if len(params) != batch or len(histories) != batch:
        raise BadArgument(f"params has {len(params)} entries and histories {len(histories)}; expected B = {batch}")
    target_probs = processed_probs(target_logits, draft_tokens, params, histories)
    probs = target_probs if draft_probs is None else target_probs.to(draft_probs.dtype)
    tokens = verify(probs, draft_probs, draft_tokens, generator, uniforms=uniforms, validate=False)
    if not logprobs:
        return tokens
    emitted = tokens >= 0
    picked = target_probs.gather(-1, tokens.clamp(min=0)[..., None])[..., 0].log()
    return tokens, torch.where(emitted, picked, torch.nan)


#: The parameters the batched chain takes (vLLM's chain: all of them).
SUPPORTED = SUPPORTS["vllm"]

__all__ = ["SUPPORTED", "processed_probs", "verify_sampling"]
