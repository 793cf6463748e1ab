"""The chain kernel's call form: verify(target, draft, draft_tokens, generator, [num_draft=], [uniforms=]).

    args, kwargs = call_inputs(batch, generator_seed, dtype=torch.float32)      # what verify receives

num_draft is passed only to a ragged adapter and only when some row drafts fewer than g tokens. An adaptive adapter
(it chooses how many of its drafts to verify, per row) gets return_num_draft=True and returns (tokens, used [B]
int64), used <= the drafts it was given; the call's output is then the pair (tokens, used), and the tally holds its
laws to the `used` drafts of each row.
"""

from __future__ import annotations

import numpy as np
import torch

from ...errors import AdapterFailure
from ..engine import callform
from ..engine.callform import CallForm, as_numpy


def _chain_fields(batch, declared: dict) -> dict:
    ragged = declared.get("ragged", False)
    num_draft = batch.num_draft if ragged and (batch.num_draft < batch.draft_tokens.shape[1]).any() else None
    return {"tokens": batch.draft_tokens, "num_draft": num_draft, "adaptive": declared.get("adaptive", False),
            "given": batch.num_draft}  # fmt: skip


def _chain_arguments(job: dict, target, draft, generator) -> tuple[tuple, dict]:
    device = job["device"]
    kwargs = {}
    if job["num_draft"] is not None:
        kwargs["num_draft"] = torch.from_numpy(job["num_draft"].copy()).to(device)
    if job.get("adaptive"):
        kwargs["return_num_draft"] = True
    return (target, draft, torch.from_numpy(job["tokens"].copy()).to(device), generator), kwargs


def _chain_read(out, job: dict):
    """tokens [B, g+1] int64; for an adaptive adapter (tokens, used [B] int64)."""
    if job.get("adaptive"):
        if not (isinstance(out, tuple) and len(out) == 2):
            raise AdapterFailure("malformed", f"returned {type(out).__name__}; an adaptive verifier called with "
                                 "return_num_draft=True returns (tokens [B, g+1], num_draft_used [B])")  # fmt: skip
        tokens, used = out
        if not isinstance(used, torch.Tensor) or tuple(used.shape) != (job["tokens"].shape[0],):
            raise AdapterFailure("malformed", f"num_draft_used: expected an int64 tensor of shape "
                                 f"[{job['tokens'].shape[0]}]")  # fmt: skip
        used = used.detach().cpu().numpy().astype(np.int64)
        given = job["given"]
        if (used < 0).any() or (used > given).any():
            row = int(np.flatnonzero((used < 0) | (used > given))[0])
            raise AdapterFailure("malformed", f"num_draft_used[{row}]={int(used[row])}: outside 0..{int(given[row])}, "
                                 "the drafts the row was given")  # fmt: skip
        return _chain_read(tokens, {**job, "adaptive": False}), used
    rows, gamma = job["tokens"].shape
    if not isinstance(out, torch.Tensor):
        raise AdapterFailure("malformed", f"returned {type(out).__name__}, expected a torch.Tensor")
    if tuple(out.shape) != (rows, gamma + 1):
        expected = f"[B, g+1] = [{rows}, {gamma + 1}]"
        raise AdapterFailure("malformed", f"returned shape {tuple(out.shape)}, expected {expected}")
    if out.dtype != torch.int64:
        raise AdapterFailure("malformed", f"returned dtype {out.dtype}, expected torch.int64")
    return as_numpy(out)


#: The chain kernel's call: verify(target, draft, draft_tokens, generator, [num_draft=], [uniforms=]) -> [B, g+1].
CHAIN = CallForm(_chain_fields, _chain_arguments, _chain_read, declares=("ragged", "adaptive"))


def call_inputs(batch, generator_seed: int, *, dtype: torch.dtype = torch.float32, device: str = "cpu",
                ragged: bool = False, uniforms: np.ndarray | None = None, generator_state: torch.Tensor | None = None,
                form: CallForm | None = None, **declared) -> tuple[tuple, dict]:  # fmt: skip
    """(args, kwargs) of the chain call exactly as the harness passes them for this batch (reproduce snippets call
    this); engine/callform.call_inputs with the chain's form unless another is given."""
    return callform.call_inputs(batch, generator_seed, form=form or CHAIN, dtype=dtype, device=device,
                                uniforms=uniforms, generator_state=generator_state, ragged=ragged,
                                **declared)  # fmt: skip


__all__ = ["CHAIN", "call_inputs"]
