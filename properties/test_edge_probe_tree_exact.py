"""The forced edge probe on the tree contract (tree/contract.py: TreeContract.edge_probe): the chain probe's two
batches as one-node trees, read back through the tree's call form.

A tree verifier with SGLang's non-strict accept test (`coin <= prob_acc`, the mutant accept_le_fp32) is flagged by a
whole run with the rare-edge verdict, its line named and a snippet that shows it in one call; every correct tree
built-in passes, never fails; injected uniforms [B, N+1] reach an adapter whose generator cannot be forced.
"""

from __future__ import annotations

import contextlib
import inspect
import io
from dataclasses import replace

import numpy as np
import pytest
import torch

from specref.conformance import run
from specref.conformance.chain.scenarios import Batch
from specref.conformance.contracts import contract
from specref.conformance.edge_probe import probe_batch
from specref.conformance.edges.probe import ROWS, edge_probe
from specref.conformance.engine.calls import Caller
from specref.conformance.engine.report import RARE_EDGE
from specref.conformance.report.render import render_markdown
from specref.conformance.tree import builtin_tree_adapters
from specref.conformance.tree.contract import DESIGN
from specref.conformance.tree.scenarios import from_chain
from specref.mutants.trees import MUTANTS

pytestmark = pytest.mark.exact


def _probe(adapter, mode: str = "inline", inject: bool | None = None):
    with Caller(adapter, contract(adapter), mode=mode) as caller:
        return edge_probe(caller, 0, lambda: 120.0, DESIGN, inject=inject)


def _verdicts(probe) -> dict[str, str]:
    return {r.name.split("[")[1][:-1]: "not tested" if "not_tested" in r.details else ("pass" if r.passed else "FAIL")
            for r in probe.results}  # fmt: skip


def test_a_chain_batch_is_a_chain_tree():
    batch = Batch(np.zeros((2, 4, 3)), np.zeros((2, 3, 3)), np.array([[1, 2, 0], [2, 0, -1]]), np.array([3, 1]),
                  np.zeros((2, 4), dtype=np.int64))  # fmt: skip
    tree = from_chain(batch)
    assert tree.parents.tolist() == [[0, 1, 2], [0, -1, -1]]  # node i's parent is i - 1; past num_draft: padding
    assert tree.draft_tokens.tolist() == [[1, 2, 0], [2, -1, -1]]
    assert tree.target_probs is batch.target_probs and tree.draft_probs is batch.draft_probs
    probe = probe_batch("accept", torch.float32, tree=True)
    assert probe.parents.shape == (ROWS, 1) and (probe.parents == 0).all() and probe.target_probs.shape[1] == 2


def test_a_tree_verifier_with_the_edge_is_flagged_by_a_whole_run_with_its_line_and_snippet():
    report = run(MUTANTS["accept_le_fp32"](), scenarios=["tree_star_cf"], rows=2048, budget_seconds=120)
    assert report.verdict == RARE_EDGE and not report.passed
    assert report.caught_by() == ["rare_edge"]  # the law, the depths and the contract checks all pass
    summary = report.summary()
    assert "accepts a zero-probability draft" in summary and "2^-24 per accept test" in summary
    assert "specref/mutants/tree_bugs.py:" in summary and "coin <= ratio" in summary  # file:line and the code
    record = {**report.to_dict(), "spec": "specref.mutants.tree_bugs:tree_accept_le_fp32"}
    text = render_markdown(record)
    assert "## Rare edges (u = 0)" in text and "(one-node trees)" in text and "output law otherwise exact" in text
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    assert "tree_call_inputs" in code and "tree=True" in code and "nodes=True" in code
    namespace: dict = {}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(code, namespace)  # the snippet runs as a user would paste it
    row = report.checks[-1].details["forced_probe"]["edges"]["accept"]["row"]
    tokens, batch = namespace["tokens"][row].tolist(), namespace["batch"]
    assert tokens[0] == batch.draft_tokens[row, 0] and batch.target_probs[row, 0, tokens[0]] == 0  # accepted, p = 0


@pytest.mark.parametrize("name", list(builtin_tree_adapters()))
def test_correct_tree_builtins_pass_the_probe_never_fail_it(name):
    probe = _probe(builtin_tree_adapters()[name]())
    verdicts = _verdicts(probe)
    assert "FAIL" not in verdicts.values(), (name, probe.summary)
    assert not probe.summary["edges"]
    if "not tested" in verdicts.values():
        assert probe.summary["not_shown"].startswith("rare edge not shown")
    elif getattr(builtin_tree_adapters()[name](), "uniform_dtype", None) == torch.float64:
        # forced float32 zeros never make float64 draws 0: it is given a 0 through injected uniforms
        assert all(b == {"injected": True} for b in probe.summary["batches"].values()) and not probe.summary.get(
            "not_counted")  # fmt: skip
    else:
        assert all(b["outputs_read"] >= ROWS for b in probe.summary["batches"].values())


def test_the_tree_probe_costs_one_call_per_batch_for_a_verifier_without_the_edge():
    # its cost as a count of calls of 64 one-node trees (the time, as a ratio to a run's, is in docs/statistics.md)
    calls = []
    adapter = builtin_tree_adapters()["tree-mss"]()
    verify = adapter.verify

    def counted(*args, **kwargs):
        calls.append(1)
        return verify(*args, **kwargs)

    _probe(replace(adapter, verify=counted))
    assert len(calls) == 2


def test_injected_uniforms_show_the_tree_edge_where_the_generator_cannot_be_forced():
    mutant = replace(MUTANTS["accept_le_fp32"](), uniforms=True, uniform_dtype=torch.float32)
    assert _verdicts(_probe(mutant, inject=True)) == {"accept": "FAIL", "correction": "pass", "bonus": "pass"}
    for name in ("tree-mss", "tree-sample-match"):  # sample_match's root draw reads u_0: its correction column
        assert set(_verdicts(_probe(builtin_tree_adapters()[name](), inject=True)).values()) == {"pass"}


def test_edge_runs_count_verdicts_and_name_the_edge_per_engine():
    from specref.conformance.edge_runs import markdown, runs
    from specref.mutants import tree_bugs

    lines: list[str] = []
    summary = runs("specref.mutants.tree_bugs:tree_accept_le_fp32+tree", 1, 2.0, lines.append)
    assert summary["verdicts"] == {RARE_EDGE: 1} and summary["other_failures"] == {}
    source = inspect.getsource(tree_bugs).splitlines()
    line = next(number for number, text in enumerate(source, 1) if "coin <= ratio" in text)
    assert [n for key, n in summary["edges_named"].items() if f"tree_bugs.py:{line}: " in key] == [1]
    assert len(lines) == 1 and "| 1 | 2 | non-conforming: rare edge (1) |" in markdown([summary])


def test_edge_runs_probe_only_sweeps_seeds_with_the_probe_alone():
    from specref.conformance.edge_runs import markdown, probes

    flagged = probes("specref.mutants.tree_bugs:tree_accept_le_fp32+tree", 2, lambda line: None)
    correct = probes("tree-mss", 2, lambda line: None)
    assert flagged["verdicts"] == {"edge named": 2} and sum(flagged["edges_named"].values()) == 2
    assert correct["verdicts"] == {"passed": 2} and not correct["edges_named"]
    assert "| 2 | probe only | passed (2) |" in markdown([correct])


def test_sglang_tree_takes_injected_coins_in_its_own_convention_with_no_coupling_check(monkeypatch):
    """On CUDA the probe gives sglang-tree its zeros through uniforms (Philox cannot be forced): they reach the
    kernel's coins as given (column j node j's coin, column N the final draw), and the harness plans no coupling
    check (SGLang's one coin per node is not specref.reference.tree's convention). The kernel itself needs CUDA: a
    recording stand-in takes its place, so this is the adapter's plumbing only."""
    import sys
    import types

    from specref.conformance.peers.sglang import sglang_tree_adapter

    seen = {}

    def tree_speculative_sampling_target_only(**kwargs):
        seen.update(kwargs)

    monkeypatch.setitem(sys.modules, "sgl_kernel", types.SimpleNamespace(
        tree_speculative_sampling_target_only=tree_speculative_sampling_target_only))  # fmt: skip
    adapter = replace(sglang_tree_adapter(), device="cpu")
    assert adapter.uniforms and not adapter.coupled and adapter.uniform_dtype == torch.float32
    batch = probe_batch("accept", torch.float32, 4, 0, tree=True)
    coins = torch.tensor([[0.0, 0.5], [0.25, 0.0], [0.5, 0.5], [0.75, 0.125]])
    adapter.verify(torch.tensor(batch.target_probs), torch.tensor(batch.draft_probs),
                   torch.tensor(batch.draft_tokens), torch.tensor(batch.parents), None, uniforms=coins)  # fmt: skip
    assert torch.equal(seen["uniform_samples"], coins) and torch.equal(seen["uniform_samples_for_final_sampling"],
                                                                        coins[:, 1])  # fmt: skip
    for coupled in (True, False):
        with Caller(
            replace(builtin_tree_adapters()["tree-mss"](), coupled=coupled), contract("tree"), mode="inline"
        ) as caller:
            results, _ = caller.contract.run_checks(caller, types.SimpleNamespace(scenarios=[]), 0, None)
        assert [r.name.split("[")[0] for r in results] == ["reproducibility"] + ["coupling"] * coupled
