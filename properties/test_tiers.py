"""Every test carries a tier marker: CI selects by tier (noxfile's CI_MARKERS), so a test without one never runs
there. properties/conftest.py refuses such a collection; this holds that refusal (an exact test)."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.exact

CONFTEST = Path(__file__).with_name("conftest.py").read_text()
MARKERS = '[tool.pytest.ini_options]\nmarkers = ["exact: e", "statistical: s", "hypothesis_stat: h", "gpu: g"]\n'


def test_a_test_without_a_tier_is_refused_at_collection(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyprojecttoml(MARKERS)
    pytester.makepyfile(test_some="import pytest\n\n@pytest.mark.exact\ndef test_a():\n    pass\n\n\n"
                        "def test_untiered():\n    pass\n")  # fmt: skip
    result = pytester.runpytest("--collect-only", "-q")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*1 tests carry no tier marker*test_some.py::test_untiered*"])


def test_tiered_tests_collect(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyprojecttoml(MARKERS)
    pytester.makepyfile(test_some="import pytest\n\n@pytest.mark.statistical\ndef test_a():\n    pass\n")
    assert pytester.runpytest("--collect-only", "-q").ret == 0
