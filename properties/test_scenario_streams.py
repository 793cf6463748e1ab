"""Scenarios draw from streams derived from their own names, and declare their features as flags.

Adding a scenario anywhere in the catalogue, or removing one, changes no other scenario's rows, bit for bit; and no
code reads a feature from a scenario's name.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from specref.conformance.chain import scenarios as chain
from specref.conformance.tree import scenarios as tree

pytestmark = pytest.mark.exact


def _arrays(s) -> list[np.ndarray]:
    return [s.target, s.draft, s.next_state]


def _with_new_first(catalogue: dict, name: str, make) -> dict:
    return {name: make, **catalogue}


@pytest.mark.parametrize("module", [chain, tree], ids=["chain", "tree"])
def test_adding_or_removing_a_scenario_changes_no_other_scenario(module):
    some = next(iter(module.CATALOGUE.values()))
    before = module.build()
    added = module.build(_with_new_first(module.CATALOGUE, "a_new_scenario", some))
    removed = module.build({name: make for i, (name, make) in enumerate(module.CATALOGUE.items()) if i != 1})
    assert list(added)[1:] == list(before)
    for name, s in before.items():
        for a, b in zip(_arrays(s), _arrays(added[name])):
            assert a.tobytes() == b.tobytes(), name
        if name in removed:
            for a, b in zip(_arrays(s), _arrays(removed[name])):
                assert a.tobytes() == b.tobytes(), name
    # the new one has its own stream: another name, other rows
    first = next(iter(before))
    assert not np.array_equal(added["a_new_scenario"].target, before[first].target) or first == "a_new_scenario"


def test_streams_come_from_the_name_not_from_python_hash():
    """PCG64 seeded by crc32 of the name: the same in every process (PYTHONHASHSEED plays no part)."""
    a, b = chain.scenario_rng("cf_dense_g4").random(4), chain.scenario_rng("cf_dense_g4").random(4)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, chain.scenario_rng("cf_dense_g5").random(4))
    source = Path(chain.__file__).read_text() + Path(tree.__file__).read_text()
    assert "hash(" not in source


def test_features_are_flags_never_name_prefixes():
    assert chain.get("joint_markov_g2").joint and "joint" in chain.get("joint_markov_g2").features
    assert chain.get("ragged_g6").features == ["ragged"]
    assert "mixed" in chain.get("mixed_batch_g3").features
    assert tree.get("tree_joint_markov").joint
    root = Path(chain.__file__).parents[1]
    features = "joint|ragged|point|probe|identical|large|tree|cf|markov|mixed"
    prefix = re.compile(r"""(name|scenario|\])\.startswith\(\s*["'](""" + features + ")")
    offenders = [str(p) for p in root.rglob("*.py") if prefix.search(p.read_text())]
    assert not offenders, offenders
