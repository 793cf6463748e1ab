"""T0 checks of the batched tree and block engines on the device: coupling with the reference engines, determinism,
low-precision inputs with zero-probability tokens, and the EAGLE-like tree of the benchmark."""

from __future__ import annotations

import pytest
import torch

from specref import batched, tree_contract, tree_inputs
from specref.batched import block as batched_block
from specref.batched import tree as batched_tree
from specref.randomness import Injected, inverse_cdf
from specref.reference import block, tree

pytestmark = pytest.mark.exact

SCHEME_FOR = {"mss": "iid", "rsd": "without_replacement", "target_only": "topk", "sample_match": "iid"}


def _rows(gen, shape, device, zeros=0.3, dtype=torch.float64):
    logits = torch.randn(shape, generator=gen, device=device, dtype=torch.float64) * 2
    logits[torch.rand(shape, generator=gen, device=device) < zeros] = float("-inf")
    logits[..., 0] = 0.0
    return torch.softmax(logits, dim=-1).to(dtype)


def _tree_batch(device, rule, batch, num_nodes, vocab_size, seed, dtype=torch.float64):
    gen = torch.Generator(device=device).manual_seed(seed)
    parents = tree_inputs.random_parents(batch, num_nodes, 3, torch.Generator().manual_seed(seed)).to(device)
    target_probs = _rows(gen, (batch, num_nodes + 1, vocab_size), device, dtype=dtype)
    zeros = 0.0 if rule == "rsd" else 0.3  # without replacement: q's support covers every node's width
    draft_rows = _rows(gen, (batch, num_nodes + 1, vocab_size), device, zeros=zeros, dtype=dtype)
    draft_probs, draft_tokens = tree_inputs.draft_children(draft_rows, parents, SCHEME_FOR[rule], gen)
    return target_probs, None if rule == "target_only" else draft_probs, draft_tokens, parents


@pytest.mark.parametrize("vocab_size", [7, 257, pytest.param(8193, marks=pytest.mark.slow)])
@pytest.mark.parametrize("rule", batched_tree.RULES)
def test_tree_engine_couples_with_reference_on_device(device, rule, vocab_size):
    """float64 on the device; on CUDA partial sums come from a parallel scan, so a tie within ~1e-16 of a threshold
    could in principle differ from the sequential reference (odds ~V * 1e-16 per draw)."""
    batch, num_nodes = 48, 8
    inputs = _tree_batch(device, rule, batch, num_nodes, vocab_size, seed=vocab_size)
    uniforms = torch.rand(batch, num_nodes + 1, generator=torch.Generator(device=device).manual_seed(1),
                          device=device, dtype=torch.float64)  # fmt: skip
    uniforms[::7] = 0.0
    tokens, nodes = batched_tree.verify_tree(*inputs, rule=rule, uniforms=uniforms, return_nodes=True)
    target_probs, draft_probs, draft_tokens, parents = (None if t is None else t.cpu() for t in inputs)
    for b in range(batch):
        expected, expected_nodes = tree.verify_tree(
            target_probs[b].tolist(), None if draft_probs is None else draft_probs[b].tolist(),
            draft_tokens[b].tolist(), parents[b].tolist(), tree.uniforms_rng(rule, uniforms[b].tolist()), rule=rule,
            return_nodes=True,
        )  # fmt: skip
        row = tokens[b].cpu()
        assert row[: len(expected)].tolist() == expected and bool((row[len(expected) :] == -1).all()), b
        assert [n for n in nodes[b].tolist() if n >= 0] == expected_nodes, b


@pytest.mark.parametrize("vocab_size", [7, 1000])
def test_block_engine_couples_with_reference_on_device(device, vocab_size):
    gen = torch.Generator(device=device).manual_seed(vocab_size)
    batch, gamma = 64, 4
    target_probs = _rows(gen, (batch, gamma + 1, vocab_size), device)
    draft_probs = _rows(gen, (batch, gamma, vocab_size), device)
    draft_tokens = torch.multinomial(draft_probs.view(-1, vocab_size), 1, generator=gen).view(batch, gamma)
    num_draft = torch.arange(batch, device=device) % (gamma + 1)
    uniforms = torch.rand(batch, gamma + 1, generator=gen, device=device, dtype=torch.float64)
    tokens = batched_block.verify_block(target_probs, draft_probs, draft_tokens, num_draft=num_draft, uniforms=uniforms)
    for b in range(batch):
        n = int(num_draft[b])
        u = uniforms[b, :n].tolist() + [float(uniforms[b, gamma])]
        p = target_probs[b, : n + 1].cpu().tolist()
        if n == 0:
            expected = [inverse_cdf(p[0], u[-1])]
        else:
            q, x = draft_probs[b, :n].cpu().tolist(), draft_tokens[b, :n].tolist()
            expected = block.verify_block(p, q, x, Injected(u))
        assert tokens[b, : len(expected)].tolist() == expected, b


@pytest.mark.parametrize("rule", batched_tree.RULES)
def test_seeded_and_row_independent(device, rule):
    batch = 128 if device.type == "cuda" else 48
    inputs = _tree_batch(device, rule, batch, 10, 300, seed=3, dtype=torch.float32)

    def run(seed, **kwargs):
        gen = torch.Generator(device=device).manual_seed(seed)
        return batched_tree.verify_tree(*inputs, gen, rule=rule, **kwargs)

    assert torch.equal(run(1), run(1)) and not torch.equal(run(1), run(2))
    uniforms = batched.draw_uniforms(batch, 10, torch.Generator(device=device).manual_seed(1), device)
    assert torch.equal(run(1), batched_tree.verify_tree(*inputs, rule=rule, uniforms=uniforms))
    half = [t if t is None else t[::2] for t in inputs]
    width = run(1).shape[1]
    got = batched_tree.verify_tree(*half, rule=rule, uniforms=uniforms[::2])
    assert torch.equal(got, run(1)[::2, : got.shape[1]]) and bool((run(1)[::2, got.shape[1] : width] == -1).all())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
@pytest.mark.parametrize("rule", batched_tree.RULES)
def test_low_precision_large_vocab_emits_possible_tokens(device, rule, dtype):
    """Odd ids have target probability 0: no rule may emit one, whatever the dtype."""
    vocab_size = 151936 if device.type == "cuda" else 4099
    batch, num_nodes = (64, 12) if device.type == "cuda" else (8, 6)
    target_probs, draft_probs, draft_tokens, parents = _tree_batch(device, rule, batch, num_nodes, vocab_size, 9,
                                                                   dtype=torch.float32)  # fmt: skip
    target_probs[..., 1::2] = 0
    target_probs = (target_probs / target_probs.sum(-1, keepdim=True)).to(dtype)
    draft_probs = None if draft_probs is None else draft_probs.to(dtype)
    gen = torch.Generator(device=device).manual_seed(4)
    tokens = batched_tree.verify_tree(target_probs, draft_probs, draft_tokens, parents, gen, rule=rule).cpu()
    last = tokens.gather(1, ((tokens >= 0).sum(1) - 1)[:, None])[:, 0]
    assert bool(((last >= 0) & (last < vocab_size) & (last % 2 == 0)).all())


@pytest.mark.slow
@pytest.mark.parametrize("rule", batched_tree.RULES)
def test_eagle_like_tree_of_the_benchmark(device, rule):
    """B = 64, 60 nodes, depth 6, V = 32000, fp32: accepted nodes form root-to-node paths whose tokens are emitted."""
    from specref.batched.bench_tree import RULE_SCHEME, make_tree_inputs

    target, draft, tokens, parents = make_tree_inputs(64, 32000, RULE_SCHEME[rule], device)
    q = draft if rule in ("mss", "rsd") else None
    out, nodes = batched_tree.verify_tree(target, q, tokens, parents, torch.Generator(device=device).manual_seed(0),
                                          rule=rule, return_nodes=True)  # fmt: skip
    assert out.shape == (64, 7) and nodes.shape == (64, 6)
    accepted = (nodes >= 0).sum(1)
    assert torch.equal((out >= 0).sum(1), accepted + 1)
    parent_of = torch.cat([torch.zeros(64, 1, dtype=torch.long, device=device), parents], 1)  # [B, N+1]
    previous = torch.cat([torch.zeros(64, 1, dtype=torch.long, device=device), nodes[:, :-1]], 1)
    on_path = nodes >= 0
    assert bool((parent_of.gather(1, nodes.clamp(min=0)) == previous)[on_path].all())
    assert bool((tokens.gather(1, (nodes - 1).clamp(min=0)) == out[:, :6])[on_path].all())
    assert tree_contract.structure(parents).max_depth == 6
