"""The CUDA kernel: the block sums in Triton, one program per batch row and GROUP consecutive blocks.

Each program loads BLOCK entries of the target row and, where the row has one, of the draft row, widens them to
fp32, and stores sum(max(0, p - q)) (p without a draft row; 0 at the removed token) as float64: the semantics of
`block_sums.c`, NaN mapped to 0 included. Without Triton, `status()` says so and `specref.batched` uses torch
operations on the GPU.

It also runs on CPU tensors under Triton's interpreter (TRITON_INTERPRET=1 before Triton is imported), which is how
the tests check it on machines without a GPU.
"""

from __future__ import annotations

import torch

#: Blocks of BLOCK tokens per program: 4 x 256 fp32 is 4 KiB of each input row per program.
GROUP = 4

try:
    import triton
    import triton.language as tl
except ImportError as error:  # no Triton: torch operations instead
    triton = None
    _IMPORT_ERROR = f"{error}"
else:
    _IMPORT_ERROR = None

    @triton.jit
    def _block_sums_kernel(
        target_ptr, draft_ptr, target_row_ptr, draft_row_ptr, removed_ptr, out_ptr,
        vocab_size, num_blocks, HAS_DRAFT: tl.constexpr, BLOCK: tl.constexpr, GROUP: tl.constexpr,
    ):  # fmt: skip
        row = tl.program_id(0)
        blocks = tl.program_id(1) * GROUP + tl.arange(0, GROUP)  # [GROUP] this program's blocks
        columns = blocks[:, None] * BLOCK + tl.arange(0, BLOCK)[None, :]  # [GROUP, BLOCK]
        in_row = columns < vocab_size
        target_row = tl.load(target_row_ptr + row)  # int64: row * vocab_size does not overflow
        weights = tl.load(target_ptr + target_row * vocab_size + columns, mask=in_row, other=0.0).to(tl.float32)
        if HAS_DRAFT:
            draft_row = tl.load(draft_row_ptr + row)
            has_draft_row = columns < tl.where(draft_row >= 0, vocab_size, 0)  # none: load nothing, subtract 0
            draft = tl.load(draft_ptr + draft_row * vocab_size + columns, mask=has_draft_row, other=0.0)
            weights = weights - draft.to(tl.float32)
        weights = tl.where(weights > 0.0, weights, 0.0)  # also NaN -> 0
        weights = tl.where(columns == tl.load(removed_ptr + row), 0.0, weights)
        sums = tl.sum(weights, axis=1).to(tl.float64)  # [GROUP]
        tl.store(out_ptr + row * num_blocks + blocks, sums, mask=blocks < num_blocks)


def block_sums(target_probs, draft_probs, flat_target_row, flat_draft_row, removed, block: int) -> torch.Tensor:
    """[B, ceil(V / block)] float64 block sums. Inputs as `specref.kernels.cpu.block_sums`."""
    batch, _, vocab_size = target_probs.shape
    num_blocks = -(-vocab_size // block)
    out = torch.empty(batch, num_blocks, dtype=torch.float64, device=target_probs.device)
    has_draft = draft_probs is not None
    grid = (batch, triton.cdiv(num_blocks, GROUP))
    _block_sums_kernel[grid](
        target_probs, draft_probs if has_draft else target_probs, flat_target_row, flat_draft_row, removed, out,
        vocab_size, num_blocks, HAS_DRAFT=has_draft, BLOCK=block, GROUP=GROUP, num_warps=4,
    )  # fmt: skip
    return out


def status() -> str:
    """'triton: <version>' or 'unavailable: <why>'."""
    if triton is None:
        return f"unavailable: Triton is not importable ({_IMPORT_ERROR})"
    return f"triton: {triton.__version__}"
