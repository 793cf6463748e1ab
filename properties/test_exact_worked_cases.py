"""T1: the two worked cases of specref.worked, with their exact probabilities."""

from __future__ import annotations

import pytest

from specref import exact, worked

pytestmark = pytest.mark.exact


@pytest.mark.parametrize("case", [worked.REJECT_CASE, worked.ACCEPT_CASE], ids=["reject", "all-accepted"])
def test_worked_case_has_its_exact_probability(case):
    target_rows, draft_rows, tokens = worked.rows_for(case["prefix"], case["drafts"])
    law = exact.verify_law(target_rows, draft_rows, tokens)
    assert sum(law.values()) == 1
    assert law[worked.encode(case["emitted"])] == case["probability"]


def test_reject_case_keeps_a_cat_and_resamples_slept():
    target_rows, draft_rows, tokens = worked.rows_for(worked.REJECT_CASE["prefix"], worked.REJECT_CASE["drafts"])
    law = exact.verify_law(target_rows, draft_rows, tokens)
    # Given that "crossed" (position 3) is rejected, the correction is "slept" with certainty.
    rejected_at_3 = {t: p for t, p in law.items() if len(t) == 3}
    assert set(rejected_at_3) == {worked.encode("a cat slept")}
    # "the garden" after "crossed" is never emitted in the same cycle as a correction at position 3.
    assert all(worked.decode(t).startswith("a cat crossed the garden") for t in law if len(t) > 3)


def test_accept_case_bonus_comes_from_the_row_after_the_last_draft():
    target_rows, draft_rows, tokens = worked.rows_for(worked.ACCEPT_CASE["prefix"], worked.ACCEPT_CASE["drafts"])
    law = exact.verify_law(target_rows, draft_rows, tokens)
    all_accepted = {worked.decode(t): p for t, p in law.items() if len(t) == len(tokens) + 1}
    total = sum(all_accepted.values())
    assert {k: v / total for k, v in all_accepted.items()} == {
        "birds began to sing softly": worked.TARGET(worked.encode("to sing"))[worked.ID["softly"]],
        "birds began to sing loudly": worked.TARGET(worked.encode("to sing"))[worked.ID["loudly"]],
    }
