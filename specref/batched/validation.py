"""Input checks for `specref.batched`. Each error is a ValueError that names the argument and the offending value.

Two levels:
  * `check_shapes` reads only metadata (shapes, dtypes, devices) and never syncs a device; it always runs.
  * `check_values` reads the data (ranges, NaN, normalisation, q(d) > 0); it forces a device sync, so
    `verify(..., validate=False)` skips it.
"""

from __future__ import annotations

import torch

PROB_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

#: Rows must sum to 1 within this absolute tolerance, by input dtype. fp16/bf16 keep 11/8 significant bits, and
#: fp16 flushes probabilities below ~6e-8 to zero, which over V = 151936 tokens can lose a few 1e-3 of mass.
SUM_TOLERANCE = {torch.float64: 1e-6, torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 1e-2}


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """float64 stays float64 (so the CPU path couples with the float64 reference); everything else runs in fp32."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def check_shapes(target_probs, draft_probs, draft_tokens, num_draft, uniforms, generator) -> None:
    if not isinstance(target_probs, torch.Tensor):
        raise ValueError(f"target_probs is a {type(target_probs).__name__}; expected a torch.Tensor [B, g+1, V]")
    if target_probs.dim() != 3:
        raise ValueError(f"target_probs has shape {tuple(target_probs.shape)}; expected 3 dims [B, g+1, V]")
    batch, rows, vocab_size = target_probs.shape
    if target_probs.dtype not in PROB_DTYPES:
        raise ValueError(f"target_probs has dtype {target_probs.dtype}; expected one of {PROB_DTYPES}")
    if rows < 2 or vocab_size < 1:
        raise ValueError(f"target_probs has shape {tuple(target_probs.shape)}; need g+1 >= 2 rows and V >= 1")
    gamma = rows - 1
    device = target_probs.device
    if not isinstance(draft_tokens, torch.Tensor):
        raise ValueError(f"draft_tokens is a {type(draft_tokens).__name__}; expected an int64 torch.Tensor [B, g]")
    if draft_tokens.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"draft_tokens has dtype {draft_tokens.dtype}; expected torch.int64")
    if tuple(draft_tokens.shape) != (batch, gamma):
        raise ValueError(f"draft_tokens has shape {tuple(draft_tokens.shape)}; expected [B, g] = {[batch, gamma]}")
    _same_device("draft_tokens", draft_tokens, device)
    if draft_probs is not None:
        if not isinstance(draft_probs, torch.Tensor):
            raise ValueError(f"draft_probs is a {type(draft_probs).__name__}; expected a torch.Tensor or None")
        if tuple(draft_probs.shape) != (batch, gamma, vocab_size):
            raise ValueError(
                f"draft_probs has shape {tuple(draft_probs.shape)}; expected [B, g, V] = {[batch, gamma, vocab_size]}"
            )
        if draft_probs.dtype not in PROB_DTYPES:
            raise ValueError(f"draft_probs has dtype {draft_probs.dtype}; expected one of {PROB_DTYPES}")
        _same_device("draft_probs", draft_probs, device)
    if num_draft is not None:
        if not isinstance(num_draft, torch.Tensor):
            raise ValueError(f"num_draft is a {type(num_draft).__name__}; expected an int64 torch.Tensor [B]")
        if num_draft.dtype not in (torch.int64, torch.int32) or tuple(num_draft.shape) != (batch,):
            raise ValueError(
                f"num_draft has shape {tuple(num_draft.shape)}, dtype {num_draft.dtype}; expected int64 [B] = [{batch}]"
            )
        _same_device("num_draft", num_draft, device)
    if uniforms is not None:
        if not isinstance(uniforms, torch.Tensor) or not uniforms.is_floating_point():
            raise ValueError(f"uniforms is {type(uniforms).__name__}; expected a float torch.Tensor [B, g+1]")
        if tuple(uniforms.shape) != (batch, rows):
            raise ValueError(f"uniforms has shape {tuple(uniforms.shape)}; expected [B, g+1] = {[batch, rows]}")
        _same_device("uniforms", uniforms, device)
    elif generator is None:
        raise ValueError("generator=None and uniforms=None: pass a torch.Generator or injected uniforms")
    if generator is not None and not isinstance(generator, torch.Generator):
        raise ValueError(f"generator is a {type(generator).__name__}; expected a torch.Generator")


def check_values(target_probs, draft_probs, draft_tokens, num_draft, uniforms) -> None:
    """Data checks; every failure names the argument and the first offending index and value."""
    batch, rows, vocab_size = target_probs.shape
    gamma = rows - 1
    if num_draft is not None:
        _first_bad("num_draft", num_draft, (num_draft < 0) | (num_draft > gamma), f"must lie in [0, g={gamma}]")
        active = torch.arange(gamma, device=num_draft.device) < num_draft[:, None]  # [B, g]
    else:
        active = torch.ones_like(draft_tokens, dtype=torch.bool)
    _first_bad(
        "draft_tokens", draft_tokens, active & ((draft_tokens < 0) | (draft_tokens >= vocab_size)),
        f"is out of range for vocab size V={vocab_size}",
    )  # fmt: skip
    # rows past a row's count are placeholders: the target rows after its bonus row, the draft rows after its drafts
    bonus_or_before = torch.cat([active.new_ones(batch, 1), active], dim=1)  # [B, g+1]
    _check_probs("target_probs", target_probs, bonus_or_before)
    if draft_probs is not None:
        _check_probs("draft_probs", draft_probs, active)
        safe_tokens = torch.where(active, draft_tokens, 0).long()
        q_at_draft = draft_probs.gather(2, safe_tokens[..., None]).squeeze(-1)  # [B, g]
        _first_bad(
            "draft_tokens", draft_tokens, active & (q_at_draft == 0),
            "has draft probability 0 in draft_probs (an impossible draft)",
        )  # fmt: skip
    if uniforms is not None:
        _first_bad("uniforms", uniforms, ~((uniforms >= 0) & (uniforms < 1)), "must lie in [0, 1)")


def _check_probs(name: str, probs: torch.Tensor, used: torch.Tensor) -> None:
    """Finite, non-negative rows that sum to 1, on the rows the verifier uses (used [B, rows])."""
    # aminmax propagates NaN, so one pass screens for NaN, inf and negatives; the masks run only on failure.
    low, high = torch.aminmax(probs)
    if not (bool(low >= 0) and bool(high < float("inf"))):
        _first_bad(name, probs, ~torch.isfinite(probs) & used[..., None], "is not finite")
        _first_bad(name, probs, (probs < 0) & used[..., None], "is negative")
    tolerance = SUM_TOLERANCE[probs.dtype]
    sums = probs.sum(dim=-1, dtype=compute_dtype(probs.dtype))  # [B, rows]
    bad = ((sums - 1).abs() > tolerance) & used
    if bool(bad.any()):
        index = tuple(int(i) for i in bad.nonzero()[0])
        raise ValueError(
            f"{name}{list(index)} sums to {float(sums[index])!r}; rows must sum to 1 within {tolerance} "
            f"for {probs.dtype}"
        )


def _first_bad(name: str, values: torch.Tensor, bad: torch.Tensor, message: str) -> None:
    if bool(bad.any()):
        index = tuple(int(i) for i in bad.nonzero()[0])
        raise ValueError(f"{name}{list(index)}={values[index].item()!r} {message}")


def _same_device(name: str, tensor: torch.Tensor, device: torch.device) -> None:
    if tensor.device != device:
        raise ValueError(f"{name} is on {tensor.device}; target_probs is on {device}")
