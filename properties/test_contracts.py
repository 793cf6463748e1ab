"""Chain, tree or pipeline is decided in one place (contracts.contract_of): run() takes any subject, the CLI asks
run() alone, and a pipeline run asked for shards is refused by name (trees shard: test_tree_shards.py)."""

from __future__ import annotations

import pytest

from specref.conformance import run
from specref.conformance.chain.adapters import batched_adapter
from specref.conformance.contracts import CHAIN, PIPELINE, SAMPLING, TREE, contract_of
from specref.conformance.tree.adapters import batched_tree_adapter

pytestmark = pytest.mark.exact


class _Pipeline:
    kind = "pipeline"


def test_each_subject_has_one_contract():
    assert contract_of(batched_adapter()) == CHAIN and contract_of(batched_adapter().verify) == CHAIN
    assert contract_of(batched_tree_adapter("rsd")) == TREE
    assert contract_of(_Pipeline()) == PIPELINE


def test_each_contract_row_names_its_bundle():
    """A contract's name is written in its builtins row, its bundle and the registry's forms: they must agree."""
    from specref.builtins import CONTRACTS, KINDS
    from specref.conformance.contracts import contract
    from specref.conformance.engine import registry

    assert [row.name for row in CONTRACTS] == [CHAIN, PIPELINE, TREE, SAMPLING] == [
        registry.CHAIN, registry.PIPELINE, registry.TREE, registry.SAMPLING]  # fmt: skip
    for row in CONTRACTS:
        assert contract(row.name).name == row.name and contract_of(type("S", (), {"kind": row.kind})()) == row.name
        assert registry.for_contract(row.name), f"{row.name}: no check kind has a form for it"
    assert len(set(KINDS)) == len(KINDS)


def test_run_checks_a_tree_verifier():
    report = run(batched_tree_adapter("mss"), scenarios=["tree_star_cf"], rows=512)
    assert report.adapter.kind == "tree" and report.scenarios["tree_star_cf"]["rows"] == 512, report.summary()


def test_a_sharded_pipeline_run_is_refused_by_name():
    with pytest.raises(ValueError, match="pipeline runs cannot be sharded"):
        run(_Pipeline(), rows=10, shard="0/2")
