"""Loading the subject, guarded: an exit, a signal or an exception while importing or building it is a usage error.

A verifier file that calls `sys.exit(0)` or `os._exit(0)` at import must never read as a pass (exit 0) nor as
specref's internal error (exit 3). So the load is rehearsed first in a forked child process: whatever the child
does (returns, raises, exits, is killed by a signal) is reported to this process, which then raises a UsageError
saying what happened. What the child's load returns (the subject's declaration, resolve.py) comes back pickled, so
that this process need not import the subject at all: `Deferred` stands in for its verify callable and imports the
module where it is first called, in the forked worker that runs the calls (engine/calls.py). `load_guarded` loads
the subject in this process instead, guarded against SystemExit and KeyboardInterrupt too, where a worker cannot
(pipelines, CUDA adapters, no fork).
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable

from ..errors import UsageError

_OK = b"ok"


def _outcome(load: Callable[[], object]) -> bytes:
    try:
        result = load()
    except UsageError as error:
        return b"usage:" + str(error).encode(errors="replace")
    except SystemExit as error:
        return f"called sys.exit({error.code!r})".encode(errors="replace")
    except BaseException as error:  # noqa: BLE001 -- every way a load can fail is the user's to fix
        return f"raised {type(error).__name__}: {error}".encode(errors="replace")
    try:
        return _OK + pickle.dumps(result)
    except Exception:  # noqa: BLE001 -- a result that does not pickle: the load succeeded, its result stays here
        return _OK


def in_new_thread(load: Callable[[], object]):
    """load() in a new thread, its result returned (its exception raised) here. In a forked process, OpenMP's
    thread pool does not survive in the thread that forked (engine/calls.py): a module computing with torch at import
    would hang there. signal.signal, which works in the main thread only, is honoured: calls made during the load are
    applied here, in order, once it is done."""
    box: list = []
    requested: list = []
    real = signal.signal

    def deferred(number, handler):
        if threading.current_thread() is threading.main_thread():
            return real(number, handler)
        earlier = [h for n, h in requested if n == number]
        requested.append((number, handler))
        return earlier[-1] if earlier else signal.getsignal(number)

    def work():
        try:
            box.append((True, load()))
        except BaseException as error:  # noqa: BLE001 -- raised again in the calling thread
            box.append((False, error))

    signal.signal = deferred
    try:
        thread = threading.Thread(target=work, name="specref-load")
        thread.start()
        thread.join()
    finally:
        signal.signal = real
    if threading.current_thread() is threading.main_thread():  # elsewhere no thread can set them (an edge replay)
        for number, handler in requested:
            real(number, handler)
    ok, value = box[0]
    if not ok:
        raise value
    return value


def _died(status: int) -> str:
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        return f"was killed by {name} ({number})"
    code = os.waitstatus_to_exitcode(status) if hasattr(os, "waitstatus_to_exitcode") else status >> 8
    return f"ended the process with exit status {code} (os._exit or a C-level exit) before it finished"


def rehearse(spec: str, load: Callable[[], object]):
    """Run load() once in a forked child; raise UsageError naming spec when it did not return normally there.
    Returns what load() returned there (unpickled here), or None when it did not pickle or fork is missing."""
    if not hasattr(os, "fork"):
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report the outcome, never return into specref
        try:
            os.close(read)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)  # what the module prints, it prints once: in the real load below
            os.write(write, in_new_thread(lambda: _outcome(load)))
        finally:
            os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    said = b"".join(chunks)
    if said.startswith(_OK):
        try:
            return pickle.loads(said[len(_OK) :]) if len(said) > len(_OK) else None
        except Exception:  # noqa: BLE001 -- e.g. an object of a module this process has not imported
            return None
    if said.startswith(b"usage:"):
        raise UsageError(said[len(b"usage:") :].decode(errors="replace"))
    what = said.decode(errors="replace") if said else _died(status)
    raise UsageError(f"IMPL={spec!r}: importing or building it {what}; a verifier's module must not exit, raise or "
                     "be killed at import")  # fmt: skip


def load_guarded(spec: str, load: Callable[[], object], rehearsed: bool = False):
    """load() in this process after a rehearsal (unless rehearsed already); a sys.exit during it is a UsageError too
    (Ctrl-C stays Ctrl-C)."""
    if not rehearsed:
        rehearse(spec, load)
    handler = signal.getsignal(signal.SIGINT)
    try:
        return load()
    except SystemExit as error:
        raise UsageError(f"IMPL={spec!r}: importing or building it called sys.exit({error.code!r})") from None
    finally:
        if signal.getsignal(signal.SIGINT) != handler:  # a module that ignores Ctrl-C does so in its worker only
            signal.signal(signal.SIGINT, handler)


class Deferred:
    """A verify callable whose module is imported where it is first called (the worker), never in this process.

    load() returns the verify callable; module, qualname, name and source_file are the real callable's, read in the
    rehearsal, so that fingerprints and failure locations name it without importing it. A load that fails in the
    worker is raised by the call, a verdict on that call like any exception the adapter raises."""

    def __init__(self, load: Callable[[], Callable], *, module, qualname, name, source_file):
        self._load, self._verify, self._error = load, None, None
        self.__module__, self.__qualname__, self.__name__ = module, qualname, name
        self.__specref_source__ = source_file

    def load_now(self) -> None:
        """Import the subject now (a worker does, before its first job, so that the call's time is the call's)."""
        if self._verify is None and self._error is None:
            try:
                self._verify = in_new_thread(self._load)
            except BaseException as error:  # noqa: BLE001 -- raised by the first call instead, as its verdict
                self._error = error

    def __call__(self, *args, **kwargs):
        self.load_now()
        if self._error is not None:
            raise self._error
        return self._verify(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<{self.__module__}.{self.__qualname__}, imported in the worker>"


__all__ = ["Deferred", "in_new_thread", "load_guarded", "rehearse"]
