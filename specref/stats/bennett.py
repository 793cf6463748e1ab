"""Bennett's inequality for a mean of bounded variables: the p-value, the interval, and an honest power statement.

Size. For i.i.d. X with X - mu <= b and Var X = v, P(mean - mu >= t) <= exp(-n v / b^2 h(b t / v)),
h(u) = (1 + u) log(1 + u) - u (Bennett 1962); each side uses its own reach (b = hi - mu up, mu - lo down), and the
two-sided test spends alpha / 2 per side. The null's v and reach give the interval: valid at every alpha.

Power. Under an alternative the mean is mu1 != mu0 and the variance is the alternative's own, not the null's: a
verifier that rejects one extra draft in 200 at position 1 on a scenario where tau is almost always g + 1 multiplies
the variance of tau by 4. The statement is worst case over the family of every law on [lo, hi] (for mean_tau: every
law of tau on [1, g + 1], whatever the verifier does) whose mean is at least d from mu0: the test misses an
alternative of mean mu1 = mu0 - d only if the mean stays above mu0 - h_down, a deviation of d - h_down above mu1.
That probability is bounded with the alternative's reach hi - mu1 and its variance, which is at most
(mu1 - lo)(hi - mu1) (a law on {lo, hi}), by Hoeffding's (1963) Theorem 3, of which Bennett's inequality is a
relaxation (same assumptions, a sharper bound: on the issue's cf_near_equal_g4 law it states 0.039, Bennett 0.047).
The bound grows with the variance, so the law on {lo, hi} is the worst case. The detectable shift is the smallest
d beyond which that bound stays <= beta on both sides. A side whose reach is shorter than the shift it
would need (mu0 near an end of the range) is covered vacuously: no alternative lies that far out there.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

#: The grid over which the worst-case miss bound is scanned for the last shift above beta (it need not be monotone).
SCAN_POINTS = 400


def tail_bound(n: int, shift: float, variance: float, reach: float) -> float:
    """Bennett: P(mean - mu >= shift) <= exp(-n v / b^2 h(b shift / v)) for i.i.d. variables with X - mu <= b
    (= reach) and variance v."""
    if shift <= 0:
        return 1.0
    if reach <= 0 or variance <= 0:
        return 0.0  # the mean cannot move that way at all (or the law is a point)
    u = reach * shift / variance
    return math.exp(-n * variance / reach**2 * ((1 + u) * math.log1p(u) - u))


def variance_tail_bound(n: int, shift: float, variance: float, reach: float) -> float:
    """Hoeffding (1963, Theorem 3), the bound Bennett's relaxes. For independent X with X - mu <= b (= reach) and
    mean variance v, with r = b t / v and s = 1 - t / b:
        P(mean - mu >= t) <= ((1 + r)^(-(1 + r) v / (b^2 + v)) * s^(-s b^2 / (b^2 + v)))^n,
    the Chernoff bound of the two-point law with that reach and variance. It grows with v."""
    if shift <= 0:
        return 1.0
    if reach <= 0 or variance <= 0 or shift > reach:
        return 0.0  # the mean cannot move that far that way (or the law is a point)
    r, rest, scale = reach * shift / variance, 1.0 - shift / reach, reach * reach + variance
    exponent = -(1 + r) * variance / scale * math.log1p(r)
    if rest > 0:
        exponent -= rest * reach * reach / scale * math.log(rest)
    return math.exp(n * exponent)


def p_value(n: int, shift: float, variance: float, up: float, down: float) -> float:
    """Two-sided p-value: the bound of the observed side doubled (each side at alpha / 2)."""
    tail = tail_bound(n, shift, variance, up) if shift >= 0 else tail_bound(n, -shift, variance, down)
    return float(min(1.0, 2.0 * tail))


def half_widths(n: int, alpha: float, variance: float, up: float, down: float) -> tuple[float, float]:
    """(h_up, h_down): the shift each side needs for its bound to reach alpha / 2; the reach when it never does
    (then nothing on that side is rejected below it), 0 for a side with no reach."""
    widths = []
    for reach in (up, down):
        if reach <= 0:
            widths.append(0.0)
        elif tail_bound(n, reach, variance, reach) > alpha / 2:
            widths.append(reach)
        else:
            widths.append(brentq(lambda d, r=reach: tail_bound(n, d, variance, r) - alpha / 2, 1e-300, reach))
    return widths[0], widths[1]


def miss_bound(n: int, mu0: float, shift: float, half_width: float, lo: float, hi: float) -> float:
    """Worst-case probability, over every law on [lo, hi] with mean mu0 + shift, that the test's interval on that
    side (half-width half_width) is not crossed: Hoeffding's Theorem 3 with the alternative's reach and its largest
    variance."""
    mu1 = mu0 + shift
    slack = 1e-9 * (hi - lo)  # mu0 + (lo - mu0) need not round back to lo
    if not lo - slack <= mu1 <= hi + slack:
        raise ValueError(f"shift={shift!r} takes the mean {mu1!r} outside [lo, hi] = [{lo!r}, {hi!r}]")
    mu1 = min(max(mu1, lo), hi)
    gap = abs(shift) - half_width  # how far the mean must stay back towards mu0 for a miss
    if gap <= 0:
        return 1.0
    variance = (mu1 - lo) * (hi - mu1)
    reach = (hi - mu1) if shift < 0 else (mu1 - lo)  # a miss moves the mean back towards mu0
    return variance_tail_bound(n, gap, variance, reach)


def _miss_bounds(n: int, mu0: float, shifts: np.ndarray, half_width: float, lo: float, hi: float) -> np.ndarray:
    """miss_bound at every shift of one sign (the scan of detectable_shift), the same arithmetic on arrays."""
    mu1 = mu0 + shifts
    slack = 1e-9 * (hi - lo)
    if not ((lo - slack <= mu1) & (mu1 <= hi + slack)).all():
        raise ValueError(f"shifts up to {shifts[-1]!r} take the mean outside [lo, hi] = [{lo!r}, {hi!r}]")
    mu1 = np.minimum(np.maximum(mu1, lo), hi)
    gap = np.abs(shifts) - half_width
    variance = (mu1 - lo) * (hi - mu1)
    reach = (hi - mu1) if shifts[0] < 0 else (mu1 - lo)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        r, rest, scale = reach * gap / variance, 1.0 - gap / reach, reach * reach + variance
        exponent = -(1 + r) * variance / scale * np.log1p(r)
        exponent = np.where(rest > 0, exponent - rest * reach * reach / scale * np.log(np.where(rest > 0, rest, 1.0)),
                            exponent)  # fmt: skip
        bound = np.exp(n * exponent)
    bound = np.where((reach <= 0) | (variance <= 0) | (gap > reach), 0.0, bound)  # variance_tail_bound's 0 cases
    return np.where(gap <= 0, 1.0, bound)


def detectable_shift(n: int, alpha: float, beta: float, mu0: float, variance: float, lo: float, hi: float) -> float:
    """Smallest d such that every law on [lo, hi] whose mean is >= d from mu0 fails the two-sided Bennett test at
    level alpha (null variance `variance`) with probability >= 1 - beta (module doc); inf if no shift is covered."""
    h_up, h_down = half_widths(n, alpha, variance, hi - mu0, mu0 - lo)
    sides = []
    for sign, h, reach in ((+1, h_up, hi - mu0), (-1, h_down, mu0 - lo)):
        if reach <= h:
            sides.append((math.inf, reach))  # the test never rejects on this side
            continue
        shifts = h + (reach - h) * np.linspace(0.0, 1.0, SCAN_POINTS + 1)[1:]
        above = np.flatnonzero(_miss_bounds(n, mu0, sign * shifts, h, lo, hi) > beta)
        if not above.size:
            sides.append((h, reach))
        elif above[-1] == len(shifts) - 1:
            sides.append((math.inf, reach))
        else:
            i = int(above[-1])
            sides.append((brentq(lambda d, s=sign, hw=h: miss_bound(n, mu0, s * d, hw, lo, hi) - beta,
                                 float(shifts[i]), float(shifts[i + 1])), reach))  # fmt: skip
    if all(math.isinf(d) for d, _ in sides):
        return math.inf
    # a side with no power is covered vacuously beyond its reach (no mean lies farther out on that side)
    return max(math.nextafter(reach, math.inf) if math.isinf(d) else d for d, reach in sides)
