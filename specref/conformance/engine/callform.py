"""A call's arguments, built exactly as the harness passes them, and its output read back: one CallForm per contract.

    args, kwargs = call_inputs(batch, generator_seed, dtype=torch.float32)      # what verify receives
    job, seen = _job(batch, generator_seed, dtype, device, declared, ...)        # what a worker is sent

A job is small enough to send to a worker process: a context-free batch's broadcast row travels as one row and its
shape, cast once to the adapter's dtype. Each contract declares its form (chain/form.py, tree/contract.py,
pipeline/contract.py). Reproduce snippets call `call_inputs`, so a snippet's arguments are bit-identical to the
harness's.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch

from ...errors import AdapterFailure


def as_numpy(out: torch.Tensor, what: str = "returned") -> np.ndarray:
    """A returned tensor's values as a numpy copy; a tensor without readable values (meta: no data; sparse or other
    non-strided layouts) is the adapter's malformed output (AdapterFailure), not an error of the harness."""
    if out.device.type == "meta":
        raise AdapterFailure("malformed", f"{what} a meta tensor (a shape without data), expected a dense tensor")
    if out.layout != torch.strided:
        raise AdapterFailure("malformed", f"{what} a {str(out.layout).replace('torch.', '')} tensor, expected a dense "
                             "(strided) one; call .to_dense() first")  # fmt: skip
    return out.detach().cpu().numpy().copy()


def _broadcast(array: np.ndarray) -> bool:
    """A context-free [B, n, V] view of one row (scenarios.py): cast and ship one row only."""
    return array.ndim == 3 and array.strides[:2] == (0, 0)


def _cast(array: np.ndarray | None, dtype: torch.dtype) -> tuple[tuple | None, np.ndarray | None]:
    """Cast once to the adapter's dtype: (its bytes, packed to build the adapter's tensor from, the same numbers in
    float64 for the T0 checks). Bytes, since numpy has no bfloat16; a broadcast row is cast and packed once."""
    if array is None:
        return None, None
    if dtype == torch.float32:  # numpy's cast: the same rounding, without torch's thread pool (whose hand-offs cost
        # more than the cast on a loaded machine, 10 ms for a [4096, 6, 6] batch)
        if _broadcast(array):
            row = np.array(array[0, 0], dtype=np.float32)  # [V]
            return ("row", row.view(np.uint8), array.shape), np.broadcast_to(row.astype(np.float64), array.shape)
        cast = np.ascontiguousarray(array, dtype=np.float32)
        return ("array", cast.view(np.uint8)), cast.astype(np.float64)
    if _broadcast(array):
        row = torch.from_numpy(np.array(array[0, 0])).to(dtype)  # [V]
        seen = np.broadcast_to(row.to(torch.float64, copy=True).numpy(), array.shape)
        return ("row", row.view(torch.uint8).numpy(), array.shape), seen
    cast = torch.from_numpy(np.ascontiguousarray(array)).to(dtype, copy=True)  # copy: never the caller's array
    return ("array", cast.view(torch.uint8).numpy()), cast.to(torch.float64, copy=True).numpy()


def _tensor(packed: tuple | None, dtype: torch.dtype, device: str) -> torch.Tensor | None:
    if packed is None:
        return None
    if packed[0] == "row" and torch.device(device).type == "cpu":
        return torch.from_numpy(_repeat_row(packed[1], packed[2])).view(dtype)
    cast = torch.from_numpy(packed[1]).view(dtype).to(device)
    return cast.expand(packed[2]).contiguous() if packed[0] == "row" else cast


def _repeat_row(row: np.ndarray, shape: tuple) -> np.ndarray:
    """A row's bytes [V x itemsize] repeated into a contiguous [B, n, V x itemsize] array, by doubling memcpys: the
    same bytes as torch's expand(shape).contiguous(), which copies element by element (8 ms for [65536, 2, 4])."""
    count = shape[0] * shape[1]
    out = _free_buffer((count, row.size))
    if count:
        out[0] = row
    done = min(count, 1)
    while done < count:
        step = min(done, count - done)
        out[done : done + step] = out[:step]
        done += step
    return out.reshape(shape[0], shape[1], row.size)


#: Buffers of repeated rows, reused across calls: a fresh [64, 2, 151936] float32 buffer costs its page faults (40 of
#: its 55 ms on a loaded machine). One is reused only when nothing but the pool holds it (its reference count: a
#: tensor or view built on it, or its storage, keeps the array alive), so a verifier that keeps its inputs keeps them
#: intact. At most POOL_BYTES are kept, the least recently used given up first.
POOL_BYTES = 1 << 29
_pool: list[np.ndarray] = []
_pool_lock = threading.Lock()


def _free_buffer(shape: tuple) -> np.ndarray:
    with _pool_lock:
        for i in range(len(_pool)):
            # references when free: the pool's list and getrefcount's argument
            if _pool[i].shape == shape and sys.getrefcount(_pool[i]) == 2:
                buffer = _pool.pop(i)
                _pool.append(buffer)  # the most recently used last
                return buffer
        buffer = np.empty(shape, dtype=np.uint8)
        _pool.append(buffer)
        while sum(b.nbytes for b in _pool) > POOL_BYTES and len(_pool) > 1:
            oldest = next((i for i in range(len(_pool) - 1) if sys.getrefcount(_pool[i]) == 2), None)
            if oldest is None:
                break
            del _pool[oldest]
        return buffer


@dataclass(frozen=True)
class CallForm:
    """How one contract's call is built and read (chain/form.py, tree/contract.py, ...). Module-level functions, so
    a job pickles by reference to a worker.

    fields(batch, declared) -> the job's contract fields (numpy); declared: the adapter's capabilities it reads.
    arguments(job, target, draft, generator) -> (args, kwargs) of verify; device tensors built from the job.
    read(out, job) -> what verify returned, checked and as numpy (raises AdapterFailure 'malformed')."""

    fields: Callable
    arguments: Callable
    read: Callable
    declares: tuple[str, ...] = ()  # the adapter capabilities `fields` reads


def call_inputs(
    batch,
    generator_seed: int,
    *,
    form: CallForm,
    dtype: torch.dtype = torch.float32,
    device: str = "cpu",
    uniforms: np.ndarray | None = None,
    generator_state: torch.Tensor | None = None,
    **declared,
) -> tuple[tuple, dict]:
    """(args, kwargs) exactly as the harness passes them to verify for this batch (reproduce snippets call this).

    generator_state: a CPU generator state (specref.forced) the generator starts in instead of the seeded one.
    form: the contract's CallForm; declared: the capabilities its fields read (ragged=True, nodes=True, ...).
    """
    job = _job(batch, generator_seed, dtype, device, declared, uniforms, generator_state, form)
    return _arguments(job[0])


def _job(batch, generator_seed: int, dtype, device, declared: dict, uniforms, generator_state,
         form: CallForm) -> tuple[dict, tuple]:  # fmt: skip
    """(what the adapter's arguments are built from, small enough to send to a worker: no [B, g+1, V] copy of a
    broadcast row; the (target, draft) probabilities as the adapter will see them, in float64)."""
    target, target_seen = _cast(batch.target_probs, dtype)
    draft, draft_seen = _cast(batch.draft_probs, dtype)
    job = {
        "form": form,
        "target": target,
        "draft": draft,
        "uniforms": uniforms,
        "dtype": dtype,
        "device": str(device),
        "generator_seed": int(generator_seed),
        "generator_state": None if generator_state is None else generator_state.numpy().copy(),
        **form.fields(batch, declared),
    }
    return job, (target_seen, draft_seen)


def _arguments(job: dict) -> tuple[tuple, dict]:
    device, dtype = job["device"], job["dtype"]
    generator = torch.Generator(device=device).manual_seed(job["generator_seed"])
    if job.get("generator_state") is not None:  # the edge probe's forced state (specref.forced)
        generator.set_state(torch.from_numpy(job["generator_state"]))
    target, draft = _tensor(job["target"], dtype, device), _tensor(job["draft"], dtype, device)
    args, kwargs = job["form"].arguments(job, target, draft, generator)
    if job["uniforms"] is not None:
        kwargs["uniforms"] = torch.from_numpy(job["uniforms"]).to(device)
    return args, kwargs


__all__ = ["CallForm", "as_numpy", "call_inputs"]
