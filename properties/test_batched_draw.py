"""T0 checks of the batched engine's final draw (`specref.batched.draw`) against independent oracles.

The kernel-versus-torch tests (test_batched_kernel.py) share the local-block weights (`weights_at`) and the
two-level search, and the float64 coupling tests never take the two-level path; these tests check both directly:
`weights_at` against `full_weights`, and the fp32 draw against an exact float64 scan over the same fp32 weights.
Deterministic (seeded), so no share of the budget.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from final_rows import final_rows

from specref import batched
from specref.batched import draw as batched_draw
from specref.batched import kernels

pytestmark = pytest.mark.exact

DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


CASES = list(itertools.product([1, 7, 256, 300], DTYPES, [False, True], [False, True], [1, 5]))


@pytest.mark.parametrize("vocab_size, dtype, point_mass, expanded, num_rows", CASES)
def test_weights_at_equals_full_weights(vocab_size, dtype, point_mass, expanded, num_rows):
    gen = torch.Generator().manual_seed(vocab_size * 7 + num_rows)
    final = final_rows(gen, 12, 3, vocab_size, dtype, point_mass, expanded, poison=True)
    compute = torch.float64 if dtype == torch.float64 else torch.float32
    full = batched_draw.full_weights(final, compute).clone()
    assert not bool(torch.isnan(full).any())  # unused draft rows are never read
    rows = torch.randperm(12, generator=gen)[:num_rows]
    every = batched_draw.weights_at(final, rows, None, compute)
    assert every.dtype == compute and torch.equal(every, full[rows])
    columns = torch.randint(0, vocab_size, (num_rows, 9), generator=gen)
    assert torch.equal(batched_draw.weights_at(final, rows, columns, compute), full[rows].gather(1, columns))


@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "torch_ops"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("vocab_size", [3, 200, 256, 700])
@pytest.mark.parametrize("point_mass", [False, True])
def test_two_level_draw_equals_an_exact_scan(monkeypatch, kernel, dtype, vocab_size, point_mass):
    """fp32 path: the token equals the float64 scan of the convention over the same fp32 weights (an empty row
    draws from the target row). Block sums may round differently from the scan only for u within a few 1e-7 of a
    block boundary, which these seeded 512 rows avoid."""
    monkeypatch.setattr(kernels, "ENABLED", kernel)
    gen = torch.Generator().manual_seed(vocab_size)
    final = final_rows(gen, 512, 3, vocab_size, dtype, point_mass)
    u = torch.rand(512, generator=gen)
    got = batched_draw.final_draw(final, u, torch.float32)
    expected = batched_draw._inverse_cdf_exact(batched_draw.full_weights(final, torch.float32).clone(), u)
    empty = (expected < 0).nonzero().squeeze(1)
    target_rows = final.target_probs[empty, final.target_row[empty]].float()
    expected[empty] = batched_draw._inverse_cdf_exact(target_rows, u[empty])
    assert torch.equal(got, expected)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("kernel", [True, False], ids=["kernel", "torch_ops"])
def test_a_rejected_point_mass_draft_is_never_the_correction(monkeypatch, dtype, kernel):
    monkeypatch.setattr(kernels, "ENABLED", kernel)
    target_probs = torch.tensor([[[0.5, 0.5], [0.5, 0.5]]], dtype=dtype)
    for u in (0.0, 0.3, 0.7, 0.999):  # u_0 = 0.7 >= p(0) = 0.5 rejects draft 0: only token 1 remains
        uniforms = torch.tensor([[0.7, u]], dtype=torch.float64 if dtype == torch.float64 else torch.float32)
        assert batched.verify(target_probs, None, torch.tensor([[0]]), uniforms=uniforms).tolist() == [[1, -1]]
