"""The CPU kernel: `block_sums.c`, compiled on first use with the system C compiler and loaded with ctypes.

It reads each input row once and writes only the [B, V / BLOCK] sums, with the rows split across
torch.get_num_threads() threads. At B = 64, g = 4, V = 32000 fp32 on one thread it takes about the memory floor's
time, where the torch operations take about 2.3x longer. `chain` runs a whole chain verification in one call (the
accept tests, the draw, the emitted tokens), and checks its indices before it reads any row.

The compiler is $CC, else the first found of Python's, `cc`, `gcc`, `clang`; the library goes to
$SPECREF_CACHE/kernels (default ~/.cache/specref/kernels; a private temporary directory when neither can be
created), keyed by the source, compiler, flags and machine, so installing specref compiles nothing. Without a
compiler `block_sums` returns None and `status()` says why.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import sysconfig
import tempfile
import threading
from pathlib import Path

import torch

from ... import cache

try:
    import fcntl
except ImportError:  # not POSIX
    fcntl = None

SOURCE = Path(__file__).with_name("block_sums.c")
#: Every file of the library: the sources compiled, and the headers they include.
SOURCES = (SOURCE, SOURCE.with_name("tree_walk.c"))
HEADERS = tuple(SOURCE.with_name(name) for name in ("loads.h", "tree_walk_impl.h", "block_impl.h"))
#: Input dtypes of the tree walk (`tree_walk`): float64 runs the reference's IEEE operations.
WALK_DTYPES = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2, torch.float64: 3}
WALK_RULES = {"mss": 0, "rsd": 1, "target_only": 2, "sample_match": 3}
FLAGS = ("-O3", "-std=c11", "-shared", "-fPIC", "-pthread")
DTYPE_CODES = {torch.float32: 0, torch.bfloat16: 1, torch.float16: 2}
#: Below this many entries per input a call runs on one thread: starting threads would cost more than the sums.
PARALLEL_MIN_ELEMENTS = 2**18

_lock = threading.Lock()
_loaded: dict[str, object] = {}  # function, and path or error, once the first call has tried


def block_sums(
    target_probs: torch.Tensor,  # [B, g+1, V]
    draft_probs: torch.Tensor | None,  # [B, g, V]
    flat_target_row: torch.Tensor,  # [B] int64 rows of target_probs viewed as [B*(g+1), V]
    flat_draft_row: torch.Tensor,  # [B] int64 rows of draft_probs viewed as [B*g, V]; -1: none
    removed: torch.Tensor,  # [B] int64; -1: none
    block: int,
    threads: int | None = None,
) -> torch.Tensor | None:
    """[B, ceil(V / block)] float64 block sums, or None without a compiled kernel. Inputs as `specref.batched.kernels`;
    `threads` defaults to torch's thread count (one thread for small inputs)."""
    result = draw(target_probs, draft_probs, flat_target_row, flat_draft_row, removed, block, None, threads)
    return None if result is None else result[0]


def _threads(threads: int | None, elements: int) -> int:
    """The threads a walk runs on: torch's count for batches of at least PARALLEL_MIN_ELEMENTS probabilities."""
    if threads is not None:
        return threads
    return torch.get_num_threads() if elements >= PARALLEL_MIN_ELEMENTS else 1


def draw(
    target_probs: torch.Tensor,  # [B, g+1, V]
    draft_probs: torch.Tensor | None,  # [B, g, V]
    flat_target_row: torch.Tensor,  # [B] int64
    flat_draft_row: torch.Tensor,  # [B] int64; -1: none
    removed: torch.Tensor,  # [B] int64; -1: none
    block: int,
    u: torch.Tensor | None,  # [B] float64 uniforms; None: the block sums alone
    threads: int | None = None,
):
    """(block sums [B, ceil(V / block)] float64, token [B] int64, ok [B] bool) in one call: the two-level inverse CDF
    of `specref.batched.draw` (token and ok None without u), or None without a compiled kernel. Each input row is
    read once from memory; the chosen block is read again, from cache."""
    function = _load()
    if function is None:
        return None
    batch, _, vocab_size = target_probs.shape
    threads = _threads(threads, batch * vocab_size)
    out = torch.empty(batch, -(-vocab_size // block), dtype=torch.float64)
    token = ok = None
    if u is not None:
        u = u.to(torch.float64).contiguous()
        token, ok = torch.empty(batch, dtype=torch.int64), torch.empty(batch, dtype=torch.bool)
    error = function(
        target_probs.data_ptr(), None if draft_probs is None else draft_probs.data_ptr(),
        DTYPE_CODES[target_probs.dtype],
        flat_target_row.data_ptr(), flat_draft_row.data_ptr(), removed.data_ptr(),
        batch, vocab_size, block, out.data_ptr(), threads,
        *((None, None, None) if u is None else (u.data_ptr(), token.data_ptr(), ok.data_ptr())),
    )  # fmt: skip
    if error:
        raise RuntimeError(f"specref_draw returned {error} for dtype {target_probs.dtype}")
    return out, token, ok


def chain(
    target_probs: torch.Tensor,  # [B, g+1, V] contiguous, a dtype of DTYPE_CODES
    draft_probs: torch.Tensor | None,  # [B, g, V] contiguous, the same dtype; None: point masses
    draft_tokens: torch.Tensor,  # [B, g] int64, contiguous
    num_draft: torch.Tensor | None,  # [B] int64, contiguous; None: g
    uniforms: torch.Tensor,  # [B, g+1] float32, contiguous
    block: int,
    threads: int | None = None,
):
    """(emitted [B, g+1], final rows [3, B], token [B], ok [B], undecided) of the whole chain verification in one
    call (`specref_chain` in block_sums.c), or None without a compiled kernel or for indices out of range (the
    torch path then raises its own error). final rows: the draw's target row, draft row (-1: none) and removed
    token (-1: none); undecided: the rows whose ok is False."""
    if _load() is None:
        return None
    batch, rows, vocab_size = target_probs.shape
    threads = _threads(threads, batch * vocab_size)
    emitted = torch.empty(batch, rows, dtype=torch.int64)
    final_rows = torch.empty(3, batch, dtype=torch.int64)
    token, ok = torch.empty(batch, dtype=torch.int64), torch.empty(batch, dtype=torch.bool)
    sums = torch.empty(batch, -(-vocab_size // block), dtype=torch.float64)
    undecided = _loaded["chain"](
        target_probs.data_ptr(), None if draft_probs is None else draft_probs.data_ptr(),
        DTYPE_CODES[target_probs.dtype], draft_tokens.data_ptr(), None if num_draft is None else num_draft.data_ptr(),
        uniforms.data_ptr(), batch, rows - 1, vocab_size, block, sums.data_ptr(), token.data_ptr(), ok.data_ptr(),
        final_rows.data_ptr(), emitted.data_ptr(), threads,
    )  # fmt: skip
    if undecided == -2:
        return None
    if undecided < 0:
        raise RuntimeError(f"specref_chain returned {undecided} for dtype {target_probs.dtype}")
    return emitted, final_rows, token, ok, undecided


def tree_walk(
    target_probs: torch.Tensor,  # [B, N+1, V] contiguous, a dtype of WALK_DTYPES
    draft_probs: torch.Tensor | None,  # [B, N, V] contiguous, the same dtype; None: point masses
    draft_tokens: torch.Tensor,  # [B, N] int64, contiguous
    parents: torch.Tensor,  # [B, N] int64, contiguous
    uniforms: torch.Tensor,  # [B, N+1] float64 holding the compute dtype's values
    rule: str,
    threads: int | None = None,
):
    """(tokens [B, D+1], nodes [B, D], rows_read [B]) of `tree_walk.c`, or None without a compiled kernel."""
    if _load() is None:
        return None
    batch, num_nodes = draft_tokens.shape
    vocab_size = target_probs.shape[2]
    threads = _threads(threads, batch * vocab_size)
    tokens = torch.full((batch, num_nodes + 1), -1, dtype=torch.int64)
    nodes = torch.full((batch, num_nodes), -1, dtype=torch.int64)
    rows_read, max_depth = torch.zeros(batch, dtype=torch.int64), torch.zeros(batch, dtype=torch.int64)
    error = _loaded["walk"](
        target_probs.data_ptr(), None if draft_probs is None else draft_probs.data_ptr(),
        WALK_DTYPES[target_probs.dtype], WALK_RULES[rule],
        draft_tokens.data_ptr(), parents.data_ptr(), uniforms.data_ptr(), batch, num_nodes, vocab_size,
        tokens.data_ptr(), nodes.data_ptr(), rows_read.data_ptr(), max_depth.data_ptr(), threads,
    )  # fmt: skip
    if error:
        raise RuntimeError(f"specref_tree_walk returned {error} for dtype {target_probs.dtype}, rule {rule!r}")
    depth = int(max_depth.max()) if batch else 0
    return tokens[:, : depth + 1], nodes[:, :depth], rows_read


def block_verify(
    target_probs: torch.Tensor,  # [B, g+1, V] contiguous, a dtype of WALK_DTYPES
    draft_probs: torch.Tensor | None,  # [B, g, V] contiguous, the same dtype; None: point masses
    draft_tokens: torch.Tensor,  # [B, g] int64, contiguous, 0 past num_draft
    num_draft: torch.Tensor,  # [B] int64
    uniforms: torch.Tensor,  # [B, g+1] float64 holding the compute dtype's values
    threads: int | None = None,
):
    """(tokens [B, g+1], rows_read [B]) of block verification (`block_impl.h`), or None without the kernel."""
    if _load() is None:
        return None
    batch, gamma = draft_tokens.shape
    vocab_size = target_probs.shape[2]
    threads = _threads(threads, batch * vocab_size)
    tokens = torch.full((batch, gamma + 1), -1, dtype=torch.int64)
    rows_read = torch.zeros(batch, dtype=torch.int64)
    error = _loaded["block"](
        target_probs.data_ptr(), None if draft_probs is None else draft_probs.data_ptr(),
        WALK_DTYPES[target_probs.dtype], draft_tokens.data_ptr(), num_draft.data_ptr(), uniforms.data_ptr(),
        batch, gamma, vocab_size, tokens.data_ptr(), rows_read.data_ptr(), threads,
    )  # fmt: skip
    if error:
        raise RuntimeError(f"specref_block_verify returned {error} for dtype {target_probs.dtype}")
    return tokens, rows_read


def status(device: torch.device | None = None) -> str:
    """'compiled: <path>' or 'unavailable: <why>' (compiles on first call). `device` is ignored (always CPU)."""
    if _load() is None:
        return f"unavailable: {_loaded['error']}"
    return f"compiled: {_loaded['path']}"


def _load():
    with _lock:
        if not _loaded:
            try:
                path = _compile()
                library = ctypes.CDLL(str(path))
                function = library.specref_draw
            except (OSError, RuntimeError, subprocess.SubprocessError) as error:
                _loaded.update(function=None, error=str(error))
            else:
                function.restype = ctypes.c_int
                function.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_int] + [ctypes.c_void_p] * 3
                function.argtypes += [ctypes.c_int64] * 3 + [ctypes.c_void_p, ctypes.c_int] + [ctypes.c_void_p] * 3
                walk = library.specref_tree_walk
                walk.restype = ctypes.c_int
                walk.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_int] * 2 + [ctypes.c_void_p] * 3
                walk.argtypes += [ctypes.c_int64] * 3 + [ctypes.c_void_p] * 4 + [ctypes.c_int]
                block = library.specref_block_verify
                block.restype = ctypes.c_int
                block.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_int] + [ctypes.c_void_p] * 3
                block.argtypes += [ctypes.c_int64] * 3 + [ctypes.c_void_p] * 2 + [ctypes.c_int]
                whole_chain = library.specref_chain
                whole_chain.restype = ctypes.c_int64
                whole_chain.argtypes = [ctypes.c_void_p] * 2 + [ctypes.c_int] + [ctypes.c_void_p] * 3
                whole_chain.argtypes += [ctypes.c_int64] * 4 + [ctypes.c_void_p] * 5 + [ctypes.c_int]
                _loaded.update(function=function, walk=walk, block=block, chain=whole_chain, path=path)
        return _loaded["function"]


def _compile() -> Path:
    """The shared library for this source, compiler and machine, built once into the cache (atomically)."""
    compiler = _compiler()
    texts = [path.read_text() for path in (*SOURCES, *HEADERS)]
    key = hashlib.sha256("\0".join([*texts, *compiler, *FLAGS, platform.machine()]).encode()).hexdigest()[:16]
    directory = _cache_dir()
    if directory is None:  # no cache to be had: a private directory of this process, built anew
        directory = Path(tempfile.mkdtemp(prefix="specref-kernels-"))
    path = directory / f"block_sums-{key}.so"
    if path.exists():
        return path
    with _exclusive(directory):  # concurrent builders (pytest-xdist workers) compile it once
        if path.exists():
            return path
        with tempfile.TemporaryDirectory(dir=directory) as scratch:
            built = Path(scratch) / path.name
            command = [*compiler, *FLAGS, "-o", str(built), *map(str, SOURCES)]
            result = subprocess.run(command, capture_output=True, text=True, timeout=120)
            if result.returncode != 0:
                raise RuntimeError(f"{shlex.join(command)} failed: {result.stderr.strip()[-500:]}")
            os.replace(built, path)  # atomic: without the lock (no fcntl) builders race harmlessly
    return path


@contextlib.contextmanager
def _exclusive(directory: Path):
    """An exclusive lock on the directory itself while the block runs, so that no lock file is left in it (fcntl;
    none where it is missing)."""
    if fcntl is None:
        yield
        return
    handle = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # releases the lock


def _compiler() -> list[str]:
    """$CC when set (and then only it); else the first found of Python's compiler, cc, gcc, clang."""
    if os.environ.get("CC"):
        candidates = [os.environ["CC"]]
    else:
        candidates = [sysconfig.get_config_var("CC") or "", "cc", "gcc", "clang"]
    for candidate in candidates:
        command = shlex.split(candidate)
        if command and shutil.which(command[0]):
            return command
    raise RuntimeError(f"no C compiler: none of {[c for c in candidates if c]} found on PATH")


def _cache_dir() -> Path | None:
    """$SPECREF_CACHE/kernels, else ~/.cache/specref/kernels; None when it cannot be created."""
    return cache.folder("kernels")
