"""Where a run's time goes: specref's own phases against the verifier's calls, in wall and CPU seconds.

    timings = Timings()
    with timings.phase("inputs"): batch = ...          # nested phases count in the innermost only
    timings.verifier(seconds)                          # each call's seconds inside the adapter (calls.Caller)
    report.timings = timings.record(wall_seconds)      # report.json "timings"

Phases: plan (scenarios, checks, alpha split), inputs (a call's batch and the job sent to the worker), call (the
parent's time sending a call and blocked on its output, less the verifier's seconds), tally (T0 checks and counts),
run_checks (reproducibility, coupling beside the reference engine), edge_probe, checks (every T2 and T0 record,
Holm, the verdict), other (the rest of the wall time: sizing, progress, a machine too loaded to run us). The
verifier's own seconds are measured inside the worker around verify alone. The main pass overlaps calls
(passes.py): the last call's tally and the next call's inputs run while a call runs, so phases overlap the
verifier's seconds. The figures to read: `outside_verifier_share` (1 - verifier / wall) and `outside_calls_share`
(1 - the calls' time in flight / wall: when no call was running). Phase CPU seconds (this process only) are what
specref spent whatever the machine's load; verifier_cpu_seconds is the CPU of the process the adapter ran in, during
its calls (the worker; in inline and thread modes this process's phases include it).
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field

PHASES = ("plan", "inputs", "call", "tally", "run_checks", "edge_probe", "checks")


@dataclass
class Timings:
    wall: dict[str, float] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    verifier_seconds: float = 0.0
    verifier_cpu_seconds: float = 0.0  # the CPU of the process the adapter ran in, during its calls
    verifier_calls: int = 0
    in_flight_seconds: float = 0.0  # from each call's start (its job sent) to its output back: the calls' wall time
    _open: list = field(default_factory=list)

    @contextlib.contextmanager
    def phase(self, name: str):
        """Time a phase; a phase opened inside another is taken out of the outer one."""
        wall, cpu = time.perf_counter(), time.process_time()
        self._open.append([0.0, 0.0])  # the inner phases' time, to take out of this one
        try:
            yield
        finally:
            inner = self._open.pop()
            spent = time.perf_counter() - wall, time.process_time() - cpu
            self.wall[name] = self.wall.get(name, 0.0) + spent[0] - inner[0]
            self.cpu[name] = self.cpu.get(name, 0.0) + spent[1] - inner[1]
            if self._open:
                self._open[-1][0] += spent[0]
                self._open[-1][1] += spent[1]

    def verifier(self, seconds: float, cpu: float = 0.0, in_flight: float = 0.0) -> None:
        self.verifier_seconds += seconds
        self.verifier_cpu_seconds += cpu
        self.in_flight_seconds += max(in_flight, seconds)
        self.verifier_calls += 1

    def record(self, wall_seconds: float) -> dict:
        """report.json's "timings": seconds per phase (wall, and this process's CPU), the verifier's seconds, and
        the share of the run's wall time outside the verifier's calls."""
        spent = {name: self.wall.get(name, 0.0) for name in PHASES}
        other = max(wall_seconds - sum(spent.values()), 0.0)  # "call" holds the verifier's seconds
        spent["call"] = max(spent["call"] - self.verifier_seconds, 0.0)  # the round trips outside the adapter
        wall = {name: round(seconds, 3) for name, seconds in {**spent, "other": other}.items()}
        return {
            "wall_seconds": round(wall_seconds, 3),
            "verifier_seconds": round(self.verifier_seconds, 3),
            "verifier_cpu_seconds": round(self.verifier_cpu_seconds, 3),
            "verifier_calls": self.verifier_calls,
            "in_flight_seconds": round(self.in_flight_seconds, 3),
            "outside_verifier_share": round(1 - self.verifier_seconds / wall_seconds, 4) if wall_seconds else None,
            "outside_calls_share": round(1 - self.in_flight_seconds / wall_seconds, 4) if wall_seconds else None,
            "phases_wall_seconds": wall,
            "phases_cpu_seconds": {name: round(self.cpu.get(name, 0.0), 3) for name in PHASES},
        }


__all__ = ["PHASES", "Timings"]
