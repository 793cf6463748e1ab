"""Calling an adapter safely: inputs cast to what it wants, exceptions and hangs caught, outputs checked."""

from __future__ import annotations

import threading
import time

import numpy as np
import torch

from .adapters import Adapter
from .scenarios import Batch


class AdapterFailure(Exception):
    """The adapter raised, hung, or returned something that is not a [B, g+1] int64 tensor."""

    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}")
        self.kind, self.message = kind, message


def _tensor(array: np.ndarray, dtype: torch.dtype, device: str) -> tuple[torch.Tensor, np.ndarray]:
    """(tensor for the adapter, the same numbers in float64 numpy as the adapter sees them after the cast)."""
    if array.ndim == 3 and array.strides[:2] == (0, 0):  # a broadcast context-free row: cast one row only
        row = torch.from_numpy(np.array(array[0, 0])).to(dtype)
        seen = np.broadcast_to(row.double().numpy(), array.shape)
        return row.to(device).expand(array.shape).contiguous(), seen
    tensor = torch.from_numpy(np.ascontiguousarray(array)).to(dtype)
    return tensor.to(device), tensor.double().numpy()


def call(
    adapter: Adapter,
    batch: Batch,
    generator_seed: int,
    *,
    timeout: float,
    uniforms: np.ndarray | None = None,
    dtype: torch.dtype | None = None,
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray | None], float]:
    """Run the adapter on one batch; return (tokens [B, g+1] int64, probs as seen, seconds)."""
    dtype = dtype or adapter.dtype
    target, target_seen = _tensor(batch.target_probs, dtype, adapter.device)
    draft, draft_seen = (None, None) if batch.draft_probs is None else _tensor(batch.draft_probs, dtype, adapter.device)
    tokens = torch.from_numpy(batch.draft_tokens.copy()).to(adapter.device)
    generator = torch.Generator(device=adapter.device).manual_seed(generator_seed)
    kwargs = {}
    if adapter.ragged and (batch.num_draft < batch.draft_tokens.shape[1]).any():
        kwargs["num_draft"] = torch.from_numpy(batch.num_draft.copy()).to(adapter.device)
    if uniforms is not None:
        kwargs["uniforms"] = torch.from_numpy(uniforms).to(adapter.device)

    box: dict = {}

    def work():
        try:
            box["out"] = adapter.verify(target, draft, tokens, generator, **kwargs)
        except BaseException as error:  # noqa: BLE001 -- anything the adapter raises is a verdict, not a crash
            box["error"] = error

    start = time.perf_counter()
    worker = threading.Thread(target=work, daemon=True)  # a hung adapter is abandoned, never joined
    worker.start()
    worker.join(timeout)
    seconds = time.perf_counter() - start
    if worker.is_alive():
        raise AdapterFailure("hang", f"no result within {timeout:.0f} s on a batch of {len(batch.num_draft)} rows")
    if "error" in box:
        error = box["error"]
        raise AdapterFailure("exception", f"{type(error).__name__}: {error}")
    return _as_tokens(box["out"], batch), (target_seen, draft_seen), seconds


def _as_tokens(out, batch: Batch) -> np.ndarray:
    rows, gamma = batch.draft_tokens.shape
    if not isinstance(out, torch.Tensor):
        raise AdapterFailure("malformed", f"returned {type(out).__name__}, expected a torch.Tensor")
    if tuple(out.shape) != (rows, gamma + 1):
        expected = f"[B, g+1] = [{rows}, {gamma + 1}]"
        raise AdapterFailure("malformed", f"returned shape {tuple(out.shape)}, expected {expected}")
    if out.dtype != torch.int64:
        raise AdapterFailure("malformed", f"returned dtype {out.dtype}, expected torch.int64")
    return out.detach().cpu().numpy()
