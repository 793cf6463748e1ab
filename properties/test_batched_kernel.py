"""T0 checks of the CPU kernel (`specref.batched.kernels`): it computes what the torch operations compute, and the
batched engine draws the same tokens with it and without it. Deterministic (seeded inputs), so no share of the budget.

If no C compiler is at hand, the tests that need the compiled kernel skip and say why; the fallback is tested
either way.
"""

from __future__ import annotations

import functools
import os
import shlex
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import torch
from final_rows import final_rows, random_rows

from specref import batched
from specref.batched import draw as batched_draw
from specref.batched import kernels
from specref.batched.draw import BLOCK
from specref.batched.kernels import cpu as cpu_kernel

pytestmark = pytest.mark.exact


@pytest.fixture
def compiled():
    if not kernels.ENABLED:
        pytest.skip("SPECREF_KERNELS=0")
    reason = kernels.status()
    if not reason.startswith("compiled"):
        pytest.skip(f"the C kernel is {reason}")


@pytest.fixture
def torch_path(monkeypatch):
    monkeypatch.setattr(kernels, "ENABLED", False)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_widening_is_exact_for_every_bit_pattern(compiled, dtype):
    """Each 16-bit pattern (subnormals, inf and NaN included) alone in a block of 8, so the vectorised loop reads
    it: as p (w = p), and as q under p = 0 (w = -q, which shows the negative half)."""
    patterns = torch.arange(2**16, dtype=torch.int32).to(torch.int16).view(dtype)
    spread = torch.zeros(2**16 * 8, dtype=dtype)
    spread[::8] = patterns
    target = spread.reshape(1, 1, -1).expand(1, 2, -1).contiguous()
    zero_target = torch.zeros_like(target)
    draft = spread.reshape(1, 1, -1).contiguous()
    no_row, row = torch.tensor([-1]), torch.tensor([0])
    widened = patterns.double()
    as_p = kernels.block_sums(target, None, row, no_row, no_row, block=8)[0]
    as_q = kernels.block_sums(zero_target, draft, row, row, no_row, block=8)[0]
    assert torch.equal(as_p, torch.where(widened > 0, widened, 0))  # NaN -> 0, negatives -> 0
    assert torch.equal(as_q, torch.where(-widened > 0, -widened, 0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("vocab_size", [1, 7, 256, 1000, 8193])
@pytest.mark.parametrize("point_mass", [False, True])
def test_block_sums_equal_torch_within_rounding(compiled, dtype, vocab_size, point_mass):
    gen = torch.Generator().manual_seed(vocab_size)
    final = final_rows(gen, 37, 3, vocab_size, dtype, point_mass)
    args = (final.target_probs, final.draft_probs, final.target_row, final.draft_row, final.removed, BLOCK)
    sums = kernels.block_sums(*args)
    expected = batched_draw._block_sums(batched_draw.full_weights(final, torch.float32)).double()
    assert sums.shape == expected.shape == (37, -(-vocab_size // BLOCK))
    # fp32 sums of <= 256 terms in either order: a few ulps of the block's mass
    assert torch.allclose(sums, expected, rtol=1e-5, atol=1e-12)
    assert bool((sums >= 0).all())
    rows = kernels.flat_rows(final.target_probs, final.target_row, final.draft_row)
    for threads in (1, 2, 3, 36, 37, 38, 200):  # each row's sums do not depend on how rows are split
        split = cpu_kernel.block_sums(final.target_probs, final.draft_probs, *rows, final.removed, BLOCK, threads)
        assert torch.equal(split, sums)


def test_placeholder_draft_rows_are_never_read(compiled):
    gen = torch.Generator().manual_seed(0)
    final = final_rows(gen, 16, 2, 500, torch.float32, point_mass=False)
    poisoned = final.draft_probs.clone()
    unused = torch.ones(16, 2, dtype=torch.bool)
    unused[final.draft_row >= 0, final.draft_row[final.draft_row >= 0]] = False
    poisoned[unused] = float("nan")
    clean = kernels.block_sums(*final[:2], *final[2:], BLOCK)
    assert torch.equal(kernels.block_sums(final.target_probs, poisoned, *final[2:], BLOCK), clean)


@functools.cache
def _seeded_float32_rows() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The next test's rows before their cast (random_rows works in fp32 and casts last), and the generator's state
    after them: 86 M values, 3.4 s to draw here, drawn once per worker instead of once per case."""
    gen = torch.Generator().manual_seed(11)
    batch, gamma, vocab_size = 4096, 3, 3000
    target = random_rows(gen, (batch, gamma + 1, vocab_size), torch.float32)
    draft = random_rows(gen, (batch, gamma, vocab_size), torch.float32)
    return target, draft, gen.get_state()


@functools.cache
def _seeded_rows(dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """The next test's inputs in dtype (shared by its two point_mass cases): rows, drafts, counts and uniforms."""
    target32, draft32, state = _seeded_float32_rows()
    gen = torch.Generator().set_state(state)
    batch, gamma, vocab_size = draft32.shape
    target, draft = target32.to(dtype), draft32.to(dtype)
    tokens = torch.multinomial(draft.view(-1, vocab_size).float(), 1, generator=gen).view(batch, gamma)
    num_draft = torch.randint(0, gamma + 1, (batch,), generator=gen)
    uniforms = torch.rand(batch, gamma + 1, generator=gen)
    return target, draft, tokens, num_draft, uniforms


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("point_mass", [False, True])
def test_engine_draws_the_same_tokens_with_and_without_the_kernel(compiled, monkeypatch, dtype, point_mass):
    """Only the order of summation inside a block differs, so a token can differ only where u lands within a few
    1e-7 of a block boundary: these seeded 4096 rows have none (a difference is a bug, not chance). Three paths:
    the whole chain in one C call, torch's accept tests with the C draw, torch alone."""
    target, draft, tokens, num_draft, uniforms = _seeded_rows(dtype)
    args = (target, None if point_mass else draft, tokens)
    calls = []
    for name in ("chain", "draw"):
        kernel = getattr(cpu_kernel, name)
        monkeypatch.setattr(
            cpu_kernel, name, lambda *a, name=name, kernel=kernel, **k: calls.append(name) or kernel(*a, **k)
        )
    with_kernel = batched.verify(*args, num_draft=num_draft, uniforms=uniforms)
    assert calls == ["chain"]  # the whole chain ran in C
    monkeypatch.setattr(kernels, "chain", lambda *args: None)
    assert torch.equal(batched.verify(*args, num_draft=num_draft, uniforms=uniforms), with_kernel)
    assert calls == ["chain", "draw"]  # torch's accept tests, then the C draw
    monkeypatch.setattr(kernels, "ENABLED", False)
    assert torch.equal(batched.verify(*args, num_draft=num_draft, uniforms=uniforms), with_kernel)
    assert calls == ["chain", "draw"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("vocab_size", [1, 7, 256, 1000, 8193])
@pytest.mark.parametrize("point_mass", [False, True])
def test_fused_draw_is_the_two_level_draw_on_the_kernels_sums(compiled, dtype, vocab_size, point_mass):
    """The C kernel's whole draw (block, then token within it, in one call) is `_inverse_cdf_blocked` on the same
    block sums, token for token and ok for ok: u = 0, u just below 1 and thresholds on block boundaries included."""
    gen = torch.Generator().manual_seed(vocab_size + 7)
    final = final_rows(gen, 300, 3, vocab_size, dtype, point_mass)
    u = torch.rand(300, generator=gen)
    u[::11], u[1::11] = 0.0, 1.0 - 2**-24
    sums, token, ok = kernels.draw(*final, BLOCK, u)
    assert torch.equal(sums, kernels.block_sums(*final, BLOCK))
    expected_token, expected_ok = batched_draw._inverse_cdf_blocked(sums, final, u, torch.float32)
    assert torch.equal(ok, expected_ok) and bool(ok.any())
    assert torch.equal(token[ok], expected_token[ok])
    boundary = sums.double().cumsum(1)[:, :1] / sums.double().sum(1, keepdim=True)  # u at the first block's end
    sums, token, ok = kernels.draw(*final, BLOCK, boundary[:, 0].float())
    expected_token, expected_ok = batched_draw._inverse_cdf_blocked(sums, final, boundary[:, 0].float(), torch.float32)
    assert torch.equal(ok, expected_ok) and torch.equal(token[ok], expected_token[ok])


@pytest.mark.parametrize("bad_token", [-1, 300])
def test_a_token_out_of_range_gets_torchs_error_not_a_read_out_of_bounds(compiled, bad_token):
    """validate=False skips the data checks; the chain kernel checks its indices before reading and leaves such
    inputs to the torch path, which raises its own index error."""
    gen = torch.Generator().manual_seed(4)
    target, draft = random_rows(gen, (3, 3, 300), torch.float32), random_rows(gen, (3, 2, 300), torch.float32)
    tokens = torch.tensor([[1, 2], [3, bad_token], [5, 6]])
    with pytest.raises((IndexError, RuntimeError), match="out of bounds|out of range"):
        batched.verify(target, draft, tokens, uniforms=torch.zeros(3, 3), validate=False)


def test_inputs_the_kernel_does_not_take_fall_back_to_torch(compiled):
    gen = torch.Generator().manual_seed(2)
    final = final_rows(gen, 4, 2, 300, torch.float32, point_mass=False)
    rest = (final.target_row, final.draft_row, final.removed, BLOCK)
    assert kernels.block_sums(final.target_probs.double(), final.draft_probs.double(), *rest) is None
    assert kernels.block_sums(final.target_probs.transpose(0, 1).contiguous().transpose(0, 1),
                              final.draft_probs, *rest) is None  # fmt: skip
    assert kernels.block_sums(final.target_probs, final.draft_probs.bfloat16(), *rest) is None


def test_without_a_compiler_the_engine_uses_torch(monkeypatch, tmp_path):
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setenv("SPECREF_CACHE", str(tmp_path))
    monkeypatch.setattr(kernels, "ENABLED", True)
    monkeypatch.setattr(cpu_kernel, "_loaded", {})
    assert kernels.status().startswith("unavailable: no C compiler")
    gen = torch.Generator().manual_seed(3)
    final = final_rows(gen, 8, 2, 300, torch.float32, point_mass=False)
    assert kernels.block_sums(final.target_probs, final.draft_probs, *final[2:], BLOCK) is None
    tokens = torch.zeros(8, 2, dtype=torch.long)
    out = batched.verify(
        final.target_probs, final.target_probs[:, :2], tokens, uniforms=torch.rand(8, 3, generator=gen)
    )
    assert batched.num_emitted(out).tolist() == [3] * 8  # p == q accepts everything


def test_a_failed_compile_says_why(monkeypatch, tmp_path):
    fake = tmp_path / "cc"
    fake.write_text("#!/bin/sh\necho 'error: this compiler refuses' >&2\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CC", str(fake))
    monkeypatch.setenv("SPECREF_CACHE", str(tmp_path))
    monkeypatch.setattr(kernels, "ENABLED", True)
    monkeypatch.setattr(cpu_kernel, "_loaded", {})
    status = kernels.status()
    assert status.startswith("unavailable:") and "this compiler refuses" in status


def test_disabled_by_the_environment_switch(torch_path):
    code = "import specref.batched.kernels as k; print(k.status())"
    env = {**os.environ, "SPECREF_KERNELS": "0"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert result.stdout.startswith("disabled"), result.stdout + result.stderr
    assert kernels.status().startswith("disabled")
    target = torch.full((1, 2, 4), 0.25)
    assert kernels.block_sums(target, None, torch.tensor([0]), torch.tensor([-1]), torch.tensor([-1]), BLOCK) is None


def _triton_interpreter_check():
    """Run in a subprocess with TRITON_INTERPRET=1: the Triton kernel on CPU tensors, against torch and the engine."""
    from specref.batched.kernels import cuda as cuda_kernel

    assert cuda_kernel.status().startswith("triton"), cuda_kernel.status()
    assert cuda_kernel._self_check(torch.device("cpu")) == ""  # what status(device) runs once per GPU
    gen = torch.Generator().manual_seed(5)
    for dtype in kernels.DTYPES:
        for point_mass in (False, True):
            for vocab_size in (7, 300, 1000):
                final = final_rows(gen, 9, 3, vocab_size, dtype, point_mass)
                rows = kernels.flat_rows(final.target_probs, final.target_row, final.draft_row)
                sums = cuda_kernel.block_sums(final.target_probs, final.draft_probs, *rows, final.removed, BLOCK)
                expected = batched_draw._block_sums(batched_draw.full_weights(final, torch.float32)).double()
                assert torch.allclose(sums, expected, rtol=1e-5, atol=1e-12), (dtype, point_mass, vocab_size)
    # The engine with the Triton kernel standing in for the C kernel: the same tokens.
    target = random_rows(gen, (64, 3, 700), torch.float32)
    draft = random_rows(gen, (64, 2, 700), torch.float32)
    tokens = torch.multinomial(draft.view(-1, 700), 1, generator=gen).view(64, 2)
    uniforms = torch.rand(64, 3, generator=gen)
    expected = batched.verify(target, draft, tokens, uniforms=uniforms)
    kernels._backend = lambda device: cuda_kernel
    assert torch.equal(batched.verify(target, draft, tokens, uniforms=uniforms), expected)
    # A kernel that computes wrong sums fails the self-check, which says how.
    right = cuda_kernel.block_sums
    cuda_kernel.block_sums = lambda *args: right(*args) * 1.01
    assert cuda_kernel._self_check(torch.device("cpu")).startswith("sums ")


def test_triton_kernel_under_the_interpreter():
    pytest.importorskip("triton", reason="Triton is not installed: the CUDA kernel cannot be interpreted on CPU")
    code = f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); "
    code += "import test_batched_kernel as t; t._triton_interpreter_check()"
    env = {**os.environ, "TRITON_INTERPRET": "1", "SPECREF_KERNELS": "1"}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]


def test_compiles_from_an_empty_cache(compiled, monkeypatch, tmp_path):
    """Two builders at once (as pytest-xdist workers on a cold cache) compile it once: the compiler, wrapped to
    count its runs, runs once, and both get the same library."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("SPECREF_CACHE", str(cache))
    runs = tmp_path / "compiler-runs"
    wrapper = tmp_path / "cc"
    wrapper.write_text(
        f'#!/bin/sh\necho run >> {shlex.quote(str(runs))}\nexec {shlex.join(cpu_kernel._compiler())} "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("CC", str(wrapper))
    with ThreadPoolExecutor(2) as pool:  # flock excludes each open of the directory, threads included
        built = list(pool.map(lambda _: cpu_kernel._compile(), range(2)))
    assert built[0] == built[1] and runs.read_text().split() == ["run"]
    monkeypatch.setattr(cpu_kernel, "_loaded", {})
    status = cpu_kernel.status()
    assert status.startswith("compiled: ") and status.endswith(".so") and str(cache / "kernels") in status
    assert [p.suffix for p in (cache / "kernels").iterdir()] == [".so"]  # no scratch left behind
