"""The chain's plan, fixed before any data: the scenarios an adapter's capabilities allow, and what each checks.

Every chain T2 kind's plan predicate (chain/kinds.py) reads a scenario's rows (as given) and the rule alone: it
tests, is certain (decided by one counter-example), or cannot fail and says why (engine/plan.py).
"""

from __future__ import annotations

from ..engine.plan import Plan, plan_of
from ..engine.registry import CHAIN
from .kinds import DECLARED as _DECLARED  # noqa: F401 -- the chain kinds a plan asks
from .scenarios import SCENARIOS, Scenario


def scenarios_for(adapter) -> list[Scenario]:
    """The scenarios an adapter's declared capabilities allow, as its dtype gives them (Scenario.given)."""
    return [
        s.given(adapter.dtype)
        for s in SCENARIOS.values()
        if (adapter.ragged or not s.ragged) and (adapter.point_mass or not s.point_mass)
    ]


def plan_for(scenario: Scenario, rule: str = "exact") -> Plan:
    """The checks of one scenario, from its rows (as given) and the rule alone: every chain T2 kind's predicate."""
    return plan_of(CHAIN, scenario, rule)


__all__ = ["plan_for", "scenarios_for"]
