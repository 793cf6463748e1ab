"""The sampling contract's call form: verify(target_logits, draft_probs, draft_tokens, params, histories, generator,
[uniforms=]) -> tokens [B, g+1] int64, or (tokens, logprobs [B, g+1]) when the adapter declares logprobs.

The raw logits travel as the batch's `target_probs` (engine/callform.py casts them to the adapter's dtype and ships
a broadcast row once); params and histories travel as lists of frozen dataclasses (pickled by value to a worker).
The output is read back as (tokens [B, g+1] int64, logprobs [B, g+1] float64 or None).
"""

from __future__ import annotations

import numpy as np
import torch

from ...errors import AdapterFailure
from ..engine.callform import CallForm


def _fields(batch, declared: dict) -> dict:
    return {"tokens": batch.draft_tokens, "params": list(batch.params), "histories": list(batch.histories),
            "logprobs": declared.get("logprobs")}  # fmt: skip


def _arguments(job: dict, target, draft, generator) -> tuple[tuple, dict]:
    tokens = torch.from_numpy(job["tokens"].copy()).to(job["device"])
    return (target, draft, tokens, job["params"], job["histories"], generator), {}


def _tensor(out, rows: int, width: int, what: str) -> torch.Tensor:
    if not isinstance(out, torch.Tensor):
        raise AdapterFailure("malformed", f"{what}: returned {type(out).__name__}, expected a torch.Tensor")
    if tuple(out.shape) != (rows, width):
        raise AdapterFailure("malformed", f"{what}: returned shape {tuple(out.shape)}, expected [B, g+1] = "
                             f"[{rows}, {width}]")  # fmt: skip
    return out


def _read(out, job: dict) -> tuple[np.ndarray, np.ndarray | None]:
    rows, gamma = job["tokens"].shape
    logprobs = None
    if job["logprobs"] is not None:
        if not (isinstance(out, tuple) and len(out) == 2):
            raise AdapterFailure("malformed", f"returned {type(out).__name__}; an adapter declaring logprobs="
                                 f"{job['logprobs']!r} returns (tokens, logprobs)")  # fmt: skip
        out, logprobs = out
        logprobs = _tensor(logprobs, rows, gamma + 1, "logprobs").detach().double().cpu().numpy().copy()
    tokens = _tensor(out, rows, gamma + 1, "tokens")
    if tokens.dtype != torch.int64:
        raise AdapterFailure("malformed", f"tokens: returned dtype {tokens.dtype}, expected torch.int64")
    return tokens.detach().cpu().numpy().copy(), logprobs


#: The sampling call: verify(logits, draft, draft_tokens, params, histories, generator) -> tokens [, logprobs].
FORM = CallForm(_fields, _arguments, _read, declares=("logprobs",))

__all__ = ["FORM"]
