"""T0 checks of the batched engine on the device: coupling with the reference, determinism, dtypes, zero edges."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
import torch
from gpu_budget import TOTAL

from specref import batched, randomness, reference

pytestmark = pytest.mark.exact


def _rows(gen: torch.Generator, shape, device, zeros=0.3, dtype=torch.float64) -> torch.Tensor:
    logits = torch.randn(shape, generator=gen, device=device, dtype=torch.float64) * 2
    logits[torch.rand(shape, generator=gen, device=device) < zeros] = float("-inf")
    logits[..., 0] = 0.0  # at least one positive entry per row
    return torch.softmax(logits, dim=-1).to(dtype)


@pytest.mark.parametrize("vocab_size", [1, 7, 257, 8193])
def test_coupled_with_reference_through_injected_uniforms(device, vocab_size):
    """float64 on the device; on CUDA the partial sums come from a parallel scan, so a tie within ~1e-16 of a
    threshold could in principle differ from the sequential reference (never seen; the odds are ~V * 1e-16)."""
    gen = torch.Generator(device=device).manual_seed(vocab_size)
    batch, gamma = 64, 4
    target_probs = _rows(gen, (batch, gamma + 1, vocab_size), device)
    draft_probs = _rows(gen, (batch, gamma, vocab_size), device)
    draft_tokens = torch.multinomial(draft_probs.view(-1, vocab_size), 1, generator=gen).view(batch, gamma)
    num_draft = torch.arange(batch, device=device) % (gamma + 1)
    draft_tokens[torch.arange(gamma, device=device) >= num_draft[:, None]] = -1
    uniforms = torch.rand(batch, gamma + 1, generator=gen, device=device, dtype=torch.float64)
    uniforms[::7] = 0.0
    for q in (draft_probs, None):
        tokens = batched.verify(target_probs, q, draft_tokens, num_draft=num_draft, uniforms=uniforms).cpu()
        for b in range(batch):
            n, u = int(num_draft[b]), uniforms[b].tolist()
            p_rows = target_probs[b, : n + 1].cpu().tolist()
            if n == 0:
                expected = [randomness.inverse_cdf(p_rows[0], u[-1])]
            else:
                q_rows = None if q is None else q[b, :n].cpu().tolist()
                expected = reference.verify(p_rows, q_rows, draft_tokens[b, :n].tolist(), randomness.Injected(u))
            assert tokens[b, : len(expected)].tolist() == expected and bool((tokens[b, len(expected) :] == -1).all())


def test_seeded_generators_are_deterministic(device):
    gen = torch.Generator(device=device).manual_seed(0)
    target_probs = _rows(gen, (512, 5, 1000), device, dtype=torch.float32)
    draft_probs = _rows(gen, (512, 4, 1000), device, dtype=torch.float32)
    draft_tokens = torch.multinomial(draft_probs.view(-1, 1000), 1, generator=gen).view(512, 4)

    def run(seed):
        return batched.verify(target_probs, draft_probs, draft_tokens, torch.Generator(device=device).manual_seed(seed))

    assert torch.equal(run(1), run(1)) and not torch.equal(run(1), run(2))
    uniforms = batched.draw_uniforms(512, 4, torch.Generator(device=device).manual_seed(1), device)
    assert torch.equal(run(1), batched.verify(target_probs, draft_probs, draft_tokens, uniforms=uniforms))
    # With injected uniforms, a row's tokens do not depend on the rest of the batch.
    half = batched.verify(target_probs[::2], draft_probs[::2], draft_tokens[::2], uniforms=uniforms[::2])
    assert torch.equal(half, run(1)[::2])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_large_vocab_low_precision_valid_ids(device, dtype):
    vocab_size, batch, gamma = 151936, 64 if device.type == "cuda" else 8, 3
    gen = torch.Generator(device=device).manual_seed(3)
    target_probs = _rows(gen, (batch, gamma + 1, vocab_size), device, zeros=0.0, dtype=torch.float32)
    target_probs[..., 1::2] = 0  # odd ids impossible under the target
    target_probs = (target_probs / target_probs.sum(-1, keepdim=True)).to(dtype)
    draft_probs = _rows(gen, (batch, gamma, vocab_size), device, zeros=0.0, dtype=dtype)
    draft_tokens = torch.multinomial(draft_probs.float().view(-1, vocab_size), 1, generator=gen).view(batch, gamma)
    tokens = batched.verify(target_probs, draft_probs, draft_tokens, gen).cpu()
    emitted = [row[:n] for row, n in zip(tokens.tolist(), batched.num_emitted(tokens).tolist(), strict=True)]
    assert all(0 <= t < vocab_size and t % 2 == 0 for row in emitted for t in row)


@pytest.mark.parametrize("vocab_size", [8193, 151936])
@pytest.mark.parametrize("u", [0.0, 0.5, float(np.nextafter(np.float32(1), np.float32(0)))])
def test_empty_residual_and_zero_tokens_on_device(device, vocab_size, u):
    gen = torch.Generator(device=device).manual_seed(vocab_size)
    target_probs = _rows(gen, (4, 2, vocab_size), device, zeros=0.0, dtype=torch.float32)
    target_probs[:, :, :50] = 0
    target_probs[:, :, -50:] = 0
    draft_probs = target_probs[:, :1].clone()
    draft_tokens = target_probs[:, 0].argmax(-1, keepdim=True)
    top = target_probs[:, 0].gather(1, draft_tokens)
    target_probs[:, 0].scatter_(1, draft_tokens, torch.nextafter(top, torch.zeros_like(top)))  # ratio just below 1
    uniforms = torch.tensor([[1.0 - 2**-24, u]], device=device).expand(4, 2)
    tokens = batched.verify(target_probs, draft_probs, draft_tokens, uniforms=uniforms, validate=False)
    final = tokens[:, 0]
    assert bool((tokens[:, 1] == -1).all()) and bool(((final >= 0) & (final < vocab_size)).all())
    assert bool((target_probs[:, 0].gather(1, final[:, None]) > 0).all())
    zero_drafts = torch.zeros_like(draft_tokens)  # p(0) = 0: never accepted, even with u = 0
    zero_u = torch.zeros(4, 2, device=device)
    flat_q = torch.full((4, 1, vocab_size), 1 / vocab_size, device=device)
    tokens = batched.verify(target_probs, flat_q, zero_drafts, uniforms=zero_u, validate=False)
    assert bool((tokens[:, 0] != 0).all()) and bool((tokens[:, 1] == -1).all())


def test_cpu_pass_alpha_matches_properties_budget():
    path = Path(__file__).parents[1] / "properties" / "budget.py"
    spec = importlib.util.spec_from_file_location("properties_budget", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.SHARES["gpu_cpu_pass"] == TOTAL["cpu"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("point_mass", [False, True])
def test_fused_block_sums_match_torch_and_draw_the_same_tokens(device, dtype, point_mass, monkeypatch):
    """The device's fused kernel (Triton on CUDA, C on CPU) against torch operations: block sums within rounding,
    and the engine's tokens equal on these seeded rows (only the order of summation inside a block differs)."""
    from specref.batched import draw as batched_draw
    from specref.batched import kernels

    status = kernels.status(device)
    if not status.startswith(("triton", "compiled")):
        pytest.skip(f"no fused kernel on {device}: {status}")
    gen = torch.Generator(device=device).manual_seed(17)
    batch, gamma, vocab_size = 512, 4, 151936 if device.type == "cuda" else 3001
    target_probs = _rows(gen, (batch, gamma + 1, vocab_size), device, dtype=dtype)
    draft_probs = _rows(gen, (batch, gamma, vocab_size), device, dtype=dtype)
    draft_tokens = torch.multinomial(draft_probs.view(-1, vocab_size).float(), 1, generator=gen).view(batch, gamma)
    if point_mass:
        draft_probs = None
    uniforms = torch.rand(batch, gamma + 1, generator=gen, device=device)
    target_row = torch.randint(0, gamma + 1, (batch,), generator=gen, device=device)
    has_draft = target_row < gamma
    no_row = torch.full_like(target_row, -1)
    draft_row = no_row if point_mass else torch.where(has_draft, target_row, -1)
    removed = torch.where(has_draft, draft_tokens[:, 0], -1) if point_mass else no_row
    final = batched_draw.FinalRows(target_probs, draft_probs, target_row, draft_row, removed)
    fused = kernels.block_sums(*final, batched_draw.BLOCK)
    expected = batched_draw._block_sums(batched_draw.full_weights(final, torch.float32)).double()
    assert torch.allclose(fused, expected, rtol=1e-5, atol=1e-12)
    with_kernel = batched.verify(target_probs, draft_probs, draft_tokens, uniforms=uniforms)
    monkeypatch.setattr(kernels, "ENABLED", False)
    assert torch.equal(batched.verify(target_probs, draft_probs, draft_tokens, uniforms=uniforms), with_kernel)


def test_fused_block_sums_at_offsets_past_two_to_the_31(device):
    """A selected row that starts past 2^31 elements (bf16 [2, 8000, 151936], 4.9 GB): 64-bit offsets."""
    from specref.batched import draw as batched_draw
    from specref.batched import kernels

    if device.type != "cuda":
        pytest.skip("needs 4.9 GB of device memory: CUDA only")
    status = kernels.status(device)
    if not status.startswith("triton"):
        pytest.skip(f"no fused kernel on {device}: {status}")
    vocab_size = 151936
    target_probs = torch.zeros(2, 8000, vocab_size, dtype=torch.bfloat16, device=device)
    target_probs[1, 7999, ::2] = 1.0  # the last row, 2.43e9 elements in
    target_row = torch.tensor([0, 7999], device=device)
    no_row = torch.full_like(target_row, -1)
    final = batched_draw.FinalRows(target_probs, None, target_row, no_row, no_row)
    sums = kernels.block_sums(*final, batched_draw.BLOCK)
    assert (1 * 8000 + 7999) * vocab_size > 2**31
    assert float(sums[0].sum()) == 0 and float(sums[1].sum()) == vocab_size // 2
