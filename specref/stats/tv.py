"""The total variation of an observed law from a known one, with a confidence interval that may reach 0.

Counts n [K] of N draws from an unknown law pi; the reference law p [K] is known exactly (the target's). The plug-in
TV(pi_hat, p) = 1/2 sum |n/N - p| is biased upward: at pi = p its mean is about sqrt(K / (2 pi N)) summed over
the cells' spreads (cf_equal_g8's 0.0114 at pi = p), so it never reads 0.

  interval  simultaneous Clopper-Pearson intervals [lo_k, hi_k] for every pi_k at alpha / K each (Bonferroni), so
            that with probability >= 1 - alpha every pi_k lies in its interval; then TV(pi, p) lies in
              [max(1/2 sum_k dist(p_k, [lo_k, hi_k]), sum_k (lo_k - p_k)_+, sum_k (p_k - hi_k)_+),
               min(1/2 sum_k max|[lo_k, hi_k] - p_k|, sum_k (hi_k - p_k)_+, sum_k (p_k - lo_k)_+)]
            (TV = sum (pi - p)_+ = sum (p - pi)_+ as both sum to 1). Its coverage is >= 1 - alpha for every pi and
            N; the lower end is 0 whenever every cell's interval holds p_k.
  estimate  where the interval shows a loss (its lower end > 0): the plug-in corrected by a multinomial bootstrap
            (B resamples of N draws from pi_hat), 2 TV(pi_hat, p) - mean_b TV(pi_b, p); where it does not (lower
            end 0): the plug-in less `null_bias`, its mean at pi = p for the same N (B multinomial draws from p), the
            noise floor a plug-in reading stands on. Either is clipped into the interval. At pi = p it is about 0
            instead of the plug-in's bias, also where K >> N (there the plug-in reads near 1 whatever pi is);
            where TV is large against the noise the correction vanishes. No estimate that is >= 0 can be unbiased
            at TV = 0: read the interval's lower end for "is there a loss".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy.stats import beta as beta_law

#: Bootstrap resamples for the bias correction.
RESAMPLES = 400
MIN_RESAMPLES = 20


@dataclass(frozen=True)
class TVEstimate:
    estimate: float  # bias-corrected (module docstring)
    low: float  # the interval at 1 - alpha
    high: float
    plug_in: float  # 1/2 sum |n/N - p|, upward-biased
    null_bias: float  # the plug-in's mean at pi = p for this N: its bias where the true TV is 0
    alpha: float
    draws: int

    def to_dict(self) -> dict:
        return asdict(self)

    def words(self) -> str:
        return f"{self.estimate:.4f} [{self.low:.4f}, {self.high:.4f}]"


def clopper_pearson(counts: np.ndarray, total: int, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Two-sided exact binomial intervals [lo, hi] at level 1 - alpha for each count of `total` draws."""
    counts = np.asarray(counts, float)
    lo = np.where(counts > 0, beta_law.ppf(alpha / 2, counts, total - counts + 1), 0.0)
    hi = np.where(counts < total, beta_law.ppf(1 - alpha / 2, counts + 1, total - counts), 1.0)
    return np.nan_to_num(lo, nan=0.0), np.nan_to_num(hi, nan=1.0)


def _mean_tv(rng: np.random.Generator, total: int, law: np.ndarray, p: np.ndarray) -> float:
    """The mean over multinomial draws of `total` from `law` of their TV from p: RESAMPLES draws, fewer (down to
    MIN_RESAMPLES) where K is large, so that at most ~4 M entries are drawn (a 151,936-token vocabulary: 26 draws,
    each one TV of many cells, so their mean still varies little)."""
    resamples = max(MIN_RESAMPLES, min(RESAMPLES, 4_000_000 // len(p)))
    tvs = []
    for start in range(0, resamples, 100):
        draws = rng.multinomial(total, law, size=min(100, resamples - start)) / total  # [b, K]
        tvs.append(0.5 * np.abs(draws - p).sum(1))
    return float(np.concatenate(tvs).mean())


def tv_interval(counts, reference, alpha: float, seed: int = 0) -> TVEstimate:
    """TV(pi, reference) from counts of draws from pi, with its interval at 1 - alpha (module docstring)."""
    counts = np.asarray(counts, np.int64)
    p = np.asarray(reference, float)
    p = p / p.sum()
    total = int(counts.sum())
    if total == 0:
        raise ValueError("counts sums to 0: no draws to estimate a TV from")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha={alpha!r} must lie in (0, 1)")
    cells = np.flatnonzero((counts > 0) | (p > 0))  # a cell with p = 0 and no draw bounds nothing
    n, p = counts[cells], p[cells]
    lo, hi = clopper_pearson(n, total, alpha / len(cells))
    below, above = np.clip(lo - p, 0, None), np.clip(p - hi, 0, None)
    low = max(0.5 * float((below + above).sum()), float(below.sum()), float(above.sum()))
    high = min(0.5 * float(np.maximum(np.abs(lo - p), np.abs(hi - p)).sum()), float(np.clip(hi - p, 0, None).sum()),
               float(np.clip(p - lo, 0, None).sum()))  # fmt: skip
    observed = n / total
    plug_in = 0.5 * float(np.abs(observed - p).sum())
    rng = np.random.Generator(np.random.PCG64(seed))
    boot_mean, null_bias = _mean_tv(rng, total, observed, p), _mean_tv(rng, total, p, p)
    corrected = 2 * plug_in - boot_mean if low > 0 else plug_in - null_bias
    estimate = min(max(corrected, low, 0.0), high)
    return TVEstimate(estimate, low, max(high, low), plug_in, null_bias, alpha, total)


__all__ = ["RESAMPLES", "TVEstimate", "clopper_pearson", "tv_interval"]
