"""The tree harness's certain parts: scenarios draft by the reference's law layout, the T0 checks flag what they
must, the packed call carries a tree through the chain harness's Caller, and the expected laws are the exact ones."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from cli_in_process import conform

from specref.conformance.contracts import contract
from specref.conformance.engine.calls import Caller
from specref.conformance.tree import builtin_tree_adapters, run_tree
from specref.conformance.tree.adapters import TreeAdapter
from specref.conformance.tree.checks import TreeTally, tree_t0
from specref.conformance.tree.scenarios import EAGLE, SCENARIOS, get, layout
from specref.exact_tree import tv_from_target
from specref.outputs import REPORTS

pytestmark = pytest.mark.exact


def test_layout_is_breadth_first():
    assert layout(EAGLE) == [0, 0, 0, 1, 1, 2, 4]
    assert layout((((),),)) == [0, 1]


@pytest.mark.parametrize("scheme", ["iid", "without_replacement", "dedup", "topk"])
def test_inputs_follow_the_scheme(scheme):
    s = get("tree_duplicates_cf").given(torch.float64)
    batch = s.inputs(2000, 0, 0, scheme)
    real = batch.parents >= 0
    assert ((batch.draft_tokens >= 0) == real).all()
    siblings = layout(s.shapes[0])
    duplicates = 0
    for b in range(200):
        for parent in set(siblings):
            kids = [batch.draft_tokens[b, i] for i, p in enumerate(batch.parents[b]) if p == parent]
            duplicates += len(kids) - len(set(kids))
    if scheme == "iid":
        assert duplicates > 0  # a peaked q repeats
    else:
        assert duplicates == 0
    if scheme == "topk":
        order = np.argsort(-s.draft[0], kind="stable")
        assert (batch.draft_tokens[:, :3] == order[:3]).all()
    if scheme == "dedup":
        assert (~real).any()  # merged repeats become padding, with their subtrees
        child_of_padding = real & ~np.take_along_axis(
            np.concatenate([np.ones((2000, 1), bool), real], 1), np.maximum(batch.parents, 0), 1
        )
        assert not child_of_padding.any()


def test_target_rows_follow_the_context():
    s = get("tree_eagle_markov").given(torch.float64)
    batch = s.inputs(64, 0, 0, "iid")
    for i, parent in enumerate(layout(EAGLE), start=1):
        token = batch.draft_tokens[:, i - 1]
        assert np.array_equal(batch.target_probs[:, i], s.target[token])  # state = the node's token
        assert np.array_equal(batch.draft_probs[:, i - 1], s.draft[batch.states[:, parent]])


def _batch():
    """Rows whose path 0 -> 1 -> 4 has drafts of positive target probability."""
    s = get("tree_eagle_markov").given(torch.float64)
    batch = s.inputs(400, 3, 0, "iid")
    rows = np.arange(400)
    ok = (batch.target_probs[rows, 0, batch.draft_tokens[:, 0]] > 0) & (
        batch.target_probs[rows, 1, batch.draft_tokens[:, 3]] > 0
    )
    keep = np.flatnonzero(ok)[:8]
    assert keep.size == 8
    for field in ("target_probs", "draft_probs", "draft_tokens", "parents", "states", "shape_index"):
        setattr(batch, field, getattr(batch, field)[keep])
    return s, batch


def test_t0_accepts_a_true_path_and_flags_a_false_one():
    s, batch = _batch()
    node = 4  # parent 1: path 0 -> 1 -> 4
    tokens = np.full((8, 8), -1)
    tokens[:, 0], tokens[:, 1] = batch.draft_tokens[:, 0], batch.draft_tokens[:, 3]
    tokens[:, 2] = batch.target_probs[:, node].argmax(1)  # a token of positive probability at node 4
    nodes = np.full((8, 7), -1)
    nodes[:, 0], nodes[:, 1] = 1, node
    for given in (nodes, None):
        checks, accepted, stop = tree_t0(batch, tokens, given, batch.target_probs, s.vocab_size)
        assert not any(bad.any() for bad in checks.values())
        assert (accepted == 2).all() and (stop == node).all()
    wrong = nodes.copy()
    wrong[:, 1] = 6  # node 6's parent is 2, not 1
    checks, *_ = tree_t0(batch, tokens, wrong, batch.target_probs, s.vocab_size)
    assert checks["t0_root_to_node"].all()
    zero = tokens.copy()
    zero[:, 2] = batch.target_probs[:, node].argmin(1)  # every Markov row has one token of probability 0
    checks, *_ = tree_t0(batch, zero, nodes, batch.target_probs, s.vocab_size)
    assert checks["t0_zero_prob_emitted"].all()


def test_expected_laws_are_exact_and_lossless():
    for name in ("tree_eagle_markov", "tree_duplicates_cf"):
        s = get(name).given(torch.float32)
        target, _ = s.models()
        for scheme, rule in (("iid", "mss"), ("without_replacement", "rsd"), ("topk", "target_only")):
            assert tv_from_target(s.cycle_law(0, scheme, rule), target, ()) == 0
            tally = TreeTally(s, scheme, rule)
            assert np.isclose(tally.expected_length().sum(), 1.0)
            assert all(np.isclose(row.sum(), 1.0) for row in tally.expected_last().values())


def test_caller_carries_a_tree_and_a_failure():
    s = get("tree_eagle_markov").given(torch.float32)
    batch = s.inputs(64, 0, 0, "iid")
    with Caller(
        builtin_tree_adapters()["tree-mss"](), contract("tree")
    ) as caller:  # the tree contract's call (tree/contract.py)
        (tokens, nodes), seen, _ = caller(batch, 7, timeout=60)
    assert tokens.shape == (64, 8) and nodes.shape == (64, 7)
    checks, *_ = tree_t0(batch, tokens, nodes, seen[0], s.vocab_size)
    assert not any(bad.any() for bad in checks.values())

    def broken(target_probs, draft_probs, draft_tokens, parents, generator=None):
        raise RuntimeError("boom")

    report = run_tree(TreeAdapter("broken", broken), rows=300, scenarios=["tree_star_cf"], budget_seconds=60)
    assert not report.passed and "adapter" in report.caught_by()


def test_chain_adapter_runs_chain_scenarios_only():
    from specref.conformance.tree.contract import TREE_CONTRACT

    names = {s.name for s in TREE_CONTRACT.scenarios(builtin_tree_adapters()["tree-chain-batched"]())}
    assert names == {n for n, s in SCENARIOS.items() if s.chains_only} and "tree_eagle_markov" not in names


def test_cli_detects_runs_and_lists_trees(tmp_path, capsys):
    from specref.conformance.cli import list_builtins

    listing = list_builtins()
    assert "  tree-mss " in listing and "  tree-target-only " in listing
    code, _, err = conform("batched", "--tree", cwd=tmp_path, capsys=capsys)
    assert code == 2 and "is a chain built-in" in err
    impl = tmp_path / "mine.py"
    impl.write_text(  # a user's tree verifier, detected by kind = "tree"; it emits the root's argmax: wrong law
        "import torch\n"
        "class Mine:\n"
        "    kind, rule, scheme = 'tree', 'mss', 'iid'\n"
        "    def verify(self, target_probs, draft_probs, draft_tokens, parents, generator=None):\n"
        "        return target_probs[:, 0].argmax(-1, keepdim=True)\n"
        "mine = Mine()\n"
    )
    args = ("--rows", "300", "--scenarios", "tree_star_cf", "--no-plots")
    code, out, err = conform(f"{impl}:mine", *args, cwd=tmp_path, capsys=capsys)
    assert code == 1 and "first_token_law[tree_star_cf]" in out, out + err
    code, out, err = conform("tree-mss", *args, cwd=tmp_path, capsys=capsys)
    assert code == 0 and "LOSSLESS (DECLARED RULE MSS)" in out, out + err
    assert (tmp_path / REPORTS / "tree-mss" / "report.md").exists()


def test_coupling_matches_the_reference_and_has_teeth():
    from dataclasses import replace

    from specref.mutants.trees import MUTANTS

    good = run_tree(builtin_tree_adapters()["tree-rsd"](), rows=256, scenarios=["tree_star_cf"], budget_seconds=120)
    coupling = [r for r in good.checks if r.name.startswith("coupling")]
    assert coupling and coupling[0].passed and coupling[0].n > 0
    bad = replace(MUTANTS["wrong_parent_row"](), uniforms=True)  # its wrong rows change tokens under fixed uniforms
    report = run_tree(bad, rows=256, scenarios=["tree_star_cf"], budget_seconds=120)
    assert "coupling" in report.caught_by()


def test_exact_node_acceptance_sums_to_the_accepted_length():
    from fractions import Fraction

    from specref.conformance.tree.picture import exact_node_acceptance, slot_paths
    from specref.exact_tree import expected_accepted
    from specref.theory_tree import deterministic_expected_accepted

    s = get("tree_eagle_markov").given(torch.float64)
    per_node = exact_node_acceptance(s, 0, "topk", "target_only")
    assert np.isclose(per_node.sum(), float(expected_accepted(s.cycle_law(0, "topk", "target_only"))))
    # deterministic tree: E[A] = sum over nodes of the target probability of the node's path (closed form)
    target, draft = s.models()
    paths = []
    for slots in slot_paths(EAGLE):
        tokens: tuple = ()
        for rank in slots:
            q = draft(tokens)
            tokens += (sorted((y for y in range(s.vocab_size) if q[y] > 0), key=lambda y: (-q[y], y))[rank],)
        paths.append(tokens)
    closed = deterministic_expected_accepted(target, (), paths)
    assert isinstance(closed, Fraction)
    assert np.isclose(per_node.sum(), float(closed))


def test_a_tree_failure_carries_a_snippet_that_rebuilds_its_call(tmp_path, capsys):
    import json
    import re

    impl = tmp_path / "noisy.py"
    impl.write_text(  # emits a random id in [0, V]: V is out of range on some rows, which rows the generator decides
        "import torch\n"
        "def verify(target_probs, draft_probs, draft_tokens, parents, generator=None):\n"
        "    v = target_probs.shape[-1]\n"
        "    return torch.randint(0, v + 1, (len(draft_tokens), 1), generator=generator)\n"
    )
    args = ("--tree", "--rows", "600", "--scenarios", "tree_eagle_markov", "--no-plots", "--seed", "3")
    code, out, err = conform(f"{impl}:verify", *args, cwd=tmp_path, capsys=capsys)
    folder = tmp_path / REPORTS / "noisy.verify"
    record = json.loads((folder / "report.json").read_text())
    (check,) = [c for c in record["checks"] if c["name"] == "t0_valid_ids[tree_eagle_markov]"]
    example = check["details"]["example"]
    assert code == 1 and not check["passed"] and example["chunk"] >= 0, out + err
    markdown = (folder / "report.md").read_text()
    assert "the drafts of a root-to-node path" in markdown  # the tree wording of t0_prefix_is_drafts
    code_block = re.search(r"Reproduce:\n\n```python\n(.*?)```", markdown, re.S).group(1)
    assert "tree_call_inputs" in code_block and "scheme='iid'" in code_block
    scope: dict = {}
    exec(code_block, scope)  # the spec is an absolute path: no chdir needed
    assert scope["out"][example["row"]].tolist() == example["output"][:1]
    assert scope["out"][example["row"]].item() == get("tree_eagle_markov").vocab_size
