"""Progress a CI log can read (issue 34): without a terminal, `specref conform` prints one line per scenario on
stderr, with its rows, the time elapsed and the expected end."""

from __future__ import annotations

import re

import pytest

from specref.cli import main
from specref.conformance.engine.progress import ProgressBar

pytestmark = pytest.mark.exact


def test_without_a_terminal_one_line_per_scenario(tmp_path, capsys):
    code = main(["conform", "batched", "--rows", "300", "--scenarios", "cf_dense_g4,markov_g1", "--no-plots",
                 "--report", str(tmp_path / "r")])  # fmt: skip
    assert code == 0
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("specref: batched: ")]
    assert len(lines) == 2, lines
    for line, scenario in zip(lines, ["cf_dense_g4", "markov_g1"]):
        assert re.fullmatch(rf"specref: batched: {scenario}: 300 rows \(\d+%\), \d+ s elapsed, expected end in ~\d+ s",
                            line), line  # fmt: skip


def test_the_expected_end_is_the_budget_left_or_the_rate_so_far():
    assert ProgressBar("x", 300.0).line("a: 5 rows", 0.5, 100.0).endswith("expected end in ~200 s")
    assert ProgressBar("x", None).line("a: 5 rows", 0.25, 30.0).endswith("expected end in ~90 s")
