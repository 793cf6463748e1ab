"""T1: the power statements hold exactly on the cases they were found wrong on (issue 20 item 4).

The Bennett test of a mean (stats.mean_ci, method "bennett"; the mean_tau check's until tau became a derived number,
chain/tau.py) states the mean shift it detects with probability 0.999. That shift used to be computed with the
null's variance; under the alternative the variance is the alternative's own. Here the power is computed from
the exact law of the sum of tau under the alternative (an n-fold convolution), nothing is simulated.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from specref.conformance.chain import laws
from specref.conformance.chain.scenarios import SCENARIOS, context_free
from specref.stats import bennett, mean_ci

pytestmark = pytest.mark.exact

N, ALPHA, BETA = 2048, 1.4e-5, 1e-3  # cf_near_equal_g4's full-draft rows and per-check alpha in a default run


# cf_near_equal_g4 as it was when issue 20 measured the case (commit 175a4d4); the scenario catalogue now draws each
# scenario from a stream of its own, so today's cf_near_equal_g4 has other rows. The case is kept as it was found.
TARGET_ROW = [0.00477598081136254, 0.10067391783819686, 0.00222172739981275, 0.01258382193516142,
              0.03227289401671878, 0.01692959460839514, 0.00446158586599486, 0.7529679663230658,
              0.02375089122560524, 0.01896063331038226, 0.02781973051426339, 0.00258125615104103]  # fmt: skip
DRAFT_ROW = [0.00477092927548635, 0.10063661026855744, 0.00222263543143058, 0.0125877008760157,
             0.03223635605778058, 0.01694504317928769, 0.00445836372969143, 0.7529684921772032,
             0.02377326215212294, 0.01895800913481762, 0.02785995289612591, 0.00258264482148054]  # fmt: skip


def _null(sc=None):
    """(law of A, tau, mu0, Var tau) on full-draft rows; sc defaults to the issue's case."""
    if sc is None:
        sc = context_free("cf_near_equal_g4", "the case of issue 20", np.array(TARGET_ROW), np.array(DRAFT_ROW), 4)
    law = laws.length_law(sc, 0, sc.gamma, "exact")  # [g + 1]: P(A = a) on full-draft rows; tau = A + 1
    tau = np.arange(1, sc.gamma + 2)
    mu0 = float(law @ tau)
    return law, tau, mu0, float(law @ (tau - mu0) ** 2)


def _stated(mu0: float, variance: float) -> float:
    summary = (N, N * mu0, N * (variance + mu0 * mu0))
    return mean_ci(summary=summary, expected_mean=mu0, alpha=ALPHA, known_variance=variance, bounds=(1, 5),
                   method="bennett").detectable_tv  # fmt: skip


def _sum_law(law: np.ndarray, n: int) -> np.ndarray:
    """Exact law of the sum of n i.i.d. draws of a law on 0..K (repeated squaring of the convolution)."""
    out, power = np.ones(1), law.copy()
    while n:
        if n & 1:
            out = np.convolve(out, power)
        power, n = np.convolve(power, power), n >> 1
    return out


def _exact_power(alternative: np.ndarray, tau: np.ndarray, mu0: float, variance: float) -> float:
    """P(the check rejects) when tau ~ alternative: the check's own decision at every value of the sum."""
    sums = _sum_law(alternative, N)  # [4 N + 1]: P(sum of (tau - 1) = s)
    shifts = (np.arange(sums.size) + N) / N - mu0
    up, down = float(tau[-1] - mu0), float(mu0 - tau[0])
    rejects = np.array([bennett.p_value(N, s, variance, up, down) <= ALPHA for s in shifts.tolist()])
    return float(sums[rejects].sum())


def _extra_rejection(law: np.ndarray, shift: float, mu0: float) -> np.ndarray:
    """An extra rejection at position 1 with the probability that moves the mean by -shift: tau = 1 w.p. eps."""
    eps = shift / (mu0 - 1.0)
    out = (1.0 - eps) * law
    out[0] += eps
    return out


def test_mean_tau_power_before_and_after():
    law, tau, mu0, variance = _null()
    up, down = float(tau[-1] - mu0), float(mu0 - tau[0])
    # before: the null's variance for the alternative too (the interval plus the same interval at 2 beta)
    before = max(bennett.half_widths(N, ALPHA, variance, up, down)) + max(
        bennett.half_widths(N, 2 * BETA, variance, up, down)
    )
    assert before == pytest.approx(0.0187, abs=5e-5)
    assert before / (mu0 - 1) == pytest.approx(0.0047, abs=5e-5)  # the extra rejection's probability
    assert _exact_power(_extra_rejection(law, before, mu0), tau, mu0, variance) == pytest.approx(0.884, abs=1e-3)
    # after: the check states a larger shift, and the same alternative at that shift has power >= 0.999
    after = _stated(mu0, variance)
    assert after == pytest.approx(0.0389, abs=5e-4)
    assert _exact_power(_extra_rejection(law, after, mu0), tau, mu0, variance) >= 1 - BETA
    # and at every larger shift of that kind
    for shift in np.linspace(after, 0.5, 12)[1:].tolist():
        assert _exact_power(_extra_rejection(law, shift, mu0), tau, mu0, variance) >= 1 - BETA, shift


def test_mean_tau_power_on_the_scenario_as_the_catalogue_gives_it():
    law, tau, mu0, variance = _null(SCENARIOS["cf_near_equal_g4"])
    stated = _stated(mu0, variance)
    assert _exact_power(_extra_rejection(law, stated, mu0), tau, mu0, variance) >= 1 - BETA


def test_the_power_bound_grows_with_the_variance_and_bounds_the_two_point_law():
    """variance_tail_bound at the largest variance covers every law of the family (it is increasing in v), and it
    bounds the exact tail of the two-point law it is the Chernoff bound of."""
    n, reach, shift = 300, 0.5, 0.05
    bounds = [bennett.variance_tail_bound(n, shift, v, reach) for v in np.linspace(1e-3, 2.0, 200).tolist()]
    assert (np.diff(bounds) >= 0).all()
    for v in (0.01, 0.1, 1.0):
        q = v / (reach * reach + v)  # the two-point law: +reach w.p. q, -v / reach w.p. 1 - q
        k = np.arange(n + 1)
        means = (k * reach - (n - k) * v / reach) / n
        exact = binom.pmf(k[means >= shift - 1e-12], n, q).sum()
        assert exact <= bennett.variance_tail_bound(n, shift, v, reach) <= bennett.tail_bound(n, shift, v, reach)


def test_mean_tau_power_holds_on_the_worst_law_of_the_family():
    """The family is every law of tau on [1, g + 1]; its worst case at a mean mu1 is the law on {1, g + 1} (the
    largest variance). Its sum is binomial: exact power >= 0.999 at the stated shift on the side that has room."""
    law, tau, mu0, variance = _null()
    stated = bennett.detectable_shift(N, ALPHA, BETA, mu0, variance, 1.0, 5.0)
    up, down = float(tau[-1] - mu0), float(mu0 - tau[0])
    for shift in np.linspace(stated, 1.0, 8).tolist():
        ones = (5.0 - (mu0 - shift)) / 4.0  # P(tau = 1) of the two-point law with mean mu0 - shift
        k = np.arange(N + 1)  # rows with tau = 1
        shifts = (5.0 * N - 4.0 * k) / N - mu0
        rejects = np.array([bennett.p_value(N, s, variance, up, down) <= ALPHA for s in shifts.tolist()])
        assert binom.pmf(k[rejects], N, ones).sum() >= 1 - BETA, shift
    # the upward side has no room (mu0 is 8.5e-4 below g + 1): the statement covers it vacuously
    assert stated > 0 and up < stated


@pytest.mark.parametrize(("mu0", "variance", "lo", "hi"), [(3.0, 0.5, 1.0, 5.0), (1.5, 0.2, 1.0, 2.0)])
def test_bennett_detectable_shift_is_covered_by_the_two_point_laws(mu0, variance, lo, hi):
    """Away from the end of the range both sides count; each side's two-point law at the stated shift is detected."""
    n, alpha = 500, 1e-5
    stated = bennett.detectable_shift(n, alpha, BETA, mu0, variance, lo, hi)
    up, down = hi - mu0, mu0 - lo
    k = np.arange(n + 1)  # draws at hi
    means = lo + (hi - lo) * k / n
    rejects = np.array([bennett.p_value(n, m - mu0, variance, up, down) <= alpha for m in means.tolist()])
    for sign in (+1, -1):
        mu1 = mu0 + sign * stated
        if lo <= mu1 <= hi:
            assert binom.pmf(k[rejects], n, (mu1 - lo) / (hi - lo)).sum() >= 1 - BETA


def test_miss_bound_survives_rounding_at_the_end_of_the_range():
    """The scan's last shift, h + (reach - h) * 1.0, can land a hair past lo (found by the calibration smoke test)."""
    mu0, h = 5.986049678946055, 0.49041766938811504
    shift = -(h + (mu0 - 1.0 - h) * 1.0)
    assert mu0 + shift < 1.0
    assert bennett.miss_bound(2048, mu0, shift, h, 1.0, 6.0) == 0.0  # a point mass at lo: never missed
    assert 0 < bennett.detectable_shift(2048, 1e-5, BETA, mu0, 0.5, 1.0, 6.0) < 1
    with pytest.raises(ValueError, match="shift="):
        bennett.miss_bound(2048, mu0, -5.5, h, 1.0, 6.0)
