import pytest
from budget import SHARES, TOTAL, alpha_for

pytestmark = pytest.mark.exact


def test_shares_fit_the_run_budget():
    assert sum(SHARES.values()) <= TOTAL


def test_alpha_for_rejects_unknown_area():
    with pytest.raises(ValueError, match="area='nope'"):
        alpha_for("nope", 1)
