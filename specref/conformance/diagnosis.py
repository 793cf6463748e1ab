"""The rule diagnosis: when only rule checks failed, does the acceptance follow another known rule?

Counts do not depend on the rule, only expected laws do, so every other rule is tested on the same data, each on
its own full plan: the rule checks that rule's plan_for gives every scenario (its tested checks, at alphas split by
Bonferroni over that plan as a run declaring it would, and its certain checks: a rejection where it has Z = 0), and
the residual support it allows. A rule matches only when at least one of its checks was tested and none failed.
The diagnosis spends no alpha of the run and never changes the verdict. It also gives the acceptance ratio: accepted
drafts over those exact speculative sampling would accept on the same rows.
"""

from __future__ import annotations

import copy

from ..stats import ErrorBudget
from . import laws
from .plan import RULE, family_of, plan_for


def rule_diagnosis(tallies: dict, declared: str, alpha: float) -> dict:
    """{"rules": {rule: fit}, "acceptance_ratio": observed / expected accepted drafts under the exact rule}."""
    out: dict = {"rules": {}}
    for rule in laws.RULES:
        if rule != declared:
            out["rules"][rule] = rule_fit(tallies, rule, alpha)
    observed = expected = 0.0
    for tally in tallies.values():
        sc = tally.scenario
        if tally.rows and not (sc.probe or sc.identical_rows or sc.point_mass or sc.joint):
            o, e = tally.mean_accepted("exact")
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
    }


def tree_rule_diagnosis(tallies: dict, declared: str, scheme: str, alpha: float) -> dict:
    """The same diagnosis for a tree run: every other tree rule that is lossless on the adapter's drafting scheme
    (tree.adapters.RULE_SCHEMES, sibling-order variants such as "mss:random-order" included), tested on its own
    plan (TreeTally.planned under that rule) with its own alphas; and the acceptance ratio against the declared
    rule (accepted drafts over those the declared rule's exact law expects on the same rows)."""
    from .tree.adapters import RULE_SCHEMES

    counted = {name: t for name, t in tallies.items() if t.rows and not t.scenario.joint}
    out: dict = {"rules": {}, "against": declared}
    for rule in RULE_SCHEMES:
        if rule == declared or scheme not in RULE_SCHEMES[rule]:
            continue
        under = {name: _under(t, rule) for name, t in counted.items()}
        tested = {name: [k for k in t.planned()[0] if family_of(k) == RULE] for name, t in under.items()}
        names = [f"{kind}[{name}]" for name, kinds in tested.items() for kind in kinds]
        alphas = ErrorBudget(alpha).split(names) if names else {}
        checked = [under[name].t2(kind, alphas[f"{kind}[{name}]"]) for name, kinds in tested.items() for kind in kinds]
        failed = [r.name for r in checked if not r.passed]
        out["rules"][rule] = {"matches": bool(checked) and not failed,
                              "min_p_value": min((r.p_value for r in checked), default=float("nan")),
                              "checks": len(checked), "failed": failed}  # fmt: skip
    observed = expected = 0.0
    for tally in counted.values():
        accepted = range(tally.length.shape[1])
        observed += float(tally.length.sum(0) @ accepted)
        expected += float((tally.length.sum(1) @ tally.expected_length()) @ accepted)
    out["acceptance_ratio"] = observed / expected if expected else None
    return out


def _under(tally, rule: str):
    """The tally's counts (shared, not copied) with its expected laws under `rule`."""
    other = copy.copy(tally)
    other.rule = rule
    return other


__all__ = ["rule_diagnosis", "rule_fit", "tree_rule_diagnosis"]
