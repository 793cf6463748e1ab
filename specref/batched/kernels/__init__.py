"""Optional fused kernels for `specref.batched`: the final draw's block sums in one read of each input row.

The final draw of a verify call needs, for each batch row, the sums over blocks of BLOCK tokens of its weights
w = max(0, p - q) (or p, or p without one token; `specref.batched.draw` explains the two-level inverse CDF). In
torch that is five operations: two row copies, a subtraction, a clamp and a sum, each a pass over memory. A fused
kernel reads the two rows once and writes only the [B, V / BLOCK] sums:
  * CPU: `block_sums.c`, compiled on first use with the system C compiler (`specref.batched.kernels.cpu`);
  * CUDA: a Triton kernel (`specref.batched.kernels.cuda`), where Triton is importable.

On CPU, `draw` also does the draw's second level in the same call (the chosen block's weights, from cache), and
`tree_walk` and `block_verify` run the whole tree walk and block verification (`tree_walk.c`, every input dtype;
float64 with the reference's IEEE operations). Each returns None wherever no kernel applies (disabled, no compiler,
no Triton, inputs that are not contiguous) and the caller uses torch operations instead; `status(device)` says
which path runs. On validated inputs the paths differ only in the order of fp32 summation (float64: not at all),
and the tests run all of them.
"""

from __future__ import annotations

import os

import torch

__all__ = ["block_sums", "draw", "chain", "tree_walk", "block_verify", "flat_rows", "status", "ENABLED", "DTYPES"]

#: Set to False (or SPECREF_KERNELS=0 in the environment) to use torch operations everywhere.
ENABLED = os.environ.get("SPECREF_KERNELS", "1") != "0"
#: Input dtypes the kernels take (they compute in fp32); float64 keeps the reference's exact path.
DTYPES = (torch.float32, torch.bfloat16, torch.float16)


def block_sums(
    target_probs: torch.Tensor,  # [B, g+1, V]
    draft_probs: torch.Tensor | None,  # [B, g, V]; None: nothing to subtract
    target_row: torch.Tensor,  # [B] k: the weights start from target_probs[b, k]
    draft_row: torch.Tensor,  # [B] subtract draft_probs[b, draft_row] and clamp at 0; -1: nothing to subtract
    removed: torch.Tensor,  # [B] a token whose weight is 0; -1: none
    block: int,
) -> torch.Tensor | None:
    """[B, ceil(V / block)] float64: sums of consecutive blocks of the weights, or None (see the module docstring)."""
    inputs = [target_probs] + ([] if draft_probs is None else [draft_probs])
    if not ENABLED or target_probs.dtype not in DTYPES or any(not t.is_contiguous() for t in inputs):
        return None
    if draft_probs is not None and draft_probs.dtype != target_probs.dtype:
        return None
    backend = _backend(target_probs.device)
    if backend is None:
        return None
    flat_target_row, flat_draft_row = flat_rows(target_probs, target_row, draft_row)
    removed = removed.to(target_probs.device, torch.int64).contiguous()  # the kernels read it with stride 1
    return backend.block_sums(target_probs, draft_probs, flat_target_row, flat_draft_row, removed, block)


def draw(target_probs, draft_probs, target_row, draft_row, removed, block: int, u: torch.Tensor):
    """(block sums, token [B], ok [B]) of the whole two-level draw in one kernel call where one does it (the C
    kernel: CPU), else None. Arguments as `block_sums`, and u [B] the uniforms."""
    inputs = [target_probs] + ([] if draft_probs is None else [draft_probs])
    if not ENABLED or target_probs.dtype not in DTYPES or any(not t.is_contiguous() for t in inputs):
        return None
    if (draft_probs is not None and draft_probs.dtype != target_probs.dtype) or target_probs.device.type != "cpu":
        return None
    from . import cpu

    flat_target_row, flat_draft_row = flat_rows(target_probs, target_row, draft_row)
    removed = removed.to(torch.int64).contiguous()
    return cpu.draw(target_probs, draft_probs, flat_target_row, flat_draft_row, removed, block, u)


def chain(target_probs, draft_probs, draft_tokens, num_draft, uniforms, block: int):
    """The whole chain verification of `specref.batched.chain.verify` in one call where the C kernel takes the
    inputs (CPU, contiguous, one dtype of DTYPES; uniforms in fp32): (emitted [B, g+1], final rows [3, B], token
    [B], ok [B], undecided) as `cpu.chain` returns them, else None."""
    inputs = [target_probs] + ([] if draft_probs is None else [draft_probs])
    if not ENABLED or target_probs.device.type != "cpu" or target_probs.dtype not in DTYPES:
        return None
    if any(not t.is_contiguous() for t in inputs) or (
        draft_probs is not None and draft_probs.dtype != target_probs.dtype
    ):
        return None
    from . import cpu

    num_draft = None if num_draft is None else num_draft.to(torch.int64).contiguous()
    tokens = draft_tokens.to(torch.int64).contiguous()
    return cpu.chain(target_probs, draft_probs, tokens, num_draft, uniforms.to(torch.float32).contiguous(), block)


def tree_walk(target_probs, draft_probs, draft_tokens, parents, uniforms, rule: str):
    """(tokens [B, D+1], nodes [B, D], rows_read [B]) of the whole walk of `specref.batched.tree` in one call where
    the C kernel takes the inputs (CPU, contiguous, one dtype), else None. rows_read: the full V-rows each batch row
    read from its inputs."""
    from . import cpu

    uniforms = _walk_uniforms(target_probs, draft_probs, uniforms)
    if uniforms is None:
        return None
    return cpu.tree_walk(target_probs, draft_probs, draft_tokens.long().contiguous(), parents.long().contiguous(),
                         uniforms, rule)  # fmt: skip


def block_verify(target_probs, draft_probs, draft_tokens, num_draft, uniforms):
    """(tokens [B, g+1], rows_read [B]) of `specref.batched.block.verify_block` in one call where the C kernel takes
    the inputs (as `tree_walk`), else None. draft_tokens must be 0 past num_draft."""
    from . import cpu

    uniforms = _walk_uniforms(target_probs, draft_probs, uniforms)
    if uniforms is None:
        return None
    return cpu.block_verify(target_probs, draft_probs, draft_tokens.long().contiguous(), num_draft.long().contiguous(),
                            uniforms)  # fmt: skip


def flat_rows(target_probs, target_row, draft_row) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows as indices into target_probs viewed as [B*(g+1), V] and draft_probs as [B*g, V] (-1 kept)."""
    batch, rows, _ = target_probs.shape
    device = target_probs.device
    batch_index = torch.arange(batch, device=device)
    flat_target_row = (batch_index * rows + target_row.to(device)).long().contiguous()
    draft_row = draft_row.to(device)
    flat_draft_row = torch.where(draft_row >= 0, batch_index * (rows - 1) + draft_row, -1).long().contiguous()
    return flat_target_row, flat_draft_row


def status(device: str | torch.device = "cpu") -> str:
    """Which block sums run on this device: 'compiled: ...', 'triton: ...', 'disabled: ...' or 'unavailable: ...'."""
    if not ENABLED:
        return "disabled: SPECREF_KERNELS=0 or specref.batched.kernels.ENABLED = False"
    device = torch.device(device)
    module = _module(device)
    return f"unavailable: no kernel for device type {device.type!r}" if module is None else module.status(device)


def _backend(device: torch.device):
    """The backend module that runs on this device, or None."""
    module = _module(device)
    return None if module is None or module.status(device).startswith("unavailable") else module


def _module(device: torch.device):
    if device.type == "cpu":
        from . import cpu

        return cpu
    if device.type == "cuda":
        from . import cuda

        return cuda
    return None


def _walk_uniforms(target_probs, draft_probs, uniforms):
    """The uniforms as the C walks take them (rounded to the compute dtype, held as float64), or None where the C
    kernel does not take these inputs (disabled, not CPU, a dtype it lacks, not contiguous, mixed dtypes)."""
    from . import cpu

    inputs = [target_probs] + ([] if draft_probs is None else [draft_probs])
    if not ENABLED or target_probs.device.type != "cpu" or target_probs.dtype not in cpu.WALK_DTYPES:
        return None
    if any(not t.is_contiguous() for t in inputs) or (
        draft_probs is not None and draft_probs.dtype != target_probs.dtype
    ):
        return None
    compute = torch.float64 if target_probs.dtype == torch.float64 else torch.float32
    return uniforms.to(compute).to(torch.float64).contiguous()
