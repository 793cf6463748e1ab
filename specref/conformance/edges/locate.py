"""Where a rare edge lives: the source line of a tie at zero, found by replaying the one call that shows the edge.

    sites = locate_edge(adapter, batch, generator_seed, generator_state, form=caller.form)
    # ['generation/utils.py:4486: ...']; form: the contract's call (chain/form.CHAIN, tree/contract.FORM)

The call is replayed in a forked child (the adapter may crash or hang) under a torch function mode that records
every non-strict comparison (`<=`, `>=`) whose two sides are both exactly 0 at some position, and every left-side
`searchsorted` asked for 0 on a sequence that starts at 0: the operations that turn u = 0 into a zero-probability
token. A comparison that is 0 <= 0 is where `u <= p/q` accepts a draft of probability 0. Sites are the first frame
outside torch and specref's harness, as `path:line: code`; none where the adapter is not CPU, fork is missing, or
the replay fails (the verdict never depends on them).
"""

from __future__ import annotations

import linecache
import multiprocessing
import os
import sys
import threading

import torch
from torch.overrides import TorchFunctionMode

from ...forced import reaching
from ..engine.callform import CallForm, call_inputs

_HARNESS = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # specref/conformance/
_TORCH = os.path.dirname(os.path.abspath(torch.__file__))
_NON_STRICT = {torch.le, torch.ge, torch.Tensor.le, torch.Tensor.ge, torch.Tensor.__le__, torch.Tensor.__ge__}
MAX_SITES = 3
REPLAY_TIMEOUT = 60.0


def _zero_tie(a, b) -> bool:
    """Both sides exactly 0 at one broadcast position (floating point only)."""
    a = a if isinstance(a, torch.Tensor) else torch.as_tensor(a)
    b = b if isinstance(b, torch.Tensor) else torch.as_tensor(b)
    if not (a.is_floating_point() or b.is_floating_point()):
        return False
    try:
        return bool(((a == 0) & (b == 0)).any())
    except RuntimeError:  # shapes that do not broadcast: the op itself will say so
        return False


def _site() -> str | None:
    """The first frame outside torch and this harness: `path:line: code`."""
    frame = sys._getframe(2)
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not (path.startswith(_TORCH) or path.startswith(_HARNESS)):
            code = linecache.getline(path, frame.f_lineno).strip()
            return f"{_short(path)}:{frame.f_lineno}: {code}"
        frame = frame.f_back
    return None


_PACKAGE_ROOT = os.path.dirname(os.path.dirname(_HARNESS))  # the folder holding specref/


def _short(path: str) -> str:
    """site-packages/x/y.py -> x/y.py; specref's own files from specref/; others relative to the working folder
    when under it, else as they are."""
    marker = f"site-packages{os.sep}"
    if marker in path:
        return path.split(marker, 1)[1]
    for root in (_PACKAGE_ROOT, os.getcwd()):
        relative = os.path.relpath(path, root)
        if not relative.startswith(".."):
            return relative
    return path


class _ZeroTies(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.sites: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        found = False
        if func in _NON_STRICT and len(args) >= 2:
            found = _zero_tie(args[0], args[1])
        elif func is torch.searchsorted and len(args) >= 2:
            left = kwargs.get("side", "left" if not kwargs.get("right", False) else "right") == "left"
            sorted_seq, values = args[0], args[1]
            found = left and _zero_tie(sorted_seq[..., :1], torch.as_tensor(values).min())
        if found:
            site = _site()
            if site and site not in self.sites and len(self.sites) < MAX_SITES:
                self.sites.append(site)
        return func(*args, **kwargs)


def _replay(adapter, batch, generator_seed: int, generator_state: torch.Tensor,
            form: CallForm) -> list[str]:  # fmt: skip
    declared = {name: getattr(adapter, name) for name in form.declares}  # as calls.Caller reads them
    args, kwargs = call_inputs(batch, generator_seed, dtype=adapter.dtype, device=adapter.device,
                               generator_state=generator_state, form=form, **declared)  # fmt: skip
    mode = _ZeroTies()
    given = next(a for a in args if isinstance(a, torch.Generator))
    with reaching(generator_state, given), mode:  # the RNGs it seeds or makes start forced, as in the probe's call
        adapter.verify(*args, **kwargs)
    return mode.sites


def _child(conn, adapter, batch, generator_seed, generator_state, form) -> None:
    box: list = []

    def work():  # a new thread: libgomp's pool does not survive fork in the thread that forked (see calls.py)
        try:
            box.append(_replay(adapter, batch, generator_seed, generator_state, form))
        except BaseException:  # noqa: BLE001 -- a replay that fails locates nothing
            box.append([])

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    conn.send(box[0])


def locate_edge(adapter, batch, generator_seed: int, generator_state: torch.Tensor,
                form: CallForm, timeout: float = REPLAY_TIMEOUT) -> list[str]:  # fmt: skip
    """The zero ties of one call (module docstring), replayed in a forked child; [] when none can be found. form:
    the contract's call (callform.CallForm), `batch` one of its batches (a TreeBatch for trees)."""
    if torch.device(adapter.device).type != "cpu" or "fork" not in multiprocessing.get_all_start_methods():
        return []
    context = multiprocessing.get_context("fork")
    parent, child = context.Pipe()
    process = context.Process(target=_child, args=(child, adapter, batch, generator_seed, generator_state, form),
                              daemon=True)  # fmt: skip
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*fork.*")
        process.start()
    child.close()
    try:
        sites = parent.recv() if parent.poll(timeout) else []
    except (EOFError, OSError):
        sites = []
    if process.is_alive():
        process.kill()
    process.join(5)
    parent.close()
    return sites
