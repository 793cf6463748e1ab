"""Rate and mean checks: the exact binomial test for a rate (reject rate = Z) and a confidence-interval test for a
mean (tau)."""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import beta as beta_law
from scipy.stats import binomtest, norm, t

from . import bennett
from ._args import check_count, check_level, check_positive, check_rate
from .power import min_detectable_diff_binomial, min_detectable_shift_mean
from .record import CheckResult, not_tested, require


def binomial_rate(
    successes: int, trials: int, p0: float, *, alpha: float, name: str = "binomial", beta: float = 1e-3
) -> CheckResult:
    """Two-sided exact binomial test (scipy.stats.binomtest) of successes out of trials against rate p0.

    detectable_tv is the smallest |p - p0| detected with power 1 - beta, computed exactly (power.py).
    """
    trials = check_count("trials", trials, minimum=1)
    successes = check_count("successes", successes)
    if successes > trials:
        raise ValueError(f"successes={successes} exceeds trials={trials}")
    p0, alpha, beta = check_rate("p0", p0), check_level("alpha", alpha), check_level("beta", beta)
    if p0 in (0.0, 1.0):  # a rate of 0 or 1: one deviation is a certain failure, agreement tests nothing
        certain = successes == round(p0 * trials)
        details = {"successes": successes, "p0": p0, "rate": successes / trials, "distance": "|p - p0|"}
        if certain:
            return not_tested(name, "implied by T0 (p0 is 0 or 1: any deviation is a certain failure)", trials,
                              details)  # fmt: skip
        details["test"] = "certain failure: an outcome of probability 0 was observed"
        return CheckResult(name, float(successes), 1, 0.0, trials, alpha, 0.0, False, 0.0, details)
    p_value = float(binomtest(successes, trials, p0, alternative="two-sided").pvalue)
    # Clopper-Pearson (exact) 1 - alpha interval, the same as binomtest's proportion_ci(method="exact"), faster
    ci_low = float(beta_law.ppf(alpha / 2, successes, trials - successes + 1)) if successes > 0 else 0.0
    ci_high = float(beta_law.isf(alpha / 2, successes + 1, trials - successes)) if successes < trials else 1.0
    details = {
        "test": "exact two-sided binomial test (scipy.stats.binomtest)",
        "distance": "|p - p0|",
        "beta": beta,
        "successes": successes,
        "rate": successes / trials,
        "p0": p0,
        "ci_low": ci_low,
        "ci_high": ci_high,
    }
    detectable = min_detectable_diff_binomial(trials, p0, alpha, beta)
    return CheckResult(name, float(successes), 1, p_value, trials, alpha, detectable, p_value > alpha, 0.0, details)


def assert_binomial_rate(successes: int, trials: int, p0: float, *, alpha: float, **kwargs) -> CheckResult:
    """binomial_rate, raising AssertionError with a readable explanation when the check fails."""
    return require(binomial_rate(successes, trials, p0, alpha=alpha, **kwargs))


def binomial_positions(
    successes, trials, p0, *, alpha: float, name: str = "binomial_positions", beta: float = 1e-3
) -> CheckResult:
    """One exact binomial test per position i (successes[i] of trials[i] at rate p0[i]), Bonferroni over positions.

    The p-value is min(1, m * min_i p_i) over the m positions with a test (trials > 0 and 0 < p0 < 1): its size is
    <= alpha exactly (each binomtest is exact, and the union bound needs no independence). Positions at rate 0 or 1
    are certain checks: a deviation there fails with p_value 0. No position with a test: tested=False.
    detectable_tv is max_i of the exact detectable |p_i - p0_i| at level alpha / m: every position is covered.
    """
    successes = np.asarray(successes, dtype=np.int64)
    trials = np.asarray(trials, dtype=np.int64)
    p0 = np.broadcast_to(np.asarray(p0, dtype=np.float64), trials.shape)
    if successes.shape != trials.shape or successes.ndim != 1:
        raise ValueError(f"successes {successes.shape} and trials {trials.shape} must be equal 1-D shapes")
    if (successes < 0).any() or (successes > trials).any():
        raise ValueError(f"successes={successes.tolist()} must lie in 0..trials={trials.tolist()}")
    alpha, beta = check_level("alpha", alpha), check_level("beta", beta)
    for value in p0.tolist():
        check_rate("p0", value)
    positions = []
    certain_failures = []
    for i, (k, n, rate0) in enumerate(zip(successes.tolist(), trials.tolist(), p0.tolist())):
        if n == 0:
            continue
        if rate0 in (0.0, 1.0):
            if k != round(rate0 * n):
                certain_failures.append({"position": i, "successes": k, "trials": n, "p0": rate0})
            continue
        positions.append((i, k, n, rate0, float(binomtest(k, n, rate0).pvalue)))
    details: dict = {
        "test": "exact binomial test per position (scipy.stats.binomtest), Bonferroni over positions",
        "distance": "|p - p0| at any position",
        "beta": beta,
        "positions": [
            {"position": i, "successes": k, "trials": n, "p0": r, "p_value": p} for i, k, n, r, p in positions
        ],
    }
    total = int(trials.sum())
    if certain_failures:
        details["certain_failures"] = certain_failures
        return CheckResult(name, float("nan"), len(positions), 0.0, total, alpha, float("nan"), False, 0.0, details)
    if not positions:
        return not_tested(name, "implied by T0 (every rate is 0 or 1, or no trials)", total, details)
    m = len(positions)
    p_value = min(1.0, m * min(p for *_, p in positions))
    statistic = max(abs(k / n - r) for _, k, n, r, _ in positions)  # the largest rate deviation
    # power: the position with the fewest trials needs the largest deviation (binomial power grows with n)
    _, _, n_min, r_min, _ = min(positions, key=lambda entry: entry[2])
    detectable = min_detectable_diff_binomial(n_min, r_min, alpha / m, beta)
    return CheckResult(name, float(statistic), m, p_value, total, alpha, detectable, p_value > alpha, 0.0, details)


def moments(values, probs) -> tuple[float, float]:
    """(mean, variance) of a finite law: values[i] with probability probs[i]; e.g. tau = A + 1 from the length law."""
    values, probs = np.asarray(values, dtype=np.float64), np.asarray(probs, dtype=np.float64)
    if values.shape != probs.shape:
        raise ValueError(f"values has shape {values.shape} but probs has shape {probs.shape}")
    mean = float(np.dot(values, probs))
    return mean, float(np.dot((values - mean) ** 2, probs))


def _summary(samples, summary) -> tuple[int, float, float]:
    """(count, mean, sample variance with ddof=1) from samples or from summary = (count, total, total_of_squares)."""
    if (samples is None) == (summary is None):
        raise ValueError("give exactly one of samples or summary=(count, total, total_of_squares)")
    if samples is not None:
        array = np.asarray(samples, dtype=np.float64)
        if array.ndim != 1 or array.size < 2 or not np.all(np.isfinite(array)):
            raise ValueError(f"samples must be a 1-D array of >= 2 finite numbers; got shape {array.shape}")
        return int(array.size), float(array.mean()), float(array.var(ddof=1))
    count, total, total_sq = summary
    count = check_count("summary count", count, minimum=2)
    mean = total / count
    return count, float(mean), float(max(0.0, (total_sq - count * mean * mean) / (count - 1)))


def mean_ci(
    samples=None,
    *,
    expected_mean: float,
    alpha: float,
    name: str = "mean",
    summary: tuple | None = None,
    known_variance: float | None = None,
    bounds: tuple[float, float] | None = None,
    method: str | None = None,
    beta: float = 1e-3,
) -> CheckResult:
    """Test whether the mean of i.i.d. samples equals expected_mean, by a (1 - alpha) confidence interval.

    method (recorded in details["method"]):
      "z"          normal interval with the known variance (CLT; e.g. Var(tau) from the accepted-length law);
                   the default when known_variance is given;
      "t"          Student t interval with the sample variance; the default otherwise;
      "bennett"    non-asymptotic, for variables in bounds = (lo, hi) with the known variance (Bennett's
                   inequality, each tail with its own range): valid at every alpha, where the normal interval of "z"
                   is anti-conservative in the far tail of a skewed law (tau that is almost always g + 1);
      "hoeffding"  exact, non-asymptotic interval for variables in bounds = (lo, hi) (Hoeffding's inequality):
                   half-width (hi - lo) sqrt(log(2 / alpha) / (2 n)); conservative, needs no variance.
    The check fails when expected_mean lies outside the interval (p_value <= alpha). detectable_tv is the mean shift
    detected with power 1 - beta: (z_{a/2} + z_b) sigma / sqrt(n) for z and t (t with the sample sigma: a normal
    approximation that assumes the alternative's sigma is the same), (hi - lo) (sqrt(log(2/alpha)/(2n)) +
    sqrt(log(1/beta)/(2n))) for Hoeffding (valid for every law on [lo, hi]), and for Bennett the worst case over
    every law on [lo, hi] at that shift, each with its own variance and reach (bennett.py).
    """
    alpha, beta = check_level("alpha", alpha), check_level("beta", beta)
    if (
        isinstance(expected_mean, bool)
        or not isinstance(expected_mean, (int, float))
        or not math.isfinite(expected_mean)
    ):
        raise ValueError(f"expected_mean={expected_mean!r} must be a finite real number")
    n, mean, sample_variance = _summary(samples, summary)
    method = method or ("z" if known_variance is not None else "t")
    if method not in _INTERVALS:
        raise ValueError(f"method={method!r} must be 'z', 't', 'hoeffding' or 'bennett'")
    shift = mean - expected_mean
    statistic, p_value, half_width, detectable, df = _INTERVALS[method](
        n=n, shift=shift, sample_variance=sample_variance, known_variance=known_variance, bounds=bounds,
        samples=samples, expected_mean=expected_mean, alpha=alpha, beta=beta)  # fmt: skip
    details = {
        "test": f"{1 - alpha:.6g} confidence interval for the mean",
        "method": method,
        "distance": "|mean shift|",
        "beta": beta,
        "mean": mean,
        "expected_mean": float(expected_mean),
        "sample_variance": sample_variance,
        "ci_low": mean - half_width,
        "ci_high": mean + half_width,
    }
    if known_variance is not None:
        details["known_variance"] = float(known_variance)
    if method == "bennett":
        details["power_family"] = f"every law on [{bounds[0]:g}, {bounds[1]:g}], each with its own variance"
    return CheckResult(name, float(statistic), df, p_value, n, alpha, float(detectable), p_value > alpha, 0.0, details)


# --- the four intervals of mean_ci, one function each: (statistic, p_value, half_width, detectable shift, df) -------


def _z_interval(*, n, shift, known_variance, alpha, beta, **_):
    """Normal interval with the known variance (CLT)."""
    if known_variance is None:
        raise ValueError("method='z' needs known_variance")
    sigma = math.sqrt(check_positive("known_variance", known_variance))
    statistic = shift / (sigma / math.sqrt(n))
    half_width = float(norm.isf(alpha / 2) * sigma / math.sqrt(n))
    return (
        statistic,
        float(2.0 * norm.sf(abs(statistic))),
        half_width,
        min_detectable_shift_mean(n, sigma, alpha, beta),
        0,
    )


def _t_interval(*, n, shift, sample_variance, alpha, beta, **_):
    """Student t interval with the sample variance."""
    sigma = math.sqrt(sample_variance)
    if sigma == 0:
        statistic, p_value = (0.0, 1.0) if shift == 0 else (math.copysign(math.inf, shift), 0.0)
    else:
        statistic = shift / (sigma / math.sqrt(n))
        p_value = float(2.0 * t.sf(abs(statistic), n - 1))
    half_width = float(t.isf(alpha / 2, n - 1) * sigma / math.sqrt(n))
    detectable = min_detectable_shift_mean(n, sigma, alpha, beta) if sigma > 0 else 0.0
    return statistic, p_value, half_width, detectable, n - 1


def _hoeffding_interval(*, n, shift, bounds, samples, alpha, beta, **_):
    """Exact, non-asymptotic interval for variables in bounds = (lo, hi) (Hoeffding's inequality)."""
    if bounds is None:
        raise ValueError("method='hoeffding' needs bounds=(lo, hi)")
    lo, hi = (float(b) for b in bounds)
    if not hi > lo:
        raise ValueError(f"bounds={bounds!r} must satisfy lo < hi")
    if samples is not None and (np.min(samples) < lo or np.max(samples) > hi):
        raise ValueError(f"samples lie outside bounds={bounds!r}; the Hoeffding interval would not hold")
    width = hi - lo
    p_value = float(min(1.0, 2.0 * math.exp(-2.0 * n * shift * shift / (width * width))))
    half_width = width * math.sqrt(math.log(2.0 / alpha) / (2.0 * n))
    return shift, p_value, half_width, half_width + width * math.sqrt(math.log(1.0 / beta) / (2.0 * n)), 0


def _bennett_interval(*, n, shift, known_variance, bounds, expected_mean, alpha, beta, **_):
    """Non-asymptotic interval for variables in bounds with the known variance (Bennett's inequality, bennett.py)."""
    if known_variance is None or bounds is None:
        raise ValueError("method='bennett' needs known_variance and bounds=(lo, hi)")
    lo, hi = (float(b) for b in bounds)
    if not lo <= expected_mean <= hi:
        raise ValueError(f"expected_mean={expected_mean!r} lies outside bounds={bounds!r}")
    variance = check_positive("known_variance", known_variance)
    p_value = bennett.p_value(n, shift, variance, hi - expected_mean, expected_mean - lo)
    half_width = max(bennett.half_widths(n, alpha, variance, hi - expected_mean, expected_mean - lo))
    return (
        shift,
        p_value,
        half_width,
        bennett.detectable_shift(n, alpha, beta, float(expected_mean), variance, lo, hi),
        0,
    )


_INTERVALS = {"z": _z_interval, "t": _t_interval, "hoeffding": _hoeffding_interval, "bennett": _bennett_interval}


def assert_mean_ci(samples=None, *, expected_mean: float, alpha: float, **kwargs) -> CheckResult:
    return require(mean_ci(samples, expected_mean=expected_mean, alpha=alpha, **kwargs))
