"""The check registry: one CheckKind per kind of check, declared once, from which everything else is derived.

A kind says what it is (family, tier, description), how its numbers read (the statistic's kind, what a bin and a
stratum are, the unit of its detectable distance, its plot), and, per contract ("chain", "tree", ...), a Form: the
plan predicate (does it apply to a scenario, can it fail), the test, and the counters its test reads. The plans,
the tallies' tests, the reports, the shards' arrays, the calibration's distances and the mutants' `caught_by` all
read this registry.

The kinds themselves are declared next to their tests, by the contract packages: chain/kinds.py, tree/kinds.py
(which also adds the tree form of the kinds both contracts run), pipeline/kinds.py. Importing a contract's package
declares its kinds; contracts.every_kind() imports every contract's.

    kind = registry.get("correction_law")
    kind.family, kind.statistic, kind.bins        # "rule", "Pearson X^2 over strata", "token"
    kind.forms["chain"].evaluate(tally, alpha, rule, name)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ...stats.record import CheckId

CONTRACT, LAW, RULE = "contract", "law", "rule"
#: A rare edge the forced probe showed (edges/probe.py): its own verdict, "non-conforming: rare edge".
EDGE = "edge"
FAMILIES = (CONTRACT, LAW, RULE, EDGE)
CHAIN, TREE, PIPELINE, SAMPLING = "chain", "tree", "pipeline", "sampling"
#: Tiers: T0 runs on every call (certain), T2 is statistical (spends alpha), "run" is a run-level certain check,
#: "call" is the adapter check (it ran, no exception, no hang, a well-formed output).
TIERS = ("T0", "T2", "run", "call")

#: The designed-power models: a chi-square on df bins (noncentral chi-square), exact binomials per position
#: (Bonferroni over them).
POWER_MODELS = ("chi-square", "binomial positions")

#: The plan predicate's answers besides a skip reason (a str) and None (the kind does not apply to the scenario).
TEST, CERTAIN = "test", "certain"


@dataclass(frozen=True)
class Form:
    """How one contract runs a kind.

    plan(scenario, rule) -> TEST (spends alpha), CERTAIN (one counter-example fails it), a str (the reason it cannot
    fail: shown as not tested), or None (it does not apply). The tree form's plan takes the scenario's tally.
    evaluate(tally, alpha, rule, name) -> CheckResult. counters: the tally's count arrays the test reads; a shard
    carries exactly the counters its contract's kinds declare, and merge sums them."""

    plan: Callable | None = None
    evaluate: Callable | None = None
    counters: tuple[str, ...] = ()
    description: str | None = None  # the contract's own wording, when it differs from the kind's


@dataclass
class CheckKind:
    name: str
    family: str
    tier: str
    description: str
    statistic: str = ""  # the statistic's kind, named next to its value ("Pearson X^2", "exact binomial count", ...)
    bins: str = ""  # what one outcome of the law is: "token", "accepted count", "token pair", "token sequence"
    strata: str = ""  # what a stratum is, when the law is split by one
    distance: str = "TV"  # the unit of the detectable distance it reports
    plot: str | None = None  # plot group (plots.PLOT_FILES): "first", "length", "reject"
    power: str = "chi-square"  # how its designed power is computed (calibration.analysis.POWER): its test's family
    forms: dict[str, Form] = field(default_factory=dict)

    def __post_init__(self):
        if self.power not in POWER_MODELS:
            raise ValueError(f"power={self.power!r} of {self.name!r} must be one of {POWER_MODELS}")
        if self.family not in FAMILIES:
            raise ValueError(f"family={self.family!r} of {self.name!r} must be one of {FAMILIES}")
        if self.tier not in TIERS:
            raise ValueError(f"tier={self.tier!r} of {self.name!r} must be one of {TIERS}")

    def describe(self, contract: str = CHAIN) -> str:
        form = self.forms.get(contract)
        return form.description if form is not None and form.description else self.description

    def id(self, scenario: str | None = None) -> CheckId:
        return CheckId(self.name, scenario)


_KINDS: dict[str, CheckKind] = {}


def declare(kind: CheckKind) -> CheckKind:
    """Register a kind (once: a second declaration of a name is an error)."""
    if kind.name in _KINDS:
        raise ValueError(f"check kind {kind.name!r} is declared twice")
    _KINDS[kind.name] = kind
    return kind


def add_form(name: str, contract: str, form: Form) -> None:
    """Let `contract` run the declared kind `name` (a contract runs a kind at most one way)."""
    kind = _KINDS[name]
    if contract in kind.forms:
        raise ValueError(f"check kind {name!r} already has a {contract} form")
    kind.forms[contract] = form


def kinds() -> dict[str, CheckKind]:
    """Every kind declared so far, in declaration order (the order plans and reports list them). A contract's kinds
    are declared when its package is imported (chain/kinds.py, tree/kinds.py, pipeline/kinds.py): the engine is
    handed a contract whose kinds are there; code that needs every contract's imports specref.conformance.contracts
    and calls its `every_kind()`."""
    return _KINDS


def get(name: str) -> CheckKind:
    """The kind `name`; raises ValueError naming it and the known kinds when it is not declared."""
    known = kinds()
    if name not in known:
        raise ValueError(f"check kind {name!r} is not declared; known: {', '.join(known)}")
    return known[name]


def for_contract(contract: str, tier: str | None = None) -> list[CheckKind]:
    """The kinds `contract` runs (optionally of one tier), in declaration order."""
    return [k for k in kinds().values() if contract in k.forms and (tier is None or k.tier == tier)]


def family_of(name: str) -> str:
    return get(name).family


def describe(name: str, contract: str = CHAIN) -> str:
    return get(name).describe(contract)


def counters(contract: str) -> tuple[str, ...]:
    """The count arrays a contract's tallies carry: the union of its kinds' declared counters, in order."""
    return tuple(dict.fromkeys(c for k in for_contract(contract) for c in k.forms[contract].counters))


def check_caught_by(owner: str, caught_by) -> list[str]:
    """A mutant's `caught_by` as a list of declared kinds; raises ValueError naming the owner and an unknown one."""
    out = list(caught_by)
    unknown = [name for name in out if name not in kinds()]
    if unknown:
        raise ValueError(f"{owner}: caught_by names undeclared check kinds {unknown}; known: {', '.join(kinds())}")
    return out
