"""Loading the subject, guarded: an exit, a signal or an exception while importing or building it is a usage error.

A verifier file that calls `sys.exit(0)` or `os._exit(0)` at import must never read as a pass (exit 0) nor as
specref's internal error (exit 3). So the load is rehearsed first in a forked child process: whatever the child
does (returns, raises, exits, is killed by a signal) is reported to this process, which then raises a UsageError
saying what happened, or loads the subject itself, guarded against SystemExit and KeyboardInterrupt too.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable

from ..errors import UsageError

_OK = b"ok"


def _outcome(load: Callable[[], object]) -> bytes:
    try:
        load()
    except UsageError as error:
        return b"usage:" + str(error).encode(errors="replace")
    except SystemExit as error:
        return f"called sys.exit({error.code!r})".encode(errors="replace")
    except BaseException as error:  # noqa: BLE001 -- every way a load can fail is the user's to fix
        return f"raised {type(error).__name__}: {error}".encode(errors="replace")
    return _OK


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


def rehearse(spec: str, load: Callable[[], object]) -> None:
    """Run load() once in a forked child; raise UsageError naming spec when it did not return normally there."""
    if not hasattr(os, "fork"):
        return
    sys.stdout.flush()
    sys.stderr.flush()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report the outcome, never return into specref
        try:
            os.close(read)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)  # what the module prints, it prints once: in the real load below
            os.write(write, _outcome(load))
        finally:
            os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    said = b"".join(chunks)
    if said == _OK:
        return
    if said.startswith(b"usage:"):
        raise UsageError(said[len(b"usage:") :].decode(errors="replace"))
    what = said.decode(errors="replace") if said else _died(status)
    raise UsageError(f"IMPL={spec!r}: importing or building it {what}; a verifier's module must not exit, raise or "
                     "be killed at import")  # fmt: skip


def load_guarded(spec: str, load: Callable[[], object]):
    """load() in this process after a rehearsal; a sys.exit during it is a UsageError too (Ctrl-C stays Ctrl-C)."""
    rehearse(spec, load)
    handler = signal.getsignal(signal.SIGINT)
    try:
        return load()
    except SystemExit as error:
        raise UsageError(f"IMPL={spec!r}: importing or building it called sys.exit({error.code!r})") from None
    finally:
        if signal.getsignal(signal.SIGINT) != handler:  # a module that ignores Ctrl-C does so in its worker only
            signal.signal(signal.SIGINT, handler)


__all__ = ["load_guarded", "rehearse"]
