"""Statistics for specref's checks: goodness of fit, rates, means, power design and the error budget.

Every check returns a CheckResult with its alpha and its power statement (the TV, rate or mean shift it detects
with probability 1 - beta). Distributions all come from scipy.stats.

  merging   bins merged by expected counts only; hidden_mass bounds the TV merging can hide
  power     min_num_samples_* / min_detectable_* (worst-case noncentrality lambda = 4 N d^2 for chi-square)
  gof       chisquare_gof, discrete_law and their assert_ forms
  strata    chisquare_strata: one chi-square over strata with their own expected laws
  size      the far-tail reference law of Pearson chi-square, E_min(alpha, df), exact sizes of every test family
  size_real exact sizes of that rule at real (non-integer) expected counts
  rates     binomial_rate, binomial_positions (exact binomial per position), mean_ci and their assert_ forms
  bennett   Bennett's bound for a mean: p-value, interval, and the worst-case power over laws on a range
  budget    ErrorBudget: Bonferroni split and Holm step-down
  record    CheckResult, JSON-safe via to_dict(); tested=False marks a check that cannot fail (no alpha, no pass)
"""

from __future__ import annotations

from .budget import ErrorBudget
from .gof import assert_chisquare_gof, assert_discrete_law, chisquare_gof, default_min_expected, discrete_law
from .merging import merge_bins
from .power import (
    binomial_power,
    binomial_rejection_region,
    min_detectable_diff_binomial,
    min_detectable_shift_mean,
    min_detectable_tv_chisquare,
    min_num_samples_binomial,
    min_num_samples_chisquare,
    min_num_samples_mean,
    noncentrality_for_power,
)
from .rates import assert_binomial_rate, assert_mean_ci, binomial_positions, binomial_rate, mean_ci, moments
from .record import CheckResult, not_tested, require
from .size import min_expected_for, pearson_critical, pearson_p_value
from .strata import chisquare_strata

__all__ = [
    "CheckResult",
    "ErrorBudget",
    "assert_binomial_rate",
    "assert_chisquare_gof",
    "assert_discrete_law",
    "assert_mean_ci",
    "binomial_power",
    "binomial_rejection_region",
    "binomial_positions",
    "binomial_rate",
    "chisquare_gof",
    "chisquare_strata",
    "default_min_expected",
    "discrete_law",
    "mean_ci",
    "merge_bins",
    "min_detectable_diff_binomial",
    "min_detectable_shift_mean",
    "min_detectable_tv_chisquare",
    "min_num_samples_binomial",
    "min_num_samples_chisquare",
    "min_num_samples_mean",
    "min_expected_for",
    "moments",
    "noncentrality_for_power",
    "not_tested",
    "pearson_critical",
    "pearson_p_value",
    "require",
]
