"""Check records the engine and every contract build: certain (T0) results, checks that cannot fail, checks that
could not be computed, and an adapter's failure as a record's details."""

from __future__ import annotations

from ...errors import AdapterFailure
from ...stats import CheckResult
from ...stats import not_tested as _not_tested
from ...stats.record import CheckId
from .plan import family_of


def t0_result(name: str, violations: int, n: int, details: dict | None = None) -> CheckResult:
    """A deterministic check as a record: p_value 0 on any violation, no alpha spent."""
    return CheckResult(
        name, float(violations), 0, 0.0 if violations else 1.0, n, 0.0, float("nan"), violations == 0, 0.0,
        {"tier": "T0", "family": family_of(CheckId.parse(name).kind), **(details or {})},
    )  # fmt: skip


def not_tested(name: str, reason: str) -> CheckResult:
    """A planned check that cannot fail (plan.py): no alpha, no p-value, never counted as a pass."""
    return _not_tested(name, reason, 0, {"tier": "none", "family": family_of(CheckId.parse(name).kind)})


def not_run(name: str, why: str | None) -> CheckResult:
    """A planned check that could not be computed: a failure with its reason, never a pass (no p-value, no alpha)."""
    why = why or "not reached"
    return CheckResult(name, float("nan"), 0, float("nan"), 0, 0.0, float("nan"), False, 0.0,
                       {"tier": "not run", "error": f"not run: {why}"})  # fmt: skip


def failure_details(failure: AdapterFailure) -> dict:
    return {"error": str(failure), "kind": failure.kind, "raised_at": failure.location, "call": failure.call}


__all__ = ["failure_details", "not_run", "not_tested", "t0_result"]
