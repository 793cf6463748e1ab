"""A run's plan, fixed before any data: the scenarios, the checks of each (the contract's plan) and the alpha of each T2
check (the run's alpha split by Bonferroni over them; the family is re-verdicted by Holm at the end)."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from ...stats import ErrorBudget
from .plan import Plan


@dataclass
class RunPlan:
    scenarios: list  # as the adapter's dtype gives them (Scenario.given, TreeScenario.given)
    checks: dict[str, Plan]  # scenario name -> its tested, certain and skipped checks
    alphas: dict[str, float]  # "kind[scenario]" -> alpha, for every T2 check

    def fingerprint(self) -> str:
        """A digest of everything the plan fixes (rows as given, checks, alphas): equal plans, equal digests."""
        digest = 0
        for s in self.scenarios:
            p = self.checks[s.name]
            text = f"{s.name}:{getattr(s, 'gamma', None)}:{s.rows_per_call}:{p.tested}:{p.certain}:{sorted(p.skipped)}"
            laws = [getattr(s, name, None) for name in ("target", "draft")]  # the rows as given, where it has them
            for part in [text.encode()] + [np.ascontiguousarray(law) for law in laws if law is not None]:
                digest = zlib.crc32(part, digest)
        digest = zlib.crc32(repr(sorted(self.alphas.items())).encode(), digest)
        return f"{digest:08x}"


def make_plan(adapter, scenarios: list | None, alpha: float, contract) -> RunPlan:
    """The scenarios (default: all the adapter's capabilities allow), their checks, and the alpha split, under the
    adapter's contract (engine/contract.py)."""
    if scenarios is None:
        chosen = contract.scenarios(adapter)
    else:
        chosen = [(contract.get(s) if isinstance(s, str) else s).given(adapter.dtype) for s in scenarios]
    checks = {s.name: contract.plan(adapter, s) for s in chosen}
    t2_names = [f"{kind}[{s.name}]" for s in chosen for kind in checks[s.name].tested]
    alphas = ErrorBudget(alpha).split(t2_names) if t2_names else {}
    return RunPlan(chosen, checks, alphas)
