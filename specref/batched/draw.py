"""The final draw of `specref.batched.verify`: one token per batch row, by inverse CDF over unnormalised weights.

A row's weights w [V] are max(0, p_{k+1} - q_{k+1}) after a rejection at draft k+1, p_{k+1} after k accepts
(the bonus), or p_{k+1} without the drafted token when a point-mass draft was rejected (`FinalRows` says which).
The convention, shared with `specref.randomness`: the first j with w_j > 0 and cumsum(w)_j > u * cumsum(w)_{V-1};
if rounding leaves none, the last j with w_j > 0; if w is numerically all zero, the same draw from p_{k+1}.

Two paths:
  * float64: the full [B, V] weights and a sequential cumsum, the reference's own IEEE operations (token for token
    on CPU; on CUDA the cumsum is a parallel scan, equal up to ties within rounding).
  * fp32 (also fp16/bf16 inputs), V <= BLOCK: the float64 path over the weights computed in the compute dtype.
  * fp32 (also fp16/bf16 inputs), V > BLOCK: two levels. Block sums of BLOCK tokens pick the block (float64
    partial sums over fp32 block sums), then that block's BLOCK weights, recomputed from the inputs, pick the
    token. Block sums come from a fused kernel of `specref.batched.kernels` (C on CPU, Triton on CUDA: one read of each
    input row) or else from torch operations on the full weights. A block's mass is off by a few 1e-7 of itself at
    most, far below what any law check can see; a threshold that overshoots the chosen block goes to the exact path.
    On CPU the C kernel does both levels in one call (`kernels.draw`): one read of each input row from memory, then
    the chosen block again from cache, with the same float64 additions as the torch second level.
On CPU `fused_chain` runs the accept tests of `specref.batched.chain` in that same call too (`kernels.chain`).
Rows the fast paths cannot decide (rare) are redone by a full float64 scan (`_slow_path`).
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import torch

from . import kernels

#: Tokens per block of the two-level inverse CDF (fp32 path); about sqrt(V) for real vocabularies.
BLOCK = 256
#: Largest CPU scratch buffer kept between calls, per thread (two or four are used; see `_workspace`).
WORKSPACE_MAX_BYTES = 2**29

_WORKSPACE = threading.local()


class FinalRows(NamedTuple):
    """Where each batch row's final weights come from: w = max(0, p - q) (p alone without a draft row), then w = 0
    at the removed token. Rows of -1 mean "none"."""

    target_probs: torch.Tensor  # [B, g+1, V]
    draft_probs: torch.Tensor | None  # [B, g, V]
    target_row: torch.Tensor  # [B] k: the weights start from p_{k+1} = target_probs[b, k]
    draft_row: torch.Tensor  # [B] subtract q = draft_probs[b, draft_row] and clamp at 0; -1: nothing to subtract
    removed: torch.Tensor  # [B] a token whose weight is 0 (a rejected point-mass draft); -1: none


def final_draw(final: FinalRows, u: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """[B] int64: one token per row, drawn with the uniforms u [B] in the compute dtype."""
    if dtype == torch.float64:
        token, ok = _inverse_cdf_sequential(full_weights(final, dtype), u)
    elif final.target_probs.shape[2] <= BLOCK:  # one block: two levels would gather BLOCK columns for V of them
        token, ok = _inverse_cdf_sequential(full_weights(final, dtype).double(), u.double())
    else:
        target, draft = final.target_probs, final.draft_probs
        rows = (target, draft, final.target_row, final.draft_row, final.removed, BLOCK)
        fused = kernels.draw(*rows, u)  # both levels in one call (CPU)
        if fused is not None:
            _, token, ok = fused
        else:
            sums = kernels.block_sums(*rows)
            if sums is None:
                sums = _block_sums(full_weights(final, dtype))
            token, ok = _inverse_cdf_blocked(sums, final, u, dtype)
    if bool((~ok).any()):  # rare: an empty residual, or a threshold that rounds past the end of a block or row
        token = _slow_path(token, ok, final, u, dtype)
    return token


def fused_chain(target_probs, draft_probs, draft_tokens, num_draft, uniforms, dtype) -> torch.Tensor | None:
    """The emitted tokens [B, g+1] of `specref.batched.chain.verify` by one kernel call (accept tests, final draw,
    output), where a kernel takes the inputs and the final draw would take the two-level path; else None. The rows
    it leaves undecided are redone by `_slow_path`, as `final_draw` redoes them."""
    if dtype == torch.float64 or target_probs.shape[2] <= BLOCK:
        return None
    fused = kernels.chain(target_probs, draft_probs, draft_tokens, num_draft, uniforms, BLOCK)
    if fused is None:
        return None
    emitted, (target_row, draft_row, removed), token, ok, undecided = fused
    if undecided:
        final = FinalRows(target_probs, draft_probs, target_row, draft_row, removed)
        token = _slow_path(token, ok, final, uniforms[:, -1].to(dtype), dtype)
        emitted.scatter_(1, target_row[:, None], token[:, None])  # the final token sits after the k accepted
    return emitted


def full_weights(final: FinalRows, dtype: torch.dtype) -> torch.Tensor:
    """[B, V] weights in the compute dtype, in per-thread scratch (valid until the next call on this thread)."""
    batch_index = torch.arange(final.target_probs.shape[0], device=final.target_probs.device)
    weights = _select_rows(final.target_probs, batch_index, final.target_row, "target", dtype)  # [B, V]
    if final.draft_probs is not None:
        draft_rows = _select_rows(final.draft_probs, batch_index, final.draft_row.clamp(min=0), "draft", dtype)
        # Rows with nothing to subtract may have selected a placeholder draft row (past num_draft) holding
        # anything, NaN included: zero them (0 * NaN would still be NaN), so that p - q = p exactly there.
        no_draft = final.draft_row < 0
        if draft_rows.device.type == "cpu":  # only the rows concerned: a masked pass over all rows cost ~40%
            draft_rows.index_fill_(0, no_draft.nonzero().squeeze(1), 0)
        else:  # no host sync on accelerators
            draft_rows.masked_fill_(no_draft[:, None], 0)
        weights = torch.sub(weights, draft_rows, out=draft_rows)
    weights.clamp_(min=0)
    removed = final.removed.clamp(min=0)[:, None]  # [B, 1]
    kept = torch.where(final.removed[:, None] >= 0, 0, weights.gather(1, removed))
    return weights.scatter_(1, removed, kept)


def weights_at(final: FinalRows, rows: torch.Tensor, columns: torch.Tensor | None, dtype: torch.dtype):
    """[R, C] weights of batch rows `rows` [R] at `columns` [R, C] (None: every column), from the inputs: the same
    numbers as `full_weights` there."""
    if columns is None:
        columns = torch.arange(final.target_probs.shape[2], device=rows.device)[None]  # [1, V]: broadcast
    rows = rows[:, None]
    weights = final.target_probs[rows, final.target_row[rows], columns].to(dtype)  # [R, C]
    if final.draft_probs is not None:
        draft_row = final.draft_row[rows]  # [R, 1]
        draft = final.draft_probs[rows, draft_row.clamp(min=0), columns].to(dtype)
        weights = torch.where(draft_row >= 0, weights - draft, weights)  # NaN in an unused row: discarded
    return torch.where(columns == final.removed[rows], 0, weights.clamp_(min=0))


def _select_rows(probs, batch_index, row, slot: str, dtype: torch.dtype) -> torch.Tensor:
    """probs[b, row[b]] for every b, as a [B, V] tensor of the compute dtype that the caller may overwrite."""
    batch, rows, vocab_size = probs.shape
    if not probs.is_contiguous():  # e.g. an expanded view: advanced indexing copies only the selected rows
        return probs[batch_index, row].to(dtype)
    flat = probs.view(batch * rows, vocab_size)
    selected = _workspace(slot, (len(batch_index), vocab_size), probs.dtype, probs.device)
    torch.index_select(flat, 0, batch_index * rows + row, out=selected)
    if probs.dtype == dtype:
        return selected
    return _workspace(slot + "_compute", selected.shape, dtype, probs.device).copy_(selected)


def _workspace(slot: str, shape: tuple[int, int], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """A per-thread scratch buffer, reused across calls on CPU.

    A fresh multi-megabyte CPU tensor is mapped anew by the allocator and page-faults on first touch, which costs
    more than the copy itself at B = 512 (measured: 36 ms instead of ~6 ms for 65 MB). CUDA has its caching
    allocator, so this only applies to CPU. Buffers above WORKSPACE_MAX_BYTES are not kept; `release_workspace()`
    frees the kept ones.
    """
    numel = shape[0] * shape[1]
    if device.type != "cpu" or numel * dtype.itemsize > WORKSPACE_MAX_BYTES:
        return torch.empty(shape, dtype=dtype, device=device)
    buffers = _WORKSPACE.__dict__.setdefault("buffers", {})
    buffer = buffers.get((slot, dtype))
    if buffer is None or buffer.numel() < numel:
        buffer = buffers[(slot, dtype)] = torch.empty(numel, dtype=dtype)
    return buffer[:numel].view(shape)


def release_workspace() -> None:
    """Free this thread's CPU scratch buffers (see `_workspace`)."""
    _WORKSPACE.__dict__.pop("buffers", None)


def _block_sums(weights: torch.Tensor) -> torch.Tensor:
    """[R, ceil(V / BLOCK)] sums of consecutive blocks of BLOCK weights (the last block may be shorter)."""
    rows, vocab_size = weights.shape
    num_full = vocab_size // BLOCK
    parts = [weights[:, : num_full * BLOCK].view(rows, num_full, BLOCK).sum(dim=-1)] if num_full else []
    if vocab_size % BLOCK:
        parts.append(weights[:, num_full * BLOCK :].sum(dim=-1, keepdim=True))
    return torch.cat(parts, dim=1)


def _inverse_cdf_sequential(weights: torch.Tensor, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Binary search on the full-row partial sums: the float64 path, token for token the reference's convention.

    On a sequential (monotone) cumsum the first j with cumsum_j > threshold >= 0 has w_j > 0, because the partial
    sum grew at j; the gathered checks guard parallel scans (CUDA), which need not be monotone, and a threshold
    that rounds up to the total.
    """
    cumulative = torch.cumsum(weights, dim=-1)  # [R, V]
    threshold = (u * cumulative[:, -1])[:, None]  # [R, 1]
    index = torch.searchsorted(cumulative, threshold, right=True).clamp_(max=weights.shape[1] - 1)  # [R, 1]
    ok = (cumulative.gather(1, index) > threshold) & (weights.gather(1, index) > 0)
    return index[:, 0], ok[:, 0]


def _inverse_cdf_blocked(block_sums, final: FinalRows, u, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Two-level inverse CDF: the block by its float64 partial sums, then the token within BLOCK recomputed weights."""
    rows, num_blocks = block_sums.shape
    vocab_size = final.target_probs.shape[2]
    block_cumulative = torch.cumsum(block_sums.double(), dim=-1)  # [R, num_blocks]
    threshold = u.double() * block_cumulative[:, -1]  # [R]
    block = torch.searchsorted(block_cumulative, threshold[:, None], right=True).clamp_(max=num_blocks - 1)  # [R, 1]
    before = torch.where(block > 0, block_cumulative.gather(1, (block - 1).clamp_(min=0)), 0.0)  # [R, 1]
    columns = block * BLOCK + torch.arange(BLOCK, device=block.device)  # [R, BLOCK]
    all_rows = torch.arange(rows, device=block.device)
    local = weights_at(final, all_rows, columns.clamp(max=vocab_size - 1), dtype)
    local = torch.where(columns < vocab_size, local, 0).double()  # [R, BLOCK]
    partial = before + torch.cumsum(local, dim=-1)  # [R, BLOCK]
    offset = torch.searchsorted(partial, threshold[:, None], right=True).clamp_(max=BLOCK - 1)  # [R, 1]
    ok = (partial.gather(1, offset) > threshold[:, None]) & (local.gather(1, offset) > 0)
    return (block * BLOCK + offset)[:, 0], ok[:, 0]


def _inverse_cdf_exact(weights: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """The convention by full scan in float64: first j with w_j > 0 and cumsum_j > threshold, else the last
    positive j, else -1 (an empty row)."""
    weights, u = weights.double(), u.double()
    vocab_size = weights.shape[1]
    cumulative = torch.cumsum(weights, dim=-1)  # [R, V]
    threshold = (u * cumulative[:, -1])[:, None]
    positive = weights > 0
    hit = positive & (cumulative > threshold)
    first_hit = hit.to(torch.uint8).argmax(dim=1)
    last_positive = vocab_size - 1 - positive.flip(1).to(torch.uint8).argmax(dim=1)
    return torch.where(hit.any(dim=1), first_hit, torch.where(positive.any(dim=1), last_positive, -1))


def _slow_path(token, ok, final: FinalRows, u, dtype):
    """Redo the rows the fast path could not decide; empty residuals draw from the target row instead."""
    rows = (~ok).nonzero().squeeze(1)
    redo = _inverse_cdf_exact(weights_at(final, rows, None, dtype), u[rows])
    empty = redo < 0
    if bool(empty.any()):
        empty_rows = rows[empty]
        target_rows = final.target_probs[empty_rows, final.target_row[empty_rows]].to(dtype)
        redo[empty] = _inverse_cdf_exact(target_rows, u[empty_rows])
    token = token.clone()
    token[rows] = redo
    return token
