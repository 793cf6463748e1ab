"""Which contract a subject is checked under, decided in this one place, above the engine and every contract.

    contract_of(subject)      -> "chain" | "tree" | "pipeline" | "sampling"  (its row of specref.builtins.CONTRACTS)
    contract(name or subject) -> its bundle, an engine.contract.Contract
    scenario_names(adapter)   -> (the scenarios its capabilities allow, every scenario of its contract)

A subject declares its contract by `kind` (a TreeAdapter has kind="tree", a pipeline kind="pipeline"); anything
else (a verify function, an Adapter, an object with `verify`) is a chain kernel. The bundles are imported only when
asked for, so `specref conform --list` stays free of torch.
"""

from __future__ import annotations

from .. import builtins
from .engine.contract import Contract

CHAIN, TREE, PIPELINE, SAMPLING = "chain", "tree", "pipeline", "sampling"


def contract_of(subject) -> str:
    """The name of the contract a subject declares by `kind` (specref.builtins.CONTRACTS); chain by default."""
    kind = getattr(subject, "kind", None)
    return next((row.name for row in builtins.CONTRACTS if row.kind == kind), CHAIN)


def contract(subject) -> Contract:
    """The bundle of a subject's contract (any object `contract_of` reads), or of a contract's name."""
    name = subject if isinstance(subject, str) else contract_of(subject)
    row = next((row for row in builtins.CONTRACTS if row.name == name), None)
    if row is None:
        raise ValueError(f"contract={name!r} must be one of {tuple(r.name for r in builtins.CONTRACTS)}")
    return builtins.load(row.bundle)


def every_kind() -> dict:
    """Every check kind of every contract (engine/registry.py), each contract's package imported to declare them."""
    from .engine import registry  # scipy: not for `specref conform --list` and usage errors

    for row in builtins.CONTRACTS:
        builtins.load(row.bundle)
    return registry.kinds()


def scenario_names(adapter) -> tuple[list[str], list[str]]:
    """(the scenario names the adapter's contract and capabilities allow, every scenario name of its contract)."""
    c = contract(adapter)
    return [s.name for s in c.scenarios(adapter)], list(c.catalogue())


__all__ = [
    "CHAIN",
    "PIPELINE",
    "SAMPLING",
    "TREE",
    "Contract",
    "contract",
    "contract_of",
    "every_kind",
    "scenario_names",
]
