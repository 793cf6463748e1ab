"""A pytest plugin for `nox -s timings`: each test's CPU seconds (its process and the subprocesses it waited for,
user + system, setup to teardown) as the junit property cpu_seconds. Load it with `-p cpu_times` and .ci on the
path. CPU time depends on the machine's load much less than wall time does."""

from __future__ import annotations

import resource

import pytest


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    item.stash[_START] = _cpu()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.when == "teardown" and _START in item.stash:
        report.user_properties.append(("cpu_seconds", round(_cpu() - item.stash[_START], 3)))


_START = pytest.StashKey[float]()
