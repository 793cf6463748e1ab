"""T2 law checks of the batched engine on the device: chi-square against the exact laws of scenarios.py.

Sizes: on CUDA every scenario verifies 10^7 rows; on CPU 1e5 (V = 151936 is slow on CPU and skipped by the quick
pass). alpha comes from gpu_budget.py; each check asserts its sample size reaches min_num_samples_chisquare for the
TV it states (STATED_TV), with power 1 - BETA.
"""

from __future__ import annotations

import pytest
from gpu_budget import BETA, N_CHECKS, alpha_for
from scenarios import DEVICE, SCENARIOS, exact_laws, simulate

from specref.stats import chisquare_gof, min_num_samples_chisquare

NUM_ROWS = {"cuda": 10**7, "cpu": 10**5}
#: TV each check is sized to detect with power 1 - BETA; the correction and bonus checks see only the rows of
#: their event (a first-position rejection, g accepts), hence the larger distances.
STATED_TV = {
    "cuda": {"first": 0.01, "length": 0.01, "correction": 0.03, "bonus": 0.03},
    "cpu": {"first": 0.05, "length": 0.05, "correction": 0.15, "bonus": 0.15},
}
CHECKS = ("first", "length", "correction", "bonus")

pytestmark = pytest.mark.statistical


def _params():
    for scenario in SCENARIOS:
        marks = [pytest.mark.slow] if scenario.slow_on_cpu and DEVICE == "cpu" else []
        yield pytest.param(scenario, id=scenario.name, marks=marks)


def test_check_count_matches_budget():
    assert len(SCENARIOS) * len(CHECKS) == N_CHECKS


@pytest.mark.parametrize("scenario", list(_params()))
def test_laws_of_one_verify_step(scenario, device):
    kind = "cuda" if device.type == "cuda" else "cpu"
    alpha = alpha_for(device.type)
    observed = simulate(scenario, NUM_ROWS[kind], device, seed=scenario.seed)
    expected = exact_laws(scenario)
    failures = []
    for check in CHECKS:
        name = f"{scenario.name}:{check}"
        result = chisquare_gof(observed[check], expected[check], alpha=alpha, beta=BETA, name=name)
        stated_tv = STATED_TV[kind][check]
        needed = min_num_samples_chisquare(stated_tv, alpha, BETA, max(result.df, 1))
        assert result.n >= needed, f"{result.name}: n={result.n} < {needed} draws needed to detect TV {stated_tv}"
        if not result.passed:
            failures.append(f"{result.name}: p={result.p_value:.3g} < alpha={alpha:.3g}, details={result.details}")
    assert not failures, "\n".join(failures)
