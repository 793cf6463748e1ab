"""The rare edge's event probabilities (specref.forced.event_probability) against the installed torch's own draws:
P(torch.rand(dtype=d) == 0) on CPU for float16 and bfloat16, which the kernel makes by rounding a float32 uniform
and sending a rounded-up 1.0 to 0 (about 2^-12 and 2^-9 on torch 2.13, not 2^-11 and 2^-8).

Each dtype is one exact two-sided binomial test of the zeros in N draws against the stated probability, at
alpha = budget.alpha_for("forced", 2) (Bonferroni over the two): a correct constant fails with probability <= alpha.
The test asserts its own power: at N it rejects the earlier constants (2^-11, 2^-8), and any probability off by a
factor of 1.25 either way, with probability >= 0.999.
"""

from __future__ import annotations

import pytest
import torch
from budget import alpha_for
from scipy.stats import binomtest

from specref.forced import event_probability
from specref.stats import binomial_power

pytestmark = pytest.mark.statistical

ALPHA = alpha_for("forced", 2)
N = 2**23
EARLIER = {torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}  # the constants specref stated before it measured


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_the_stated_zero_probability_is_torchs(dtype):
    stated = event_probability("cpu", dtype)
    for wrong in (EARLIER[dtype], 1.25 * stated, stated / 1.25):
        assert binomial_power(N, stated, wrong, ALPHA) >= 0.999, (dtype, wrong)
    generator = torch.Generator().manual_seed(20261201)
    zeros = int((torch.rand(N, generator=generator, dtype=dtype) == 0).sum())
    result = binomtest(zeros, N, stated)
    assert result.pvalue > ALPHA, (
        f"{dtype}: {zeros} zeros in {N} draws, stated {stated:.6g} (torch {torch.__version__})"
    )
