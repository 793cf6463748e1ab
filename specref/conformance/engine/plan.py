"""What each scenario checks, fixed before any data: the checks that test, those that cannot fail, and why.

Families. Every check answers one of three questions, and the verdict reads them in that order:
  contract     does the output obey the verify contract? (T0: ids, padding, the prefix equals the drafts, the
               adapter ran, reproducibility) -- certain checks
  law          is the output law the target's? (first-token law, joint law, and the certain T0 check that no token
               of target probability 0 is emitted): holds for every lossless rule
  rule         does acceptance follow the declared rule? (reject rate, accepted-length law, tau, correction law,
               bonus law, residual support, coupling with the reference engine, and the joint law of identical
               rows, whose marginal -- the first token given fixed drafts -- is the rule's)

Each kind's family, wording and plan predicate live in the check registry (engine/registry.py; the chain kinds in
chain/kinds.py, which also says which checks cannot fail and why): a contract's plan asks its kinds, in declaration
order (chain/plan.py).
Checks that cannot fail take no alpha and are never counted as passes; a rate of exactly 0 is a certain check.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import registry
from .registry import CERTAIN, CHAIN, CONTRACT, LAW, RULE, TEST

__all__ = ["CONTRACT", "LAW", "RULE", "Plan", "describe", "family_of", "plan_of"]


def family_of(kind: str) -> str:
    return registry.family_of(kind)


def describe(kind: str, contract: str = CHAIN) -> str:
    """What a check of this kind tests, in the words of a contract (its form's description, else the kind's)."""
    return registry.describe(kind, contract)


@dataclass
class Plan:
    """A scenario's checks under a rule: `tested` spend alpha, `certain` are decided by one counter-example,
    `skipped` maps the checks that cannot fail to the reason (shown in reports as not tested)."""

    tested: list[str] = field(default_factory=list)
    certain: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def plan_of(contract: str, scenario, rule: str) -> Plan:
    """The checks of one scenario under `rule`: every T2 kind of `contract` asked by its plan predicate (registry)."""
    out = Plan()
    for kind in registry.for_contract(contract, "T2"):
        decision = kind.forms[contract].plan(scenario, rule)
        if decision == TEST:
            out.tested.append(kind.name)
        elif decision == CERTAIN:
            out.certain.append(kind.name)
        elif decision is not None:
            out.skipped[kind.name] = decision
    return out
