"""The false-alarm budget of gpu_tests' statistical checks, split by Bonferroni over every check the suite holds.

* CUDA run (`nox -s gpu`): its own run, 1e-3 in total.
* CPU pass inside `nox -s properties`: the "gpu_cpu_pass" share of properties/budget.py (1e-4; a test checks
  that the two agree). The count includes the checks the quick pass skips as slow, so the split is conservative.
"""

from __future__ import annotations

TOTAL = {"cuda": 1e-3, "cpu": 1e-4}

#: Statistical checks in test_batched_laws.py: scenarios x checks per scenario (first token, accepted length,
#: correction after a first-position rejection, bonus after all accepts).
N_CHECKS = 6 * 4

#: Power: each check detects its stated TV with probability >= 1 - BETA.
BETA = 1e-3


def alpha_for(device: str) -> float:
    kind = "cpu" if device == "cpu" else "cuda"
    return TOTAL[kind] / N_CHECKS
