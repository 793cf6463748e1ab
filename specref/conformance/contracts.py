"""Which contract a subject is checked under, decided in this one place: a chain kernel, a tree verifier or a whole
pipeline. `run`, the CLI (conform, --scenarios, the report's pictures) and the pytest plugin all ask here.

    contract_of(subject)      -> "chain" | "tree" | "pipeline"
    scenario_names(adapter)   -> (the scenarios its capabilities allow, every scenario of its contract)
"""

from __future__ import annotations

CHAIN, TREE, PIPELINE = "chain", "tree", "pipeline"


def contract_of(subject) -> str:
    """A tree adapter (TreeAdapter, or any object declaring kind='tree'), a whole pipeline (kind='pipeline' without
    a verify method), else a chain kernel (a verify function, an Adapter, an object with verify)."""
    kind = getattr(subject, "kind", None)
    if kind == TREE:
        return TREE
    if kind == PIPELINE and not hasattr(subject, "verify"):
        return PIPELINE
    return CHAIN


def scenario_names(adapter) -> tuple[list[str], list[str]]:
    """(the scenario names the adapter's contract and capabilities allow, every scenario name of its contract)."""
    if contract_of(adapter) == TREE:
        from .tree.runner import scenarios_for_tree
        from .tree.scenarios import SCENARIOS as TREE_SCENARIOS

        return [s.name for s in scenarios_for_tree(adapter)], list(TREE_SCENARIOS)
    from .run_plan import scenarios_for
    from .scenarios import SCENARIOS

    return [s.name for s in scenarios_for(adapter)], list(SCENARIOS)


__all__ = ["CHAIN", "PIPELINE", "TREE", "contract_of", "scenario_names"]
