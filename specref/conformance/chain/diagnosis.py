"""The rule diagnosis: when only rule checks failed, does the acceptance follow another known rule?

Counts do not depend on the rule, only expected laws do, so every other rule is tested on the same data, each on
its own full plan: the rule checks that rule's plan_for gives every scenario (its tested checks, at alphas split by
Bonferroni over that plan as a run declaring it would, and its certain checks: a rejection where it has Z = 0), and
the residual support it allows. A rule matches only when at least one of its checks was tested and none failed;
the match states what it rules out: the largest deviation from the rule's law each kind of its checks would have
detected (engine/fit.py).
The diagnosis spends no alpha of the run and never changes the verdict. It also gives the acceptance ratio: accepted
drafts over those the declared rule would accept on the same rows ("against" names that rule unless it is exact).
"""

from __future__ import annotations

from ...stats import ErrorBudget
from ..engine.fit import ruled_out
from ..engine.plan import RULE, family_of
from . import laws
from .plan import plan_for


def rule_diagnosis(tallies: dict, declared: str, alpha: float) -> dict:
    """{"rules": {rule: fit}, "acceptance_ratio": observed / expected accepted drafts under the declared rule,
    "against": the declared rule, where it is not exact}."""
    out: dict = {"rules": {}} if declared == "exact" else {"rules": {}, "against": declared}
    for rule in laws.RULES:
        if rule != declared:
            out["rules"][rule] = rule_fit(tallies, rule, alpha)
    observed = expected = 0.0
    for tally in tallies.values():
        sc = tally.scenario
        if tally.rows and not (sc.probe or sc.identical_rows or sc.point_mass or sc.joint):
            o, e = tally.mean_accepted(declared)
            observed, expected = observed + o, expected + e
    out["acceptance_ratio"] = observed / expected if expected else None
    return out


def rule_fit(tallies: dict, rule: str, alpha: float) -> dict:
    """How the counts fit `rule` on its own full plan (module docstring)."""
    plans = {name: plan_for(t.scenario, rule) for name, t in tallies.items() if t.rows and t.joint is None}
    tested = {name: [k for k in p.tested if family_of(k) == RULE] for name, p in plans.items()}
    names = [f"{kind}[{name}]" for name, kinds in tested.items() for kind in kinds]
    alphas = ErrorBudget(alpha).split(names) if names else {}
    results, support = [], 0
    for name, tally in tallies.items():
        support += tally.support_violations[rule]
        if name not in plans:
            continue
        results += tally.t2_results({k: alphas[f"{k}[{name}]"] for k in tested[name]}, rule)
        results += tally.certain_results([k for k in plans[name].certain if family_of(k) == RULE], rule)
    checked = [r for r in results if "not_tested" not in r.details]
    failed = [r.name for r in checked if not r.passed]
    return {
        "matches": support == 0 and bool(checked) and not failed,
        "min_p_value": min((r.p_value for r in checked if r.details.get("tier") != "T0"), default=float("nan")),
        "checks": len(checked),
        "failed": failed,
        "residual_support_violations": support,
        "ruled_out": ruled_out(checked),  # the deviation from the rule's law each kind would have seen (fit.py)
    }


__all__ = ["rule_diagnosis", "rule_fit"]
