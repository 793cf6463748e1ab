"""Chain, tree or pipeline is decided in one place (contracts.contract_of): run() takes any subject, the CLI asks
run() alone, and a tree run asked for shards gets a usage error, not a TypeError (was exit 3)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from specref.conformance import run
from specref.conformance.adapters import batched_adapter
from specref.conformance.contracts import CHAIN, PIPELINE, TREE, contract_of
from specref.conformance.tree.adapters import batched_tree_adapter

pytestmark = pytest.mark.exact


class _Pipeline:
    kind = "pipeline"


def test_each_subject_has_one_contract():
    assert contract_of(batched_adapter()) == CHAIN and contract_of(batched_adapter().verify) == CHAIN
    assert contract_of(batched_tree_adapter("rsd")) == TREE
    assert contract_of(_Pipeline()) == PIPELINE


def test_run_checks_a_tree_verifier():
    report = run(batched_tree_adapter("mss"), scenarios=["tree_star_cf"], rows=512)
    assert report.adapter.kind == "tree" and report.scenarios["tree_star_cf"]["rows"] == 512, report.summary()


def test_a_sharded_tree_run_is_a_usage_error(tmp_path):
    result = subprocess.run([sys.executable, "-m", "specref.cli", "conform", "tree-rsd", "--rows", "3000", "--shard",
                             "0/2", "--report", str(tmp_path / "r")], capture_output=True, text=True, timeout=300,
                            env=os.environ)  # fmt: skip
    assert result.returncode == 2 and "run trees unsharded" in result.stderr, result.stderr
