"""The conformance harness: check any verifier against exact speculative sampling, with stated error rates.

from specref.conformance import run
report = run(my_verify, seed=0, budget_seconds=120)
assert report.passed, report.summary()

The layers, lowest first (docs/harness.md; properties/test_layers.py holds them): engine/ (the run, knowing no
contract), edges/ (the forced rare-edge probe), one package per contract (chain/, then tree/ and pipeline/),
contracts.py (which contract a subject declares), report/ (report.md, plots, snippets), peers/ (real engines), and
this package's own modules (run, the CLI, the suites).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..extras import TORCH

if TYPE_CHECKING:
    from .chain.adapters import Adapter, as_adapter, builtin_adapters
    from .engine.report import Report
    from .runner import run

# Loaded on first use, so that `specref conform` answers usage errors (a missing package) without importing torch.
_EXPORTS = {"Adapter": "chain.adapters", "as_adapter": "chain.adapters", "builtin_adapters": "chain.adapters",
            "Report": "engine.report", "run": "runner"}  # fmt: skip


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
