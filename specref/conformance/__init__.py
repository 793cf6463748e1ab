"""The conformance harness: check any verifier against exact speculative sampling, with stated error rates.

from specref.conformance import run
report = run(my_verify, seed=0, budget_seconds=120)
assert report.passed, report.summary()
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..extras import TORCH

if TYPE_CHECKING:
    from .adapters import Adapter, as_adapter, builtin_adapters
    from .report import Report
    from .runner import run

# Loaded on first use, so that `specref conform` answers usage errors (a missing package) without importing torch.
_EXPORTS = {"Adapter": "adapters", "as_adapter": "adapters", "builtin_adapters": "adapters", "Report": "report",
            "run": "runner"}  # fmt: skip


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        module = importlib.import_module(f"{__name__}.{_EXPORTS[name]}")
    except ModuleNotFoundError as error:
        if error.name != "torch":
            raise
        message = f"specref.conformance needs torch: {TORCH.install}"
        raise ModuleNotFoundError(message, name="torch") from error
    value = getattr(module, name)
    globals()[name] = value
    return value


__all__ = ["Adapter", "Report", "as_adapter", "builtin_adapters", "run"]
