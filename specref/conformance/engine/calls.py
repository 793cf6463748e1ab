"""Calling an adapter safely: inputs cast to what it wants; exceptions, crashes and hangs caught; outputs checked.

    with Caller(adapter, contract) as caller:
        tokens, probs_seen, seconds = caller(batch, generator_seed, timeout=30.0, where={...})

Two modes, chosen per adapter (`call_mode`):
  process  CPU adapters where fork exists. A worker process is forked on the first call, so the adapter (any
           closure) is inherited, never pickled; each call sends the batch (a broadcast context-free row travels as
           one row and its shape) and gets the tokens back. A hang is killed (SIGKILL) and a crash (a segfault, an
           os._exit) becomes a verdict; the next call forks a fresh worker. The worker runs the adapter in a thread
           of its own: OpenMP's thread pool (libgomp) does not survive fork in the thread that forked, but a new
           thread gets a new pool, so torch keeps its thread count in the worker.
  thread   CUDA adapters (a forked child cannot use CUDA once the parent has), or no fork, or
           SPECREF_CALL_MODE=thread. A hung call is abandoned in a daemon thread; `abandoned_threads()` counts them,
           and the CLI leaves by os._exit when any is alive, since one returning into a finalising interpreter aborts
           the process.
  inline   the current thread, no timeout: for the harness's own reference engine only.
Every mode builds the adapter's arguments with callform.py's `call_inputs` (the contract's CallForm), so tokens are
bit-identical between them; reproduce snippets call it too.

The hang limit of a call comes from hangs.HangLimits: the rate of the call's own scenario (or, for a scenario's
first call, the slowest rates seen, per row and per row element), within a ceiling tied to the run's budget. A call
given an explicit `timeout` gets that instead.
"""

from __future__ import annotations

import contextlib
import faulthandler
import multiprocessing
import os
import re
import signal
import sys
import tempfile
import threading
import time
import traceback
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from ...errors import AdapterFailure
from ...forced import outputs_used, reaching
from .callform import CallForm, _arguments, _job
from .hangs import HangLimits
from .locate import describe_error, locate, raised_at
from .seeds import seeds_drawn
from .timings import Timings
from .transport import pack, unpack, widen

#: 'process' or 'thread' forces a mode (where possible); unset: process for CPU adapters where fork exists.
MODE_ENV = "SPECREF_CALL_MODE"
_HERE = os.path.abspath(__file__)
_abandoned: list[threading.Thread] = []
#: The hang limit of a Caller made without one: no budget, this floor (seconds).
DEFAULT_FLOOR = 30.0


def abandoned_threads() -> int:
    """Hung calls left running in threads (thread mode) that are still alive."""
    return sum(thread.is_alive() for thread in _abandoned)


def call_mode(adapter) -> str:
    forced = os.environ.get(MODE_ENV, "")
    if forced not in ("", "process", "thread"):
        raise ValueError(f"{MODE_ENV}={forced!r} must be 'process' or 'thread'")
    fork = "fork" in multiprocessing.get_all_start_methods()
    if forced == "thread" or not fork or torch.device(adapter.device).type != "cpu":
        return "thread"
    return "process"


# --- one call, wherever it runs -------------------------------------------------------------------------------------


def _execute(verify, job: dict) -> tuple:
    """('ok', tokens [B, g+1] int64, seconds, outputs used, seeds drawn, RNGs reached, CPU seconds) (the forced
    generator's figures None, 0, {} without a forced state) or ('failure', kind, message, location); never
    raises."""
    try:
        args, kwargs = _arguments(job)
    except BaseException as error:  # noqa: BLE001 -- e.g. out of memory building the inputs
        return ("failure", "exception", f"building the inputs: {describe_error(error)}", None)
    start, cpu, seeds = time.perf_counter(), time.process_time(), seeds_drawn()
    state = job.get("generator_state")
    given = None if state is None else next(a for a in args if isinstance(a, torch.Generator))  # the form's place
    try:
        with contextlib.nullcontext() if state is None else reaching(torch.from_numpy(state), given) as reach:
            out = verify(*args, **kwargs)
        tokens = job["form"].read(out, job)
    except AdapterFailure as failure:
        return ("failure", failure.kind, failure.message, None)
    except BaseException as error:  # noqa: BLE001 -- anything the adapter raises is a verdict, not a crash
        return ("failure", "exception", describe_error(error), raised_at(error.__traceback__, verify, skip=_HERE))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu  # cpu: the worker's, all its threads
    if state is None:
        return ("ok", tokens, seconds, None, 0, {}, cpu)
    # how far the forced stream was read, how many seeds for other RNGs were drawn from it (adapters.seeds_from),
    # and what the RNGs the verifier seeded, forked or made read of theirs (forced.reaching)
    return ("ok", tokens, seconds, outputs_used(given.get_state()), seeds_drawn() - seeds, reach.reads, cpu)


# --- the caller ------------------------------------------------------------------------------------------------------


class Caller:
    """Calls one adapter in its mode (module docstring); use as a context manager, or close() when done."""

    def __init__(self, adapter, contract, mode: str | None = None, limits: HangLimits | None = None,
                 timings: Timings | None = None):  # fmt: skip
        self.adapter = adapter
        self.contract = contract  # chosen once, above the engine (specref.conformance.contracts)
        self.form = self.contract.form  # how its calls are built and read
        self.mode = mode or self.contract.call_mode or call_mode(adapter)
        self.limits = limits or HangLimits(None, DEFAULT_FLOOR)
        self.workers_started = 0
        self.timings = timings or Timings()  # where the run's time goes (timings.py): inputs, calls, the verifier
        self.outputs_used: int | None = None  # outputs of a forced generator state the last call read
        self.seeds_drawn = 0  # seeds the last call drew from that state for RNGs of its own (adapters.seeds_from)
        self.reached: dict[str, int] = {}  # {RNG: outputs of the forced stream it read} in the last call (Reach)
        self._process = self._conn = self._dump = None

    def __enter__(self) -> Caller:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __call__(
        self,
        batch,
        generator_seed: int,
        *,
        timeout: float | None = None,
        uniforms: np.ndarray | None = None,
        dtype: torch.dtype | None = None,
        where: dict | None = None,
        generator_state: torch.Tensor | None = None,
    ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray | None], float]:
        """(the output as the contract reads it: tokens [B, g+1] int64 for a chain; (target, draft) probabilities as
        the adapter saw them; seconds in the adapter).

        timeout: seconds before the call is declared hung (default: the hang limit of its scenario, hangs.py).
        Raises AdapterFailure (kind 'exception', 'malformed', 'hang' or 'crash'), with `where` as its call.
        generator_state: a forced CPU generator state (specref.forced); `self.outputs_used` then tells how many
        outputs of it the call read (None: past the forced ones, or the generator was not read as a stream).
        """
        return self.finish(
            self.start(
                self.prepare(
                    batch,
                    generator_seed,
                    timeout=timeout,
                    uniforms=uniforms,
                    dtype=dtype,
                    where=where,
                    generator_state=generator_state,
                )
            )
        )

    def prepare(self, batch, generator_seed: int, *, timeout: float | None = None,
                uniforms: np.ndarray | None = None, dtype: torch.dtype | None = None, where: dict | None = None,
                generator_state: torch.Tensor | None = None) -> Call:  # fmt: skip
        """A call's job, built and not sent: `start` sends it, `finish` waits for its output. Work done between
        start and finish (the last call's tally, the next call's inputs: passes.py) runs while the adapter does; one
        call is in flight at a time (the worker's pipe would otherwise fill in both directions)."""
        dtype = dtype or self.adapter.dtype
        declared = {name: getattr(self.adapter, name) for name in self.form.declares}
        with self.timings.phase("inputs"):
            job, seen = _job(batch, generator_seed, dtype, self.adapter.device, declared, uniforms, generator_state,
                             self.form)  # fmt: skip
        rows = len(batch)
        target = batch.target_probs  # None: a pipeline, which computes its own probabilities
        key, elements = _rate_key(where, uniforms), 1 if target is None else int(np.prod(target.shape[1:]))
        timeout = self.limits.limit(key, rows, elements) if timeout is None else timeout
        return Call(job, seen, where, rows, key, elements, timeout)

    def start(self, call: Call) -> Call:
        """Send a prepared call to the worker (process mode; the other modes run it in `finish`)."""
        call.started = time.perf_counter()
        if self.mode == "process":
            with self.timings.phase("call"):
                call.sent = self._send(call.job, call.rows)
        return call

    def finish(self, call: Call) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray | None], float]:
        """The output of a call begun with `start`, as __call__ returns it; raises AdapterFailure as __call__ does."""
        with self.timings.phase("call"):
            if self.mode == "inline":
                reply = _execute(self.adapter.verify, call.job)
            elif self.mode == "thread":
                reply = self._in_thread(call.job, call.timeout, call.rows)
            else:
                reply = call.sent or self._receive(call.timeout, call.rows)
        if reply[0] == "failure":
            raise AdapterFailure(reply[1], reply[2], reply[3], call.where)
        self.timings.verifier(reply[2], reply[6] if len(reply) > 6 else 0.0, time.perf_counter() - call.started)
        self.limits.record(call.key, call.rows, call.elements, reply[2])
        self.outputs_used = reply[3] if len(reply) > 3 else None
        self.seeds_drawn = reply[4] if len(reply) > 4 else 0
        self.reached = reply[5] if len(reply) > 5 else {}
        return reply[1], call.seen, reply[2]

    def hang_limit(self, rows: int, elements: int, where: dict | None = None) -> float:
        """The seconds a call of `rows` rows of `elements` probabilities each may take before it is declared hung."""
        return self.limits.limit(_rate_key(where, None), rows, elements)

    # thread mode

    def _in_thread(self, job: dict, timeout: float, rows: int) -> tuple:
        box: list = []
        worker = threading.Thread(target=lambda: box.append(_execute(self.adapter.verify, job)), daemon=True)
        worker.start()
        worker.join(timeout)
        if not worker.is_alive():
            return box[0]
        _abandoned.append(worker)  # never joined: a thread cannot be killed
        frame = sys._current_frames().get(worker.ident)
        location = locate(traceback.extract_stack(frame), self.adapter.verify) if frame is not None else None
        return ("failure", "hang", f"no result within {timeout:.0f} s on a batch of {rows} rows; the call was "
                "abandoned in a thread", location)  # fmt: skip

    # process mode

    def _send(self, job: dict, rows: int) -> tuple | None:
        """Send a job to the worker (started if need be); None, or the failure when the worker died."""
        if self._process is None:
            self._start()
        try:
            self._conn.send(pack(job))
        except (EOFError, OSError):
            return self._died(rows)
        return None

    def _died(self, rows: int) -> tuple:
        return ("failure", "crash", f"the worker process died during the call ({self._stop()}) on a batch of "
                f"{rows} rows", None)  # fmt: skip

    def _receive(self, timeout: float, rows: int) -> tuple:
        try:
            answered = self._conn.poll(timeout)
            reply = unpack(self._conn.recv()) if answered else None
        except (EOFError, OSError):
            return self._died(rows)
        if reply is None:
            location = self._hung_at()
            self._stop()
            return ("failure", "hang", f"no result within {timeout:.0f} s on a batch of {rows} rows; the worker "
                    "process was killed", location)  # fmt: skip
        return reply

    def _start(self) -> None:
        context = multiprocessing.get_context("fork")
        self._conn, child = context.Pipe()
        widen(self._conn, child)  # a job of a few MB in one write (transport.py)
        self._dump = tempfile.TemporaryFile()  # one per worker: it dumps at most once, then is killed
        process = context.Process(target=_serve, args=(child, self.adapter.verify, self._dump), daemon=True,
                                  name=f"specref-adapter-{self.adapter.name}")  # fmt: skip
        with warnings.catch_warnings():  # 3.12+ warns on fork with threads alive; the worker's own thread is new
            warnings.filterwarnings("ignore", category=DeprecationWarning, message=".*fork.*")
            process.start()
        child.close()
        self._process = process
        self.workers_started += 1

    def _hung_at(self) -> str | None:
        """Ask the hung worker for its Python stack (faulthandler on SIGUSR1) and locate the adapter's frame."""
        fd = self._dump.fileno()
        try:
            os.kill(self._process.pid, signal.SIGUSR1)
            text, deadline = "", time.perf_counter() + 1.0
            while time.perf_counter() < deadline:  # the dump is written from a signal handler, at once
                time.sleep(0.02)
                latest = os.pread(fd, 1 << 20, 0).decode(errors="replace")
                if latest and latest == text:
                    break
                text = latest
        except OSError:
            return None
        # faulthandler prints the innermost frame first, one block per thread; the adapter runs in the non-main one
        blocks = [b for b in re.split(r"\n(?=Thread 0x|Current thread 0x)", text) if "File" in b]
        worker = [b for b in blocks if "in _execute" in b] or blocks
        if not worker:
            return None
        frames = re.findall(r'File "(.+)", line (\d+) in (\S+)', worker[0])
        stack = [traceback.FrameSummary(f, int(n), name) for f, n, name in reversed(frames)]
        return locate([f for f in stack if os.path.abspath(f.filename) != _HERE], self.adapter.verify)

    def _stop(self) -> str:
        """Kill the worker (SIGKILL); the next call forks a fresh one. Returns how it had ended."""
        process, self._process = self._process, None
        if process is None:
            return "not started"
        with contextlib.suppress(OSError):
            if os.getpgid(process.pid) == process.pid:
                os.killpg(process.pid, signal.SIGKILL)  # the worker and every process the adapter started
        if process.is_alive():
            process.kill()
        process.join(10)
        with contextlib.suppress(OSError):
            os.killpg(process.pid, signal.SIGKILL)  # what is left of its group (it exited, its children did not)
        self._conn.close()
        self._dump.close()
        code = process.exitcode
        if code is not None and code < 0:
            return f"signal {signal.Signals(-code).name}" if -code in signal.valid_signals() else f"signal {-code}"
        return f"exit code {code}"

    def close(self) -> None:
        if self._process is not None and self._process.is_alive():
            try:
                self._conn.send(None)  # a clean exit, unless it does not come at once
                self._process.join(1.0)
            except OSError:
                pass
        self._stop()


@dataclass
class Call:
    """A call begun (Caller.start) and not yet finished: its job, the probabilities as the adapter sees them, and
    what its hang limit and rate record need."""

    job: dict
    seen: tuple
    where: dict | None
    rows: int
    key: str
    elements: int
    timeout: float
    sent: tuple | None = None  # the failure of sending it (the worker died), else None
    started: float = 0.0  # when it was sent (perf_counter)


def _rate_key(where: dict | None, uniforms) -> str:
    """Calls of one scenario share a rate (injected uniforms, float64: another)."""
    scenario = (where or {}).get("scenario", "?")
    return f"{scenario}+uniforms" if uniforms is not None else scenario


def _serve(conn, verify, dump) -> None:
    """The worker: run jobs until told to stop. The adapter runs in a new thread (libgomp after fork: see above)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle; it kills this worker
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)  # a process group of its own: the subprocesses the adapter starts end with the worker
    faulthandler.register(signal.SIGUSR1, file=dump, all_threads=True)
    getattr(verify, "load_now", lambda: None)()  # a Deferred subject (load_guard.py) is imported here, and only here

    def loop():
        while True:
            try:
                job = unpack(conn.recv())
            except (EOFError, OSError):
                return
            if job is None:
                return
            conn.send(pack(_execute(verify, job)))

    worker = threading.Thread(target=loop, name="_serve")
    worker.start()
    worker.join()


__all__ = ["AdapterFailure", "CallForm", "Caller", "abandoned_threads", "call_mode"]
