"""Tree runs shard and merge as chain runs do (one harness): N shards of a tree run, merged, give the report of one
unsharded run bit for bit (statistics, p-values, Holm, verdict, rule diagnosis; wall times aside).

All exact: every call's inputs and generator seed derive from (seed, scenario, chunk), so the comparison is of two
deterministic computations, and no alpha is spent here. The joint tree scenario is included (its batches of chained
calls are shard units), and a failing tree mutant shows that a merged failure equals one run's.
"""

from __future__ import annotations

import pytest
from test_shards import comparable, shards_of

from specref.conformance import run
from specref.conformance.engine.report import NON_CONFORMING
from specref.conformance.shards import merge_records
from specref.conformance.tree import builtin_tree_adapters
from specref.mutants.trees import MUTANTS

pytestmark = pytest.mark.exact

# tree_eagle_markov at 5000 rows: chunk 0 (256 rows) and two main-pass chunks; tree_joint_markov two joint batches
SCENARIOS = ["tree_star_cf", "tree_eagle_markov", "tree_joint_markov", "tree_ragged_markov"]
ROWS = 5000


@pytest.mark.parametrize("impl", ["tree-target-only", "wrong_parent_row"])
def test_three_merged_tree_shards_equal_one_tree_run_bit_for_bit(impl):
    verify = builtin_tree_adapters()[impl]() if impl in builtin_tree_adapters() else MUTANTS[impl]()
    kwargs = {"seed": 3, "rows": ROWS, "scenarios": SCENARIOS, "budget_seconds": 3600.0}
    one = run(verify, **kwargs)
    shards = shards_of(verify, 3, **kwargs)
    assert all(record["contract"] == "tree" for _, record in shards)
    assert sum(record["shard"]["calls"]["tree_eagle_markov"]["count"] for _, record in shards) == 3  # chunks 0..2
    merged, _ = merge_records(shards[::-1])  # in any order
    assert merged.verdict == one.verdict
    assert comparable(merged) == comparable(one)
    if impl == "wrong_parent_row":
        assert one.verdict == NON_CONFORMING
    else:
        assert one.passed, one.summary()
        picture = merged.scenarios["tree_eagle_markov"]["node_acceptance"]  # top-k trees are pictured: its counts too
        assert picture == one.scenarios["tree_eagle_markov"]["node_acceptance"]
