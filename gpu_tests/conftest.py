"""gpu_tests run on the device named by SPECREF_DEVICE (default cuda; cpu allowed for CI's quick pass).

Without CUDA and with SPECREF_DEVICE != cpu, every test skips with the reason. Every test gets the `gpu` marker.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))  # gpu_budget, scenarios

from scenarios import DEVICE  # noqa: E402


def _skip_reason() -> str | None:
    if DEVICE == "cpu":
        return None
    if DEVICE.startswith("cuda") and not torch.cuda.is_available():
        return f"SPECREF_DEVICE={DEVICE!r} but CUDA is unavailable (torch {torch.__version__}); set SPECREF_DEVICE=cpu"
    if not DEVICE.startswith("cuda"):
        return f"SPECREF_DEVICE={DEVICE!r} is not supported; use cuda, cuda:N or cpu"
    return None


def pytest_collection_modifyitems(config, items):
    reason = _skip_reason()
    here = Path(__file__).parent
    for item in items:
        if here not in Path(str(item.fspath)).parents:
            continue
        item.add_marker(pytest.mark.gpu)
        if reason:
            item.add_marker(pytest.mark.skip(reason=reason))


def pytest_report_header(config):
    reason = _skip_reason()
    return f"specref gpu_tests: SPECREF_DEVICE={DEVICE!r}" + (f" (skipping: {reason})" if reason else "")


@pytest.fixture
def device() -> torch.device:
    return torch.device(DEVICE)
