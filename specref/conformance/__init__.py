"""The conformance harness: check any verifier against exact speculative sampling, with stated error rates.

from specref.conformance import run
report = run(my_verify, seed=0, budget_seconds=120)
assert report.passed, report.summary()
"""

from .adapters import Adapter, as_adapter, builtin_adapters
from .report import Report
from .runner import run

__all__ = ["Adapter", "Report", "as_adapter", "builtin_adapters", "run"]
