"""Conformance of tree verifiers (the tree contract of `specref.tree_contract`): adapters, scenarios drafted by
the harness, checks against exact laws, and `run_tree`.

    from specref.conformance.tree import run_tree
    report = run_tree(my_verify_tree, seed=0, budget_seconds=120)
"""

from .adapters import TreeAdapter, as_tree_adapter, builtin_tree_adapters, is_tree
from .runner import run_tree

__all__ = ["TreeAdapter", "as_tree_adapter", "builtin_tree_adapters", "is_tree", "run_tree"]
