"""What crosses the pipe between the harness and its worker (calls.py's process mode), packed to fewer bytes.

    conn.send(pack(job))  ...  job = unpack(conn.recv())     # the same values, dtypes, shapes and layout

On a loaded machine a message costs a scheduling round trip per socket buffer it fills (a 1 MB job took 7-14 ms at
load 7 on 2 cores, a 70 kB one under 1 ms), so the large arrays of a job or a reply travel packed:
  * an integer or boolean array whose every element is the same, as one element and its shape (the rows' num_draft
    of an unragged scenario);
  * an integer array, in the narrowest integer type that holds its smallest and largest value (draft tokens and
    emitted tokens: uint8 below V = 256).
Unpacking gives back the same bytes in a fresh, writable, C-contiguous array of the original dtype: only
C-contiguous arrays of MIN_BYTES or more are packed, the rest travel as pickle sends them. `widen` raises the
connection's socket buffers to BUFFER_BYTES where the system allows, so a job of a few MB is one write.
"""

from __future__ import annotations

import contextlib
import os
import socket
from dataclasses import dataclass

import numpy as np

#: Arrays smaller than this travel as they are.
MIN_BYTES = 1 << 12
#: The socket buffer asked for each end of a worker's connection (the kernel caps it at net.core.wmem_max).
BUFFER_BYTES = 1 << 22
_NARROW = tuple(np.dtype(t) for t in ("uint8", "int8", "uint16", "int16", "uint32", "int32"))


@dataclass(frozen=True)
class Packed:
    """An array in transit: kind 'same' (payload: one element's bytes) or 'narrow' (payload: the values in a
    narrower integer dtype), with the original dtype and shape."""

    kind: str
    payload: np.ndarray
    dtype: str
    shape: tuple


def pack(obj):
    """obj with its large arrays packed (dicts, tuples and lists are walked; everything else is left as it is)."""
    return _map(obj, np.ndarray, _pack_array)


def unpack(obj):
    """The inverse of pack."""
    return _map(obj, Packed, _unpack_array)


def _map(obj, kind: type, leaf):
    """obj with leaf applied to every value of type kind inside its dicts, tuples and lists."""
    if isinstance(obj, kind):
        return leaf(obj)
    if isinstance(obj, dict):
        return {key: _map(value, kind, leaf) for key, value in obj.items()}
    if isinstance(obj, tuple):
        return tuple(_map(value, kind, leaf) for value in obj)
    if isinstance(obj, list):
        return [_map(value, kind, leaf) for value in obj]
    return obj


def _pack_array(array: np.ndarray):
    if array.nbytes < MIN_BYTES or not array.flags.c_contiguous or array.dtype.kind not in "biu" or array.size == 0:
        return array  # floats (probabilities, uniforms) travel as they are: never constant in a large job
    flat = array.reshape(-1)
    if flat[0] == flat[-1] and (flat == flat[0]).all():  # integers: equal values are equal bytes
        return Packed("same", flat[:1].copy().view(np.uint8), array.dtype.str, array.shape)
    if array.dtype.kind in "iu" and array.itemsize > 1:
        lo, hi = array.min(), array.max()
        for dtype in _NARROW:
            if dtype.itemsize >= array.itemsize:
                break
            info = np.iinfo(dtype)
            if info.min <= lo and hi <= info.max:
                return Packed("narrow", array.astype(dtype), array.dtype.str, array.shape)
    return array


def _unpack_array(packed: Packed) -> np.ndarray:
    dtype = np.dtype(packed.dtype)
    if packed.kind == "same":
        one = packed.payload.view(dtype).reshape((1,) * len(packed.shape))
        return np.broadcast_to(one, packed.shape).copy()
    if packed.kind == "narrow":
        return packed.payload.astype(dtype).reshape(packed.shape)
    raise ValueError(f"packed.kind={packed.kind!r}: expected 'same' or 'narrow'")


def widen(*connections) -> None:
    """Ask for BUFFER_BYTES of socket buffer at each end (a no-op for pipes, or where the system refuses)."""
    for connection in connections:
        with contextlib.suppress(OSError, ValueError):
            sock = socket.socket(fileno=os.dup(connection.fileno()))
            try:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, BUFFER_BYTES)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, BUFFER_BYTES)
            finally:
                sock.close()


__all__ = ["BUFFER_BYTES", "MIN_BYTES", "Packed", "pack", "unpack", "widen"]
