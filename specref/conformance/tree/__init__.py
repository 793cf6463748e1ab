"""Conformance of tree verifiers (the tree contract of `specref.tree_contract`): adapters, scenarios drafted by
the harness, checks against exact laws, and the contract (contract.py) through which `specref.conformance.run`
checks them. `run_tree` is `run` for a subject that is a tree verifier even when it is a plain function.

    from specref.conformance.tree import run_tree
    report = run_tree(my_verify_tree, seed=0, budget_seconds=120)
"""

from .adapters import TreeAdapter, as_tree_adapter, builtin_tree_adapters, is_tree


def run_tree(verify, *, name: str | None = None, **options):
    """`specref.conformance.run` of a tree verifier (a verify_tree function, a TreeAdapter, or an object with
    verify): options as run's (seed, budget_seconds, alpha, scenarios, rows, progress, shard, started)."""
    from ..engine.run import run_contract
    from .contract import CONTRACT

    return run_contract(CONTRACT, as_tree_adapter(verify, name), **options)


__all__ = ["TreeAdapter", "as_tree_adapter", "builtin_tree_adapters", "is_tree", "run_tree"]
