"""The run's calls to the adapter: the probe pass, then the main pass, each call T0-checked and counted.

    calls = Calls.start(plan, seed)
    probe_pass(caller, plan, calls, clock, tell)        # one small call per scenario (chunk 0)
    main_pass(caller, plan, calls, sizing, clock, tell) # chunks 1, 2, ... (joint scenarios: batches of chunks)

Every call's inputs and generator seed derive from (run seed, scenario, chunk) alone, so a chunk gives the same
tokens whichever process runs it: that is what lets `shards.py` split a run and merge it exactly.
"""

from __future__ import annotations

import functools
import math
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from .calls import AdapterFailure, Caller
from .contract import Scenario
from .joint import JOINT_TOKENS, joint_counts

MIN_ROWS = 256
#: The most of the budget the rare-edge probe may take (it stops earlier once it reaches its target power).
PROBE_SHARE = 0.45
#: A call sized to the time left has at least this many rows (when they take under MIN_CALL_SECONDS; else at least
#: one row, or no call); a first call, at least MIN_FIRST_ROWS.
MIN_CALL_ROWS, MIN_FIRST_ROWS, MIN_CALL_SECONDS = 64, 2, 0.25
#: A call sized to the time left takes at most this share of its slice's time left, at its scenario's slowest rate:
#: a machine that slows k-fold mid-slice (another job starts) overruns it by at most (k x CALL_SHARE - 1) of it, and
#: the slow call re-rates the calls after it.
CALL_SHARE = 0.5
#: The most of the time left the probe pass may take, in equal shares per scenario left, and the most its warm-up
#: calls may take (WARM_SHARE: their outputs are not counted, their time buys no evidence); a warm-up's first call
#: has WARM_FIRST_ROWS rows, and it stops growing once a call takes WARM_CALL_SECONDS.
PROBE_PASS_SHARE, WARM_SHARE, WARM_FIRST_ROWS, WARM_CALL_SECONDS = 0.5, 0.1, 8, 0.1
#: The share of the budget kept after the main pass, on top of the run-level checks' expected time (_reserve), and
#: the seconds kept for the report (its checks, its files) and for the reference engine beside the coupling check.
RESERVE_SHARE, REPORT_SECONDS, COUPLING_SECONDS = 0.05, 3.0, 2.0
#: A joint-loop call's start states are kept in its provenance (for a reproduce snippet) up to this many rows.
MAX_RECORDED_STATES = 64


def derive_seed(*key) -> int:
    """A stable seed from a key (zlib.crc32): the generator seed of every call is derive_seed("generator", ...)."""
    return zlib.crc32(":".join(map(str, key)).encode())


@dataclass
class Clock:
    """The run's time budget: its deadline (infinite without a budget: fixed rows, no time cap)."""

    started: float
    deadline: float

    @classmethod
    def start(cls, budget_seconds: float | None, started: float | None = None) -> Clock:
        started = time.perf_counter() if started is None else started
        return cls(started, started + (math.inf if budget_seconds is None else budget_seconds))

    def left(self) -> float:
        return self.deadline - time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.started


@dataclass
class Sizing:
    """How many rows each scenario gets: a fixed N (rows) or its share of the budget; which chunks this process runs.

    owns(unit): True when this process runs a scenario's unit (chunk 0 is unit 0, main chunk c is unit c, a joint
    batch b is unit b + 1); every unit is run by exactly one shard (`shards.Shard.owns`).
    """

    budget_seconds: float
    rows: int | dict[str, int] | None = None
    owns: Callable[[int], bool] = lambda unit: True
    allocated: bool = False  # rows allocated from a timed warm-up (plan_rows.py)
    warm: bool = False  # after chunk 0, timed warm-up calls whose outputs are not counted (allocated and --tv runs)
    probe_seconds: float | None = None  # the rare-edge probe's slice when allocated (else PROBE_SHARE of the left)
    #: when allocated: before(s, left) fixes scenario s's N just before its main pass, from the time left and the
    #: speed measured so far (never from an outcome of s); order(s) sorts the main pass (cheapest first)
    before: Callable | None = None
    order: Callable | None = None

    def fixed(self, s: Scenario) -> int | None:
        return self.rows.get(s.name) if isinstance(self.rows, dict) else self.rows


def first_call_rows(s: Scenario, fixed: int | None = None) -> int:
    """Rows of a scenario's probe-pass call (chunk 0): never more than a fixed N (rows=N is honoured exactly)."""
    return min(MIN_ROWS, s.rows_per_call, fixed or MIN_ROWS)


@dataclass
class Calls:
    """What the calls produced: the tallies, every call's provenance, and how the calls ended."""

    tallies: dict  # scenario -> its tally (chain/tally.Tally, tree.checks.TreeTally)
    fed: dict[str, list[dict]]  # provenance of every call, per scenario
    broken: dict[str, AdapterFailure] = field(default_factory=dict)  # scenario -> the adapter's failure
    stopped: str | None = None  # why the run stopped calling the adapter (a hang), or None
    finished: set[str] = field(default_factory=set)  # the scenarios whose main pass ended
    cut: dict[str, int] = field(default_factory=dict)  # scenario -> its fixed rows, when the budget cut it short
    first_rows: dict[str, int] = field(default_factory=dict)  # scenario -> rows of its probe-pass call (chunk 0)
    warmup: dict[str, float] = field(default_factory=dict)  # scenario -> wall seconds per row of its chunk-0 call

    @classmethod
    def start(cls, plan: list[Scenario], seed: int, tally: Callable) -> Calls:
        """tally(scenario) -> the contract's tally of one scenario (engine/contract.Contract.tally)."""
        return cls({s.name: tally(s) for s in plan}, {s.name: [] for s in plan})

    def per_row(self, s: Scenario) -> float:
        """Wall seconds per row of a scenario at the warm-up's speed (a joint scenario's row is JOINT_TOKENS calls'
        rows); 0 before its warm-up."""
        return self.warmup.get(s.name, 0.0) * (JOINT_TOKENS if s.joint else 1)

    def seconds_left(self, s: Scenario, rows: int) -> float:
        """The main-pass seconds of s at `rows` rows, at the warm-up's speed (its probe-pass rows already run)."""
        return self.per_row(s) * max(0, rows - self.first_rows.get(s.name, 0))

    def halted(self, s: Scenario, failure: AdapterFailure) -> bool:
        """Record a failure; True when it was a hang, which stops the run's calls."""
        self.broken[s.name] = failure
        if failure.kind == "hang":
            self.stopped = f"the run stopped calling the adapter after a hang in {s.name}"
        return self.stopped is not None

    def summary(self, name: str) -> dict:
        """The first call that fed a scenario (what T2 snippets rebuild), and how many calls there were in all."""
        log = self.fed[name]
        if not log:
            return {"count": 0, "first": None, "rows": 0}
        return {"count": len(log), "first": log[0], "chunks": [log[0]["chunk"], log[-1]["chunk"]],
                "rows": sum(w["rows"] for w in log)}  # fmt: skip


def probe_pass(caller: Caller, plan: list[Scenario], calls: Calls, seed: int, clock: Clock, tell, owns,
               sizing: Sizing | None = None) -> None:  # fmt: skip
    """One small call per scenario, chunk 0: T0 on every scenario early, and a first speed reading. A scenario
    sized by time gets fewer rows when its expected rate (hangs.HangLimits.expected) would take more than its share
    of PROBE_PASS_SHARE of the time left (a row loop at V = 151,936 on a loaded machine: seconds a row)."""
    for i, s in enumerate(plan):
        if owns(0):
            warm = sizing is not None and sizing.warm  # then also timed warm-up calls, their outputs not counted
            rows = first_call_rows(s, sizing.fixed(s) if sizing is not None else None)
            if sizing is not None and sizing.fixed(s) is None and math.isfinite(clock.deadline):
                share = PROBE_PASS_SHARE * max(0.0, clock.left() - _reserve(caller, sizing.budget_seconds))
                rows = _rows_for(caller, s, rows, share / (len(plan) - i))
            calls.first_rows[s.name] = rows
            try:
                feed(caller, s, calls, rows, 0, seed=seed, clock=clock)
                if warm:
                    left = math.inf
                    if math.isfinite(clock.deadline):
                        left = max(0.0, clock.left() - _reserve(caller, sizing.budget_seconds))
                    _warm_up(caller, s, calls, seed, clock, WARM_SHARE * left / (len(plan) - i))
            except AdapterFailure as failure:
                if calls.halted(s, failure):
                    return
        tell(f"probe {s.name}", 0.1 * (i + 1) / len(plan))


#: The chunk of the warm-up calls: inputs and generator seeds of their own, so that their time (which may depend on
#: their outcomes) is independent of every counted call's outcomes.
WARM_CHUNK = "warm-up"


def _warm_up(caller: Caller, s: Scenario, calls: Calls, seed: int, clock: Clock, seconds: float) -> None:
    """Calls on chunk WARM_CHUNK whose outputs are not counted, from WARM_FIRST_ROWS rows up, growing until one takes
    WARM_CALL_SECONDS or reaches the main pass's call size, or the scenario's share of the time (`seconds`) is spent.
    Each call's wall time (inputs, call, tally) is read as a fixed cost per call plus a cost per row, fitted on the
    last two calls; calls.warmup holds the cost per row of a call of the main pass's size (rows_per_call). Small
    calls first, so that a slow verifier's first call costs little; two sizes, so that a fixed cost per call (0.1 s
    at V = 151,936) is not read as a cost per row."""
    begun, rows, points = time.perf_counter(), min(WARM_FIRST_ROWS, s.rows_per_call), []
    while True:
        start = time.perf_counter()
        feed(caller, s, calls, rows, WARM_CHUNK, seed=seed, clock=clock, warm=True)
        took = time.perf_counter() - start
        points.append((rows, took))
        spent = time.perf_counter() - begun
        if len(points) >= 2 and (rows >= s.rows_per_call or took >= WARM_CALL_SECONDS or spent + 2 * took > seconds):
            break
        if took > seconds or (rows >= s.rows_per_call and len(points) >= 2):  # one call already spends the share
            break
        rows = min(s.rows_per_call, 2 * rows if took > 0.01 else 8 * rows) if rows < s.rows_per_call else rows // 2
    calls.warmup[s.name] = _cost_per_row(points, s.rows_per_call)


def _cost_per_row(points: list[tuple[int, float]], call_rows: int) -> float:
    """Seconds per row of a call of call_rows rows, from (rows, seconds) of the warm-up's calls: a line through the
    last two (fixed cost + rows x cost per row), or the last call's own rate when one call (or a falling line)."""
    (r1, t1), (r2, t2) = points[-2] if len(points) > 1 else (0, 0.0), points[-1]
    per_row = (t2 - t1) / (r2 - r1) if len(points) > 1 and r2 > r1 and t2 > t1 else t2 / r2
    fixed = max(0.0, t2 - per_row * r2)
    return per_row + fixed / max(call_rows, 1)


def main_pass(caller: Caller, plan: list[Scenario], calls: Calls, seed: int, sizing: Sizing, clock: Clock,
              tell) -> None:  # fmt: skip
    """Each scenario gets an equal slice of the time left, up to its cap; unused time rolls forward.

    After a hang the run calls the adapter no more, and the scenarios left get their checks marked not run.
    Without a budget (fixed rows, no time cap) every scenario gets its fixed rows.
    """
    reserve = _reserve(caller, sizing.budget_seconds) if math.isfinite(clock.deadline) else 0.0
    todo = sorted((s for s in plan if s.name not in calls.broken), key=sizing.order or (lambda s: not s.probe))
    done = _progress(todo, calls, sizing)
    for i, s in enumerate(todo):  # the probe first
        if sizing.before is not None:
            sizing.before(s, todo[i:])
        left = max(0.0, clock.left() - reserve)
        probe_slice = PROBE_SHARE * left if sizing.probe_seconds is None else min(sizing.probe_seconds, left)
        slice_end = time.perf_counter() + (probe_slice if s.probe else left / (len(todo) - i))
        fixed = sizing.fixed(s)
        if fixed is not None:
            slice_end = clock.deadline - reserve
        try:
            _scenario_pass(caller, s, calls, seed, fixed, slice_end, clock, sizing.owns, sizing.warm)
        except AdapterFailure as failure:
            if calls.halted(s, failure):
                return
        calls.finished.add(s.name)
        tell(f"{s.name}: {calls.tallies[s.name].rows:,} rows", 0.1 + 0.8 * done[i])


def _progress(todo: list[Scenario], calls: Calls, sizing: Sizing) -> list[float]:
    """The share of the main pass done after each scenario of todo: by its expected seconds when every N is fixed
    and timed (a --tv run's N differ by 1,000x between scenarios), else by its count."""
    fixed = [sizing.fixed(s) for s in todo]
    seconds = [calls.seconds_left(s, n) if n else 0.0 for s, n in zip(todo, fixed)]
    total = sum(seconds)
    if None in fixed or total <= 0:
        return [(i + 1) / len(todo) for i in range(len(todo))]
    return [float(x) for x in np.cumsum(seconds) / total]


def _scenario_pass(caller, s: Scenario, calls: Calls, seed: int, fixed: int | None, slice_end: float, clock: Clock,
                   owns, allocated: bool = False) -> None:  # fmt: skip
    """One scenario's main pass, up to its cap (the fixed N, or the rows that buy little more) or its slice.
    allocated: its N was fixed from the warm-up; its calls are still sized by the time left (their sizes change
    nothing but how the N rows are cut into calls)."""
    tally = calls.tallies[s.name]
    cap = fixed if fixed is not None else caller.contract.max_rows(s)
    if s.joint:
        call = functools.partial(feed, caller, s, calls, seed=seed, clock=clock)
        calls_rows = functools.partial(_rows_in_time, caller, s, slice_end=slice_end)  # a batch: JOINT_TOKENS calls
        size = None if fixed is not None else lambda rows: calls_rows(rows * JOINT_TOKENS) // JOINT_TOKENS
        tally.joint = joint_counts(call, s, cap, JOINT_TOKENS, slice_end=slice_end, deadline=clock.deadline,
                                   owns=lambda batch: owns(batch + 1), size=size)  # fmt: skip
        if fixed is not None and time.perf_counter() >= slice_end:
            calls.cut[s.name] = fixed
        return
    first = calls.first_rows.get(s.name, first_call_rows(s, fixed))
    begun, planned = time.perf_counter(), first  # rows of this scenario's chunks so far, in any shard
    chunk, ahead, counted = 1, None, None  # ahead: the next chunk's inputs, built while a call runs

    def size(planned: int) -> int:
        if not (planned < cap and time.perf_counter() < slice_end):
            return 0
        rows_now = int(min(s.rows_per_call, cap - planned))
        if fixed is not None and not allocated:
            return rows_now
        # a call should end by the slice's end, at this scenario's measured rate (0: not one row fits)
        return _rows_in_time(caller, s, rows_now, slice_end)

    while True:
        rows_now, prepared = ahead or (size(planned), None)
        ahead = None
        if not rows_now:
            break
        if owns(chunk):
            call = start_feed(caller, s, calls, prepared or prepare_feed(caller, s, rows_now, chunk, seed=seed))
            if counted is not None:  # the last call's tally, while this one runs
                count_feed(caller, s, calls, *counted)
            following = size(planned + rows_now)  # the next chunk's inputs too (at the rate known so far)
            if following:
                ahead = following, prepare_feed(caller, s, following, chunk + 1, seed=seed) if owns(chunk + 1) else None
            counted = finish_feed(caller, call)
        planned += rows_now
        chunk += 1
        if s.probe and fixed is None and _probe_hopeless(caller.contract, planned, first, begun, slice_end):
            break
        if ahead is not None and time.perf_counter() >= slice_end:  # built ahead, but the slice ended meanwhile
            break
    if counted is not None:
        count_feed(caller, s, calls, *counted)
    if fixed is not None and planned < cap:
        calls.cut[s.name] = fixed


def _rows_in_time(caller: Caller, s: Scenario, rows: int, slice_end: float) -> int:
    """At most the rows CALL_SHARE of the time to slice_end buys at the scenario's slowest measured rate among its
    largest calls (HangLimits.bulk_rate: the rate of an 8-row warm-up call is mostly the verifier's fixed cost per
    call, and it cut the probe's calls to a tenth of their size). At least MIN_CALL_ROWS when they take under
    MIN_CALL_SECONDS; else 0 when not one row fits (a row at V = 151,936 takes 0.7 s under load: a floor of 64 rows
    made a 45 s call past a 60 s budget)."""
    rate = caller.limits.bulk_rate(s.name) or caller.limits.row_rate.get(s.name)
    if not rate:
        return rows
    fit = CALL_SHARE * (slice_end - time.perf_counter()) / rate
    if MIN_CALL_ROWS * rate <= MIN_CALL_SECONDS:
        fit = max(fit, MIN_CALL_ROWS)
    return int(min(rows, fit))


def _rows_for(caller: Caller, s: Scenario, rows: int, seconds: float) -> int:
    """At most the rows `seconds` buy at the scenario's expected rate (at least MIN_FIRST_ROWS); all when unknown."""
    per_row = caller.limits.expected(s.name, 1, s.row_elements)
    if not per_row or per_row * rows <= seconds:
        return rows
    return int(max(MIN_FIRST_ROWS, min(rows, seconds / per_row)))


def _reserve(caller: Caller, budget_seconds: float) -> float:
    """Time kept after the main pass for the run-level checks (reproducibility: 3 calls of 512 rows of cf_dense_g4;
    coupling: 5 of 256 small rows, each beside the reference engine) and the report, at their expected rate."""
    per_row = caller.limits.expected("cf_dense_g4", 1, 5 * 16) or 0.0
    run_rows = 3 * 512 + 2 * 5 * 256 * caller.adapter.uniforms
    coupling = COUPLING_SECONDS * caller.adapter.uniforms
    return RESERVE_SHARE * budget_seconds + REPORT_SECONDS + coupling + min(run_rows * per_row, 0.25 * budget_seconds)


def _probe_hopeless(contract, rows: int, rows_before: int, begun: float, slice_end: float) -> bool:
    """At the speed seen so far the probe cannot reach even even odds by the end of its slice: stop it, and let
    the report state the detection probability it did reach (a slow adapter keeps its budget for the laws)."""
    now = time.perf_counter()
    speed = (rows - rows_before) / max(now - begun, 1e-9)
    return rows + speed * max(slice_end - now, 0.0) < contract.probe_rows_needed(0.5)


def record(log: list, adapter, s: Scenario, rows: int, seed: int, chunk, generator_seed: int,
           start_states: np.ndarray | None = None) -> dict:  # fmt: skip
    """The provenance of one call, appended to the scenario's log."""
    where = provenance(adapter, s, rows, seed, chunk, generator_seed, start_states)
    log.append(where)
    return where


def provenance(adapter, s: Scenario, rows: int, seed: int, chunk, generator_seed: int,
               start_states: np.ndarray | None = None) -> dict:  # fmt: skip
    """The provenance of one call: what a snippet needs to rebuild and repeat it."""
    where = {"scenario": s.name, "seed": seed, "chunk": chunk, "rows": rows, "generator_seed": generator_seed,
             "dtype": str(adapter.dtype), "device": str(adapter.device)}  # fmt: skip
    if start_states is not None and not np.array_equal(start_states, np.full(rows, s.starts[0])):
        # a joint-loop call past the first: its start states came from earlier outputs (None: too many to keep)
        where["start_states"] = start_states.tolist() if rows <= MAX_RECORDED_STATES else None
    return where


def feed(caller: Caller, s: Scenario, calls: Calls, rows: int, chunk, start_states=None, *, seed: int,
         clock: Clock, warm: bool = False) -> tuple:  # fmt: skip
    """One call on chunk `chunk` of scenario s, T0-checked and counted into its tally: (batch, the emitted tokens
    [B, width], the probabilities as seen, the [B] rows that passed the rule-free T0 checks). warm: a warm-up call,
    counted into a tally of its own that is dropped (its outputs never reach a check; its time sizes the run)."""
    prepared = prepare_feed(caller, s, rows, chunk, start_states, seed=seed)
    batch, out, seen, where, seconds = finish_feed(caller, start_feed(caller, s, calls, prepared, logged=not warm))
    tally = caller.contract.tally(caller.adapter, s, seed) if warm else calls.tallies[s.name]
    good = count_feed(caller, s, calls, batch, out, seen, where, seconds, tally=tally)
    return batch, caller.contract.tokens(out), seen, good


def prepare_feed(caller: Caller, s: Scenario, rows: int, chunk, start_states=None, *, seed: int) -> tuple:
    """A call's inputs and job, built and not yet sent (feed's first step; the main pass builds the next chunk's
    while a call runs): (batch, its provenance, the prepared call)."""
    contract = caller.contract
    with caller.timings.phase("inputs"):
        batch = contract.inputs(caller.adapter, s, rows, seed, chunk, start_states)
    generator_seed = derive_seed(contract.seed_key, seed, s.name, chunk)
    where = provenance(caller.adapter, s, rows, seed, chunk, generator_seed, start_states)
    return batch, where, caller.prepare(batch, generator_seed, where=where)


def start_feed(caller: Caller, s: Scenario, calls: Calls, prepared: tuple, logged: bool = True) -> tuple:
    """Send a prepared call; its provenance joins the scenario's log (only calls made are logged; a warm-up's
    never: its outputs are not counted)."""
    batch, where, call = prepared
    if logged:
        calls.fed[s.name].append(where)
    return batch, where, caller.start(call)


def finish_feed(caller: Caller, started: tuple) -> tuple:
    """Wait for a started call: (batch, its output, the probabilities as seen, provenance, seconds)."""
    batch, where, call = started
    out, seen, seconds = caller.finish(call)
    return batch, out, seen, where, seconds


def count_feed(caller: Caller, s: Scenario, calls: Calls, batch, out, seen, where, seconds,
               tally=None) -> np.ndarray:  # fmt: skip
    """T0-check a finished call and count it into the scenario's tally (or `tally`); the [B] rows that passed."""
    tally = calls.tallies[s.name] if tally is None else tally
    with caller.timings.phase("tally"):
        good = tally.add(batch, out, seen, where)
    tally.seconds += seconds
    return good
