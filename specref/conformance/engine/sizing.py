"""Rows by the evidence asked for: each scenario's N from what its checks must detect, fixed before its main pass.

    demands = contract.demands(adapter, scenario, plan)       # what each T2 check needs, from the scenario's laws
    rows = rows_for_tv(demands, 0.01)                         # --tv: every check detects 0.01 at power 0.999
    rows = allocate({name: (demands, seconds_per_row)}, 60)   # a budget: the rows that minimise the worst distance

A Demand says, for one T2 check, what share of a scenario's rows feeds it (the expected draws per row: 1 for the
first-token law, P(a rejection) for the correction law, P(all drafts accepted) for the bonus law), computed from the
scenario's own probabilities under the declared rule, and the distance the check detects with power 1 - beta on n
draws at its planned (Bonferroni) alpha. The draws a check really gets are random; a scenario's N is sized so that
even its count less Z_MARGIN standard deviations (stats.min_count_thinned) reaches the distance, so the detectable
distance the report states at the end is at most the one asked for, but with probability ~3e-7 per check.

The bound on a law check is the worst case of the merged chi-square (stats.power): lambda* at the check's unmerged
degrees of freedom (capped at MAX_DF, as merging caps it) and at the ladder's smallest E, both of which can only
overstate what the real check needs (its df after merging and its reference E are no larger, no smaller). Rate
checks state |p - p0| (the normal bound plus 1/n for the exact test's lattice).

Without --tv, `allocate` spends a budget across scenarios by bisection on the distance d: the smallest d whose rows
(rows_for_tv at d, per scenario) cost no more than the time there is at each scenario's measured seconds per row. The
seconds per row come from a timed warm-up call whose outputs are not counted (passes.probe_pass), so N depends on
the machine's speed but never on an outcome the checks read.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from scipy.stats import norm

from ...stats import noncentrality_for_power
from ...stats.power import min_count_thinned, min_num_samples_thinned
from ...stats.size import E_LADDER, MAX_DF

#: The checks' beta: every detectable distance is stated, and every sizing made, at power 1 - BETA (the default beta
#: of the stats tests the checks run; test_sizing_tv holds the two together).
BETA = 1e-3
#: A check's draws are sized at their mean less this many standard deviations (a shortfall: ~3e-7 per check).
Z_MARGIN = 5.0
#: The allocation's search range of distances, and the fewest rows a sized scenario gets.
SMALLEST_TV, LARGEST_TV, MIN_SIZED_ROWS = 1e-3, 1.0, 256
#: Units of the distances a check states (CheckResult.detectable_tv): TV for laws, |p - p0| for rates.
TV, RATE = "TV", "|p - p0|"


@dataclass(frozen=True)
class Demand:
    """One T2 check's need: the share of rows feeding it and its detectable distance at n draws (in `unit`)."""

    check: str  # "kind[scenario]"
    unit: str  # TV or RATE
    fraction: float  # expected draws per row of the scenario
    detectable: Callable[[float], float]  # n draws -> the distance detected with power 1 - BETA

    def at(self, rows: int) -> float:
        """The distance detected at `rows` rows of the scenario (its count at mean less Z_MARGIN sd)."""
        draws = min_count_thinned(rows, min(self.fraction, 1.0), Z_MARGIN) if self.fraction < 1 else rows
        return self.detectable(draws) if draws >= 1 else math.inf


def tv_demand(check: str, fraction: float, alpha: float, df: int, p0: float | None = None) -> Demand | None:
    """A chi-square law check over strata with `df` unmerged degrees of freedom (None: df = 0, nothing to size).
    df = 1 (two bins): the exact binomial test's |p - p0| = TV, bounded as a rate at p0 (0.5 when unknown)."""
    if df < 1 or not fraction > 0:
        return None
    if df == 1:
        return rate_demand(check, fraction, alpha, 0.5 if p0 is None else p0, unit=TV)
    lam = noncentrality_for_power(alpha, BETA, min(df, MAX_DF), E_LADDER[0])
    return Demand(check, TV, fraction, lambda n: math.sqrt(lam / (4.0 * n)))


def rate_demand(check: str, fraction: float, alpha: float, p0: float, unit: str = RATE) -> Demand | None:
    """An exact two-sided binomial test of rate p0 at level alpha: |p - p0| <= z sqrt(max variance / n) + 1/n."""
    if not (fraction > 0 and 0 < p0 < 1):
        return None
    z = float(norm.isf(alpha / 2) + norm.isf(BETA))

    def detectable(n: float) -> float:
        d = z * 0.5 / math.sqrt(n)  # a first guess, then the variance at the farther alternative
        for _ in range(3):
            spread = max([p0 * (1 - p0)] + [r * (1 - r) for r in (p0 - d, p0 + d) if 0 <= r <= 1])
            d = z * math.sqrt(spread / n) + 1.0 / n
        return d

    return Demand(check, unit, fraction, detectable)


def worst(demands: list[Demand], rows: int) -> float:
    """The largest distance the scenario's checks detect at `rows` rows (0 with no demand)."""
    return max((d.at(rows) for d in demands), default=0.0)


def rows_for_tv(demands: list[Demand], tv: float) -> int:
    """The fewest rows at which every check detects `tv` (in its own unit) at power 1 - BETA: the largest of each
    check's rows, each from stats.min_num_samples_thinned on the draws it needs (found by bisection on draws)."""
    return max([MIN_SIZED_ROWS, *(_rows_for(d, tv) for d in demands)])


@lru_cache(maxsize=1 << 16)
def _rows_for(d: Demand, tv: float) -> int:
    """One check's rows for `tv` (rows_for_tv); cached: an allocation asks for the same (check, floor) at every step
    of its bisection, and each refit asks again."""
    lo, hi = 1, 2
    while d.detectable(hi) > tv:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if d.detectable(mid) <= tv else (mid, hi)
    return hi if d.fraction >= 1 else min_num_samples_thinned(hi, d.fraction, Z_MARGIN)


@dataclass
class Allocation:
    """The allocation's outcome: the rows of each scenario, the distances they reach, and the seconds they cost."""

    rows: dict[str, int]
    law_tv: float  # the worst distance of the law checks
    tv: float  # the worst distance of every check (law and rule)
    seconds: float
    costs: dict | None = None  # name -> (law demands, all demands, seconds per row) it was allocated from


def _bisect(cost: Callable[[float], float], seconds: float) -> float | None:
    """The smallest distance in [SMALLEST_TV, LARGEST_TV] (in log) whose cost fits `seconds`; None: none fits."""
    if cost(LARGEST_TV) > seconds:
        return None
    if cost(SMALLEST_TV) <= seconds:
        return SMALLEST_TV
    lo, hi = math.log(SMALLEST_TV), math.log(LARGEST_TV)
    for _ in range(24):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if cost(math.exp(mid)) <= seconds else (mid, hi)
    return math.exp(hi)


def allocate(costs: dict[str, tuple[list[Demand], list[Demand], float]], seconds: float, floor: float) -> Allocation:
    """The rows per scenario (name -> (its law checks' demands, all its demands, seconds per row)) within `seconds`:
    first the law checks, at the smallest common distance the time buys, down to `floor` (the resolution floor);
    once they reach it, the time left goes to every check, at the smallest common distance d the time buys (each
    scenario at the larger of its law rows at the floor and its rows at d). Bisection on d (in log); a scenario with
    no demand gets MIN_SIZED_ROWS. A budget too small for even LARGEST_TV gets the rows of LARGEST_TV."""

    def rows_at(tv_law: float, tv_all: float | None) -> dict[str, int]:
        return {name: max(rows_for_tv(law, tv_law), rows_for_tv(every, tv_all) if tv_all is not None else 0)
                for name, (law, every, _) in costs.items()}  # fmt: skip

    def spend(rows: dict[str, int]) -> float:
        return sum(costs[name][2] * n for name, n in rows.items())

    if spend(rows_at(floor, None)) > seconds:  # the law checks cannot all reach the floor
        return _fewest_uninformative(costs, seconds, floor, spend)
    tv = _bisect(lambda d: spend(rows_at(floor, d)), seconds)
    rows = rows_at(floor, tv)
    return Allocation(rows, min(floor, max_worst(costs, rows, law=True)), max_worst(costs, rows), spend(rows))


def _fewest_uninformative(costs: dict, seconds: float, floor: float, spend) -> Allocation:
    """When the time cannot bring every law check to the floor: the scenarios cheapest to bring there get it (as
    many as fit, each left at no less than MIN_SIZED_ROWS), so that the fewest law checks are uninformative; the
    others share the time left at the smallest common distance it buys (so one scenario whose rows cost 0.1 s does
    not drag every other to its distance)."""
    at_floor = {name: rows_for_tv(law, floor) for name, (law, _, _) in costs.items()}
    least = {name: MIN_SIZED_ROWS * rate for name, (_, _, rate) in costs.items()}
    order = sorted(costs, key=lambda name: costs[name][2] * at_floor[name])
    reached, left = [], seconds - sum(least.values())
    for name in order:
        extra = costs[name][2] * at_floor[name] - least[name]
        if extra > left:
            break
        reached.append(name)
        left -= extra
    rest = {name: costs[name] for name in costs if name not in reached}
    budget_rest = seconds - sum(costs[name][2] * at_floor[name] for name in reached)

    def rest_rows(d: float) -> dict[str, int]:
        return {name: rows_for_tv(law, d) for name, (law, _, _) in rest.items()}

    law_tv = _bisect(lambda d: spend(rest_rows(d)), budget_rest) or LARGEST_TV
    rows = {**{name: at_floor[name] for name in reached}, **rest_rows(law_tv)}
    worst_law = max_worst(costs, rows, law=True)
    return Allocation(rows, worst_law, max(worst_law, max_worst(costs, rows)), spend(rows))


def max_worst(costs: dict, rows: dict[str, int], law: bool = False) -> float:
    """The worst distance over the scenarios' checks (law: their law checks only) at `rows`."""
    return max((worst(entry[0] if law else entry[1], rows[name]) for name, entry in costs.items()), default=0.0)


__all__ = ["Allocation", "BETA", "Demand", "allocate", "max_worst", "rate_demand", "rows_for_tv",
           "tv_demand", "worst"]  # fmt: skip
