"""FlashInfer's chain speculative sampling (CUDA only: its kernels are JIT-compiled with nvcc).

    flashinfer.sampling.chain_speculative_sampling(draft_probs, draft_token_ids, target_probs, ...)

Checked against the public API of flashinfer-ai/flashinfer (python/flashinfer/sampling.py): the generator-based
signature below is the current one; the pre-generator one (uniform_samples as the third argument) is handled too.
Rule "exact": accept with min(1, p/q), residual max(0, p - q) normalised. Never run on this project's CPU machines;
`.ci/gpu-check` runs it where CUDA and flashinfer are present.
"""

from __future__ import annotations

import inspect

import torch

from ..chain.adapters import Adapter, seeds_from

# Read at flashinfer-ai/flashinfer commit ba1f20666a4db947ab4f8ea66537609677918e3b:
#   chain_speculative_sampling(draft_probs [B, n, V], draft_token_ids [B, n], target_probs [B, n+1, V],
#       maybe_output_accepted_token_num=None, maybe_output_emitted_draft_token_num=None, deterministic=True,
#       generator=None, seed=None, offset=None) -> (output_token_ids [B, n+1] int32 -1 padded, accepted, emitted)
# Older releases (0.1.x) took uniform_samples [B, n+1] as the third argument and no generator; both are handled.


def _flashinfer_verify(target_probs, draft_probs, draft_tokens, generator=None):
    from flashinfer import sampling

    batch, gamma = draft_tokens.shape
    device = target_probs.device
    params = inspect.signature(sampling.chain_speculative_sampling).parameters
    args = (draft_probs.float().contiguous(), draft_tokens.to(torch.int32).contiguous())
    (seed,) = seeds_from(generator, 1)
    cuda_generator = torch.Generator(device=device).manual_seed(seed)
    if "uniform_samples" in params:  # pre-generator API
        uniform_samples = torch.rand(batch, gamma + 1, generator=cuda_generator, device=device)
        out = sampling.chain_speculative_sampling(*args, uniform_samples, target_probs.float().contiguous())
    else:
        out = sampling.chain_speculative_sampling(
            *args, target_probs.float().contiguous(), deterministic=True, generator=cuda_generator
        )
    output_token_ids = out[0] if isinstance(out, tuple) else out
    return output_token_ids.to(torch.int64)


def flashinfer_adapter() -> Adapter:
    return Adapter(
        "flashinfer",
        _flashinfer_verify,
        device="cuda",
        rule="exact",
        notes="flashinfer.sampling.chain_speculative_sampling; its CUDA generator is seeded per call from the "
        "harness's generator.",
    )
