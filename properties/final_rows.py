"""Seeded inputs for the final-draw tests (test_batched_kernel.py, test_batched_draw.py): probability rows and
`FinalRows` describing which rows the draw combines."""

from __future__ import annotations

import torch

from specref.batched.draw import FinalRows


def random_rows(gen, shape, dtype, zeros=0.3):
    """Normalised rows with a share of exact zeros and a wide spread of magnitudes (fp32 work unless float64)."""
    work = torch.float64 if dtype == torch.float64 else torch.float32
    rows = torch.rand(shape, generator=gen, dtype=work) ** 3
    rows[torch.rand(shape, generator=gen) < zeros] = 0
    rows[..., 0] += 1e-3
    return (rows / rows.sum(-1, keepdim=True)).to(dtype)


def final_rows(gen, batch, gamma, vocab_size, dtype, point_mass, expanded=False, poison=False):
    """Random rows to combine: about 80% of the rows that are not bonus rows have a draft row (or, for point-mass
    drafts, a removed token). `expanded`: one input row broadcast over the batch; `poison`: NaN in every draft
    row that is not used."""
    num = 1 if expanded else batch
    target = random_rows(gen, (num, gamma + 1, vocab_size), dtype)
    draft = random_rows(gen, (num, gamma, vocab_size), dtype)
    if expanded:
        target, draft = target.expand(batch, -1, -1), draft.expand(batch, -1, -1)
    target_row = torch.randint(0, gamma + 1, (batch,), generator=gen)
    has_draft = (target_row < gamma) & (torch.rand(batch, generator=gen) < 0.8)
    draft_row = torch.where(has_draft & (not point_mass), target_row, -1)
    removed = torch.where(has_draft & point_mass, torch.randint(0, vocab_size, (batch,), generator=gen), -1)
    if poison and not expanded:
        draft = draft.clone()
        draft[torch.arange(gamma)[None, :] != draft_row[:, None]] = float("nan")
    return FinalRows(target, None if point_mass else draft, target_row, draft_row, removed)
