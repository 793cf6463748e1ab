"""The CUDA kernel: the block sums in Triton, one program per batch row and GROUP consecutive blocks.

Each program loads BLOCK entries of the target row and, where the row has one, of the draft row, widens them to
fp32, and stores sum(max(0, p - q)) (p without a draft row; 0 at the removed token) as float64: the semantics of
`block_sums.c`, NaN mapped to 0 included. Without Triton, `status()` says so and `specref.batched` uses torch
operations on the GPU.

It also runs on CPU tensors under Triton's interpreter (TRITON_INTERPRET=1 before Triton is imported), which is how
the tests check it on machines without a GPU.
"""

from __future__ import annotations

import contextlib

import torch

#: Blocks of BLOCK tokens per program: 4 x 256 fp32 is 4 KiB of each input row per program.
GROUP = 4
_SELF_CHECKS: dict[str, str] = {}  # device -> '' (passed) or what failed

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
    """[B, ceil(V / block)] float64 block sums. Inputs as `specref.batched.kernels.cpu.block_sums`."""
    if block & (block - 1):
        raise ValueError(f"block={block} must be a power of two for Triton")
    batch, _, vocab_size = target_probs.shape
    num_blocks = -(-vocab_size // block)
    out = torch.empty(batch, num_blocks, dtype=torch.float64, device=target_probs.device)
    has_draft = draft_probs is not None
    grid = (batch, triton.cdiv(num_blocks, GROUP))
    with torch.cuda.device(target_probs.device) if target_probs.is_cuda else contextlib.nullcontext():
        _block_sums_kernel[grid](  # Triton launches on the current device: make it the tensors' one
            target_probs, draft_probs if has_draft else target_probs, flat_target_row, flat_draft_row, removed, out,
            vocab_size, num_blocks, HAS_DRAFT=has_draft, BLOCK=block, GROUP=GROUP, num_warps=4,
        )  # fmt: skip
    return out


def status(device: torch.device | None = None) -> str:
    """'triton: <version>' or 'unavailable: <why>'. With a CUDA device, the kernel must first pass a self-check
    there (once per device): a Triton that imports but cannot build or launch, or a kernel that computes wrong
    sums on that GPU, leaves the engine on torch operations instead of failing its calls."""
    if triton is None:
        return f"unavailable: Triton is not importable ({_IMPORT_ERROR})"
    if device is not None:
        device = torch.device(device)
        key = str(device if device.index is not None else torch.device("cuda", torch.cuda.current_device()))
        if key not in _SELF_CHECKS:
            _SELF_CHECKS[key] = _self_check(torch.device(key))
        if _SELF_CHECKS[key]:
            return f"unavailable: the Triton kernel failed its self-check on {key}: {_SELF_CHECKS[key]}"
    return f"triton: {triton.__version__}"


def _self_check(device: torch.device) -> str:
    """'' when the kernel's sums on a small batch (draft rows, no draft row, a removed token, a short last block)
    match torch's on `device`; else what went wrong."""
    try:
        gen = torch.Generator(device=device).manual_seed(0)
        target = torch.rand(3, 2, 300, generator=gen, device=device)
        draft = torch.rand(3, 1, 300, generator=gen, device=device)
        flat_target_row = torch.tensor([0, 3, 4], device=device)  # rows p_1, p_2, p_1
        flat_draft_row = torch.tensor([0, -1, 2], device=device)
        removed = torch.tensor([-1, 7, 299], device=device)
        out = {
            has_draft: block_sums(target, draft if has_draft else None, flat_target_row, flat_draft_row, removed, 256)
            for has_draft in (True, False)
        }
        flat_target, flat_draft = target.view(-1, 300), draft.view(-1, 300)
        columns = torch.arange(300, device=device)
        for has_draft, sums in out.items():
            weights = flat_target[flat_target_row].double()  # [3, 300]
            if has_draft:
                draft_rows = flat_draft[flat_draft_row.clamp(min=0)].double()
                weights = torch.where(flat_draft_row[:, None] >= 0, weights - draft_rows, weights)
            weights = torch.where(columns == removed[:, None], 0.0, weights.clamp(min=0))
            expected = torch.stack([weights[:, :256].sum(1), weights[:, 256:].sum(1)], 1)
            if not torch.allclose(sums, expected, rtol=1e-5, atol=1e-9):
                return f"sums {sums.tolist()} != expected {expected.tolist()} (draft rows: {has_draft})"
    except Exception as error:  # noqa: BLE001 - any failure means "do not use the kernel here"
        return f"{type(error).__name__}: {error}"
    return ""
