"""A run's N per scenario, fixed before its main pass: from --tv alone, or allocated from a timed warm-up.

    rows = tv_rows(contract, adapter, plan, tv=0.01)         # before any call: the same N on every machine
    seconds = expected_seconds(plan, calls, rows)            # after the warm-up: what the run will take
    allocation = allocate_rows(contract, adapter, plan, calls, seconds=40, floor=0.1)   # a budget, no --tv

The demands come from the contract (Contract.demands: the scenario's own probabilities under the declared rule, and
the planned alphas); engine/sizing.py turns them into rows. A contract without demands (None) keeps the sizing by
time of passes.py.
"""

from __future__ import annotations

import math
import time

from ...errors import UsageError
from .plan import LAW, family_of
from .sizing import Allocation, allocate, max_worst, rows_for_tv

#: The rare-edge probe keeps at least this share of the allocated time (and at most passes.PROBE_SHARE).
PROBE_MIN_SHARE = 0.1
#: A refit allocates this share of the time left, so that a machine that slows down mid-run rarely cuts a
#: scenario short of its fixed N (a cut N would depend on the scenario's own speed).
REFIT_SHARE = 0.92
#: A refit gives a scenario rows beyond its floor only while the time left covers this many times the floor cost of
#: the scenarios after it (their cost estimates err by that much on a loaded machine).
LATER_MARGIN = 2.0


class BudgetTooSmall(UsageError):
    """--tv T with a budget that the measured speed says cannot reach T."""


def demands_of(contract, adapter, plan) -> dict[str, list] | None:
    """{scenario: its checks' demands} for every scenario but the probe, or None when the contract states none."""
    out = {}
    for s in plan.scenarios:
        if s.probe:
            continue
        d = contract.demands(adapter, s, plan.checks[s.name], plan.alphas)
        if d is None:
            return None
        out[s.name] = d
    return out


def tv_rows(contract, adapter, plan, tv: float) -> dict[str, int]:
    """The rows of every scenario at which each of its T2 checks detects `tv` (its own unit) with power 0.999; the
    rare-edge probe gets the rows of its target power (Contract.max_rows). Raises UsageError where the contract
    states no demands."""
    demands = demands_of(contract, adapter, plan)
    if demands is None:
        raise UsageError(f"tv={tv!r}: the {contract.name} contract does not size its checks by distance; use --rows "
                         "or a time budget")  # fmt: skip
    return {s.name: contract.max_rows(s) if s.probe else rows_for_tv(demands[s.name], tv) for s in plan.scenarios}


def expected_seconds(plan, calls, rows: dict[str, int]) -> float:
    """The seconds the main pass should take at the warm-up's measured speed (rows already run are not counted)."""
    return sum(calls.seconds_left(s, rows[s.name]) for s in plan.scenarios
               if s.name in rows and s.name not in calls.broken)  # fmt: skip


def check_budget(tv: float, plan, calls, rows: dict[str, int], left: float) -> float:
    """The expected seconds of a --tv run's main pass; raises BudgetTooSmall when they exceed `left`."""
    need = expected_seconds(plan, calls, rows)
    if math.isfinite(left) and need > left:
        raise BudgetTooSmall(
            f"tv={tv:g}: the rows that detect TV {tv:g} in every check ({sum(rows.values()):,} in all) take about "
            f"{need:.0f} s at this machine's measured speed, and the budget leaves {left:.0f} s: raise the budget by "
            f"at least {need - left:.0f} s, give none (the run then takes what it needs), or ask for a larger tv"
        )
    return need


def allocate_rows(contract, adapter, plan, calls, seconds: float, floor: float,
                  probe_share: float) -> tuple[Allocation | None, float | None]:  # fmt: skip
    """(the allocation of `seconds` over the scenarios, the rare-edge probe's seconds): the law checks first, down to
    the resolution floor, then every check (sizing.allocate). The probe gets probe_share of the time at most, and
    less when the law checks need it, but never below PROBE_MIN_SHARE. (None, None): the contract states no
    demands (the run keeps passes.py's sizing by time)."""
    demands = demands_of(contract, adapter, plan)
    if demands is None:
        return None, None
    live = [s for s in plan.scenarios if s.name not in calls.broken]
    costs = {s.name: ([d for d in demands[s.name] if family_of(d.check.partition("[")[0]) == LAW], demands[s.name],
                      calls.per_row(s)) for s in live if not s.probe}  # fmt: skip
    probe = next((s for s in live if s.probe), None)
    probe_seconds = None
    if probe is not None:
        floor_cost = sum(c[2] * rows_for_tv(c[0], floor) for c in costs.values())
        wanted = calls.per_row(probe) * contract.max_rows(probe)
        probe_seconds = min(wanted, max(PROBE_MIN_SHARE * seconds, min(probe_share * seconds, seconds - floor_cost)))
        seconds -= probe_seconds
    allocation = allocate(costs, max(seconds, 0.0), floor)
    allocation.law_tv = min(allocation.law_tv, max_worst(costs, allocation.rows, law=True))
    allocation.costs = costs
    return allocation, probe_seconds


class Refit:
    """Before each scenario's main pass, its N from the time left (sizing.before): the allocation of the time left
    over the scenarios not yet run, at their warm-up costs scaled by the load seen so far (the main pass's seconds
    over the warm-up's estimate, from 0.5 to 4x). A scenario's N then depends on the speed of the calls before it,
    never on its own outputs."""

    def __init__(self, allocation: Allocation, costs: dict, clock, reserve: float, floor: float, rows: dict):
        self.costs, self.clock, self.reserve, self.floor, self.rows = costs, clock, reserve, floor, rows
        self.spent = self.expected = 0.0
        self.current: tuple[str, float, float] | None = None  # (scenario, started, its expected seconds)
        self.allocation = allocation

    def __call__(self, s, todo: list) -> None:
        now = time.perf_counter()
        if self.current is not None:
            _, started, expected = self.current
            self.spent, self.expected = self.spent + now - started, self.expected + expected
        self.current = None
        if s.name not in self.costs:
            return
        load = min(4.0, max(0.5, self.spent / self.expected)) if self.expected > 0.5 else 1.0
        left = {t.name: self.costs[t.name] for t in todo if t.name in self.costs}
        scaled = {name: (law, every, rate * load) for name, (law, every, rate) in left.items()}
        seconds = REFIT_SHARE * max(0.0, self.clock.left() - self.reserve)
        allocation = allocate(scaled, seconds, self.floor)
        law, _, rate = scaled[s.name]
        at_floor = rows_for_tv(law, self.floor)
        rows = allocation.rows[s.name]
        if rows > at_floor:  # beyond its floor, s takes only what leaves LATER_MARGIN x the later ones' floor cost
            later = sum(r * rows_for_tv(lw, self.floor) for name, (lw, _, r) in scaled.items() if name != s.name)
            rows = max(at_floor, min(rows, int((seconds - LATER_MARGIN * later) / max(rate, 1e-12))))
        self.rows[s.name] = rows
        self.current = (s.name, now, self.costs[s.name][2] * rows)


__all__ = ["PROBE_MIN_SHARE", "REFIT_SHARE", "BudgetTooSmall", "Refit", "allocate_rows", "check_budget", "demands_of",
           "expected_seconds", "tv_rows"]  # fmt: skip
