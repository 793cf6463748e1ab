"""The rule diagnosis of a tree run (as chain/diagnosis.py for chains): when only rule checks failed, which other
tree rule, lossless on the adapter's drafting scheme, the counts fit; and the acceptance ratio against the declared
rule. It spends no alpha of the run and never changes the verdict; a match states what it rules out
(engine/fit.py)."""

from __future__ import annotations

import copy

from ...stats import ErrorBudget
from ..engine.fit import ruled_out
from ..engine.plan import RULE, family_of
from .adapters import RULE_SCHEMES


def tree_rule_diagnosis(tallies: dict, declared: str, scheme: str, alpha: float) -> dict:
    """The same diagnosis for a tree run: every other tree rule that is lossless on the adapter's drafting scheme
    (tree.adapters.RULE_SCHEMES, sibling-order variants such as "mss:random-order" included), tested on its own
    plan (TreeTally.planned under that rule) with its own alphas; and the acceptance ratio against the declared
    rule (accepted drafts over those the declared rule's exact law expects on the same rows)."""
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
                              "checks": len(checked), "failed": failed,
                              "ruled_out": ruled_out(checked)}  # fmt: skip
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


__all__ = ["tree_rule_diagnosis"]
