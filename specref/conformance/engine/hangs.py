"""When a call that has not answered is declared hung: from the rate of its own scenario, within a run's ceiling.

    limits = HangLimits(budget_seconds=60, floor=30)
    limit = limits.limit("cf_dense_g4", rows=4096, elements=5 * 16)   # before the call
    limits.record("cf_dense_g4", rows=4096, elements=5 * 16, seconds=0.8)   # after it answered

A call of a scenario that has answered before should take rows x that scenario's slowest seconds per row; it is
hung past SLACK times that, but never before `floor` seconds (a loaded machine, a cold cache). A scenario's first call
has no rate of its own: its cost per row is bounded from each measured scenario, whose rows cost no less when they
hold more probabilities ((g+1) x V of them: the same rate when it holds no more, the rate scaled by the ratio when
it holds more), and the tightest bound is taken. That guess is capped at the run's ceiling, twice the budget (at
least twice the floor), so one slow scenario never gives another a limit of hours. The first call of a run, with
nothing measured, gets the ceiling. No call is cut below OWN_SLACK times its expected time, ceiling or not: a slow
verifier that answers (a row loop at V = 151,936, 1.8 s a row for the reference engine at load 18) is slow, not hung.
With no budget (fixed rows, no time cap) the ceiling is UNBUDGETED_FLOORS x the floor.
"""

from __future__ import annotations

import math

#: A call is hung past this many times its expected duration (capped at the run's ceiling).
SLACK = 10.0
#: ... and never before this many times its expected duration, ceiling or not.
OWN_SLACK = 4.0
#: The ceiling of a run with a budget: this many times the budget (at least twice the floor).
CEILING_BUDGETS = 2.0
#: The ceiling of a run without a budget, in floors.
UNBUDGETED_FLOORS = 10.0


class HangLimits:
    """The hang limit of every call of one run (module docstring)."""

    def __init__(self, budget_seconds: float | None, floor: float):
        self.floor = float(floor)
        if budget_seconds is None or math.isinf(budget_seconds):
            self.ceiling = UNBUDGETED_FLOORS * self.floor
        else:
            self.ceiling = max(2 * self.floor, CEILING_BUDGETS * budget_seconds)
        self.row_rate: dict[str, float] = {}  # scenario -> the slowest seconds per row of its calls
        #: scenario -> (rows, seconds per row) of its largest calls: the slowest of those with at least half the
        #: largest call's rows (a call of 8 rows costs its verifier's fixed cost per call / 8 a row)
        self.bulk: dict[str, tuple[int, float]] = {}
        self.elements: dict[str, int] = {}  # scenario -> probabilities per row, (g+1) x V

    @property
    def slowest_row(self) -> float:
        """The slowest seconds per row of any scenario so far (0 before any call answered)."""
        return max(self.row_rate.values(), default=0.0)

    def expected(self, key: str, rows: int, elements: int) -> float | None:
        """Seconds a call should take: from its own scenario's rate, else bounded from the others'; None: no data."""
        if key in self.row_rate:
            return rows * self.row_rate[key]
        if not self.row_rate:
            return None
        return rows * min(rate * max(1.0, elements / self.elements[k]) for k, rate in self.row_rate.items())

    def limit(self, key: str, rows: int, elements: int) -> float:
        """Seconds the call may go without a result before it is declared hung."""
        expected = self.expected(key, rows, elements)
        if expected is None:
            return self.ceiling
        return max(self.floor, min(self.ceiling, SLACK * expected), OWN_SLACK * expected)

    def record(self, key: str, rows: int, elements: int, seconds: float) -> None:
        """A call that answered: its rate joins its scenario's and the fitted ones."""
        rate = seconds / max(rows, 1)
        self.row_rate[key] = max(self.row_rate.get(key, 0.0), rate)
        self.elements[key] = max(int(elements), 1)
        largest, slowest = self.bulk.get(key, (0, 0.0))
        if rows > largest:
            self.bulk[key] = (rows, rate if rows >= 2 * largest else max(rate, slowest))
        elif 2 * rows >= largest:
            self.bulk[key] = (largest, max(rate, slowest))

    def bulk_rate(self, key: str) -> float | None:
        """Seconds per row of the scenario's largest calls (bulk): what a call of the main pass's size costs a row."""
        return self.bulk[key][1] if key in self.bulk else None


__all__ = ["HangLimits", "SLACK", "OWN_SLACK", "CEILING_BUDGETS", "UNBUDGETED_FLOORS"]
