"""Forward passes of a causal LM over ragged rows: left padding, an attention mask and explicit position ids.

Rows of different lengths share one batch. Each row is left-padded to the longest; the mask hides the padding and
position ids count real tokens only, so a row's logits are those of its unpadded forward (up to float rounding).
No KV cache: every call recomputes the whole context (correctness first; the contexts here are short).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

PAD_ID = 0  # any valid id: padded positions are masked out


def left_pad(rows: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids [B, L], attention_mask [B, L]) with every row right-aligned."""
    if not rows:
        raise ValueError("rows is empty: nothing to run")
    length = max(len(r) for r in rows)
    input_ids = torch.full((len(rows), length), PAD_ID, dtype=torch.long)
    attention_mask = torch.zeros((len(rows), length), dtype=torch.long)
    for i, row in enumerate(rows):
        if len(row) == 0:
            raise ValueError(f"rows[{i}] is empty; every row needs at least one token")
        input_ids[i, length - len(row) :] = torch.as_tensor(list(row), dtype=torch.long)
        attention_mask[i, length - len(row) :] = 1
    return input_ids, attention_mask


@torch.no_grad()
def logits(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Logits [B, L, V] for right-aligned rows (attention_mask None: no padding)."""
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    position_ids = (attention_mask.cumsum(-1) - 1).clamp(min=0)
    return model(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids).logits
