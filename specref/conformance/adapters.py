"""Adapters: every verifier the harness runs, wrapped into the verify contract with its declared capabilities.

    verify(target_probs, draft_probs, draft_tokens, generator, **capability_kwargs) -> [B, g+1] int64, -1 padded

capability_kwargs are passed only when declared: num_draft=[B] int64 (ragged), uniforms=[B, g+1] (the coupling
convention of `specref.randomness`); draft_probs=None only when point_mass is declared.

Built-ins (`builtin_adapters`): 'reference', 'batched', 'transformers', 'transformers-ensemble' always; 'vllm',
'flashinfer', 'sglang' (and 'sglang-threshold') only when their package imports and CUDA is present. The peer
adapters were written against the public sources cited beside each one; they cannot run without CUDA.
"""

from __future__ import annotations

import importlib.util
import inspect
import types
from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from ..randomness import Injected, inverse_cdf

__all__ = ["Adapter", "as_adapter", "builtin_adapters", "contract_output"]


@dataclass
class Adapter:
    name: str
    verify: Callable  # verify(target_probs, draft_probs, draft_tokens, generator, **capability_kwargs) -> [B, g+1]
    ragged: bool = False  # accepts num_draft=[B] int64
    point_mass: bool = False  # accepts draft_probs=None
    uniforms: bool = False  # accepts uniforms=[B, g+1] (specref coupling convention)
    device: str = "cpu"
    dtype: torch.dtype = torch.float32  # dtype of the probabilities it wants
    kind: str = "kernel"  # "kernel" (the verify contract) | "pipeline"
    rule: str = "exact"  # the verification rule it implements: "exact" (min(1, p/q) + residual), "match", ...
    lossy: bool = False  # lossy by configuration: report the measured TV, not a bug
    notes: str = ""  # shown in reports


_CAPABILITIES = ("ragged", "point_mass", "uniforms", "device", "dtype", "kind", "rule", "lossy", "notes")


def as_adapter(obj, name: str | None = None) -> Adapter:
    """An Adapter passes through; an object with a `verify` attribute is wrapped with the capabilities it declares
    (attributes named as Adapter's fields); a plain verify function gets no optional capability."""
    if isinstance(obj, Adapter):
        return obj if name is None else replace(obj, name=name)
    verify = getattr(obj, "verify", None)
    if callable(verify):
        declared = {field: getattr(obj, field) for field in _CAPABILITIES if hasattr(obj, field)}
        label = name or getattr(obj, "name", None) or type(obj).__name__
        return Adapter(name=str(label), verify=verify, **declared)
    if callable(obj):
        return Adapter(name=name or getattr(obj, "__name__", type(obj).__name__), verify=obj)
    raise ValueError(f"obj={obj!r} is neither a verify function, an Adapter, nor an object with a verify attribute")


def contract_output(rows: list[list[int]], gamma: int, device="cpu") -> torch.Tensor:
    """[B, g+1] int64: each row's emitted tokens left-aligned, then -1."""
    out = torch.full((len(rows), gamma + 1), -1, dtype=torch.int64)
    for b, emitted in enumerate(rows):
        out[b, : len(emitted)] = torch.as_tensor(emitted, dtype=torch.int64)
    return out.to(device)


def _seeds(generator: torch.Generator | None, count: int) -> list[int]:
    """count seeds for libraries with their own RNG, drawn from the harness's generator (deterministic per call)."""
    if generator is None:
        raise ValueError("generator=None: this adapter draws its randomness from the harness's torch.Generator")
    return torch.randint(0, 2**62, (count,), generator=generator, device=generator.device).tolist()


# --- reference -------------------------------------------------------------------------------------------------


def _reference_verify(target_probs, draft_probs, draft_tokens, generator=None, *, num_draft=None, uniforms=None):
    """specref.reference.verify per row on float64 lists; uniforms [B, g+1] replayed through Injected."""
    from .. import reference

    batch, gamma = draft_tokens.shape
    if uniforms is None:
        if generator is None:
            raise ValueError("generator=None and uniforms=None: the reference adapter needs one of them")
        uniforms = torch.rand(batch, gamma + 1, generator=generator, dtype=torch.float64, device=generator.device)
    target_rows = target_probs.double().tolist()
    draft_rows = None if draft_probs is None else draft_probs.double().tolist()
    tokens = draft_tokens.tolist()
    u = uniforms.double().tolist()
    counts = [gamma] * batch if num_draft is None else [int(n) for n in num_draft.tolist()]
    emitted = []
    for b, n in enumerate(counts):
        row_uniforms = u[b][:n] + [u[b][gamma]]  # u_g feeds the final draw for every row (batched convention)
        if n == 0:  # no drafts: the bonus alone, drawn from p_1
            emitted.append([inverse_cdf(target_rows[b][0], row_uniforms[-1])])
            continue
        q = None if draft_rows is None else draft_rows[b][:n]
        emitted.append(reference.verify(target_rows[b][: n + 1], q, tokens[b][:n], Injected(row_uniforms)))
    return contract_output(emitted, gamma, target_probs.device)


def reference_adapter() -> Adapter:
    return Adapter(
        "reference",
        _reference_verify,
        ragged=True,
        point_mass=True,
        uniforms=True,
        dtype=torch.float64,
        notes="specref.reference.verify, one Python loop over rows on float64 lists; uniforms drawn as [B, g+1]",
    )


def batched_adapter() -> Adapter:
    from ..batched import verify

    return Adapter(
        "batched",
        verify,
        ragged=True,
        point_mass=True,
        uniforms=True,
        notes="specref.batched.verify: vectorised torch, no loop over B or g",
    )


# --- transformers: transformers/generation/utils.py `_speculative_sampling` (read with inspect.getsource, 5.24) ---
# It takes logits (we pass log(probs); log 0 = -inf, and softmax(-inf) = 0 exactly), handles one sequence, and
# draws from torch's global RNG (rand_like, then multinomial). Per call we draw one seed from the harness's
# generator and run the rows under torch.random.fork_rng, so the caller's global RNG state is left as it was.


def _transformers_verify(target_probs, draft_probs, draft_tokens, generator=None, *, ensemble_weight=None):
    from transformers.generation.utils import _speculative_sampling

    batch, gamma = draft_tokens.shape
    (seed,) = _seeds(generator, 1)
    target_logits = target_probs.log()  # [B, g+1, V]
    draft_logits = draft_probs.log()  # [B, g, V]
    rows = []
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for b in range(batch):
            valid_tokens, _ = _speculative_sampling(
                draft_tokens[b : b + 1],  # candidate_input_ids [1, g]: the prompt part is sliced away anyway
                draft_logits[b : b + 1],
                gamma,
                target_logits[b : b + 1],
                assistant_ensemble_weight=ensemble_weight,
            )
            rows.append(valid_tokens[0].tolist())
    return contract_output(rows, gamma, target_probs.device)


def _transformers_ensemble_verify(target_probs, draft_probs, draft_tokens, generator=None):
    return _transformers_verify(target_probs, draft_probs, draft_tokens, generator, ensemble_weight=0.5)


_TRANSFORMERS_NOTES = (
    "transformers.generation.utils._speculative_sampling, batch 1 per call, looped over rows; logits = log(probs). "
    "It uses torch's global RNG: seeded per call with torch.manual_seed(seed), seed drawn from the harness's "
    "generator, inside torch.random.fork_rng (the global state is restored afterwards)."
)


def transformers_adapter() -> Adapter:
    return Adapter("transformers", _transformers_verify, notes=_TRANSFORMERS_NOTES)


def transformers_ensemble_adapter() -> Adapter:
    return Adapter(
        "transformers-ensemble",
        _transformers_ensemble_verify,
        lossy=True,
        notes=_TRANSFORMERS_NOTES + " Configured with assistant_ensemble_weight=0.5 (DIVERSE static ensemble): "
        "lossy by design.",
    )


# --- vLLM: vllm/v1/sample/rejection_sampler.py `rejection_sample` --------------------------------------------------
# Read at vllm-project/vllm commits 0097a7bbf1d91c71f03e35dc6c6fe978b88181f5 and
# 7f6fc1c5ce8d02f473b1b923debbfef3fa0b7a6a (same signature in both):
#   rejection_sample(draft_token_ids [T], num_draft_tokens list[int], max_spec_len, cu_num_draft_tokens [B],
#                    draft_probs [T, V] | None, target_probs [T, V], bonus_token_ids [B, 1], sampling_metadata)
#   -> [B, max_spec_len + 1] int32, PLACEHOLDER_TOKEN_ID (-1) padded, left-aligned.
# It reads only all_greedy, all_random, temperature ([B]; GREEDY_TEMPERATURE marks greedy rows) and generators
# ({row: torch.Generator}) from sampling_metadata, so we pass a namespace with those four, not the whole dataclass.
# vLLM samples the bonus token outside the rejection sampler; here it is drawn from p_{n+1} with torch.multinomial
# on a generator seeded from the harness's generator, so the bonus law is this adapter's, not vLLM's sampler's.


def _vllm_verify(target_probs, draft_probs, draft_tokens, generator=None, *, num_draft=None):
    from vllm.v1.sample import rejection_sampler

    batch, gamma = draft_tokens.shape
    device = target_probs.device
    counts = [gamma] * batch if num_draft is None else [int(n) for n in num_draft.tolist()]
    seeds = _seeds(generator, batch + 1)
    row_generators = {b: torch.Generator(device=device).manual_seed(seeds[b]) for b in range(batch)}
    active = torch.arange(gamma, device=device) < torch.as_tensor(counts, device=device)[:, None]  # [B, g]
    flat_tokens = draft_tokens.to(device)[active].contiguous()  # [T]
    flat_target = target_probs[:, :gamma][active].float().contiguous()  # [T, V]
    flat_draft = None if draft_probs is None else draft_probs[active].float().contiguous()
    bonus_rows = target_probs[torch.arange(batch, device=device), torch.as_tensor(counts, device=device)].float()
    bonus_generator = torch.Generator(device=device).manual_seed(seeds[batch])
    bonus_token_ids = torch.multinomial(bonus_rows, 1, generator=bonus_generator).to(torch.int32).contiguous()
    cu_num_draft_tokens = torch.as_tensor(counts, device=device).cumsum(0).to(torch.int32)
    metadata = types.SimpleNamespace(
        all_greedy=False,
        all_random=True,
        temperature=torch.ones(batch, dtype=torch.float32, device=device),
        generators=row_generators,
    )
    out = rejection_sampler.rejection_sample(
        flat_tokens.to(torch.int32),  # vLLM's SpecDecodeMetadata holds int32 draft ids
        counts,
        gamma,
        cu_num_draft_tokens,
        flat_draft,
        flat_target,
        bonus_token_ids,
        metadata,
    )
    return out.to(torch.int64)


def vllm_adapter() -> Adapter:
    return Adapter(
        "vllm",
        _vllm_verify,
        ragged=True,
        point_mass=True,
        device="cuda",
        notes="vllm.v1.sample.rejection_sampler.rejection_sample (Triton); one torch.Generator per row seeded from "
        "the harness's generator; the bonus token is sampled by this adapter (vLLM samples it outside the kernel).",
    )


# --- FlashInfer: flashinfer/sampling.py `chain_speculative_sampling` ------------------------------------------------
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
    (seed,) = _seeds(generator, 1)
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
        notes="flashinfer.sampling.chain_speculative_sampling; its CUDA generator is seeded per call from the "
        "harness's generator.",
    )


# --- SGLang: sgl-kernel/python/sgl_kernel/speculative.py `tree_speculative_sampling_target_only` ------------------
# Read at sgl-project/sglang commits 6bfad8f187aa80f7c9a2a06f7861409c4e3a4ad2 (with a draft_probs buffer) and
# 01fe7c22269dc027da4b77a9ca807073225f7c24 (without); kernel in sgl-kernel/csrc/speculative/
# speculative_sampling.cuh at b227f63247cdaf7fcbc4cfec8c3379120276ec82. The tree here is a chain: node 0 is the
# root (the last verified token), node i (1..g) is d_i; retrive_next_token[i] = i+1, the last -1, no siblings.
# The node-i target row is p_{i+1}, so target_probs maps one to one. uniform_samples[b, i] is the coin for node i's
# child (d_{i+1}) and uniform_samples_for_final_sampling[b] feeds the final draw: the specref convention, except
# that the kernel accepts with `coin <= p(d) / threshold_acc` and draws in float32.
# It is target-only: each draft is verified as a point mass (accept with p(d); residual p with d removed), and any
# draft_probs given are ignored. That keeps the law p for any draft law, but the acceptance rate is E_q[p(d)], not
# sum_x min(p, q): rate checks for the min(1, p/q) rule will flag it.


def _sglang_verify(
    target_probs, draft_probs, draft_tokens, generator=None, *, num_draft=None, uniforms=None, threshold_acc=1.0
):
    from sgl_kernel import tree_speculative_sampling_target_only

    batch, gamma = draft_tokens.shape
    device = target_probs.device
    nodes = gamma + 1
    if uniforms is None:
        (seed,) = _seeds(generator, 1)
        uniforms = torch.rand(batch, nodes, generator=torch.Generator(device=device).manual_seed(seed), device=device)
    uniforms = uniforms.to(device=device, dtype=torch.float32)
    counts = torch.full((batch,), gamma, device=device) if num_draft is None else num_draft.to(device)
    node = torch.arange(nodes, device=device)
    root = torch.zeros(batch, 1, dtype=torch.int64, device=device)  # the last verified token; the kernel never reads it
    candidates = torch.cat([root, draft_tokens.to(device=device, dtype=torch.int64)], dim=1)  # [B, g+1]
    candidates = torch.where(candidates < 0, 0, candidates).contiguous()  # placeholders past num_draft are unread
    retrive_index = (torch.arange(batch, device=device)[:, None] * nodes + node).contiguous()  # [B, g+1]
    retrive_next_token = torch.where(node < counts[:, None], node + 1, -1).contiguous()  # chain ends at num_draft
    retrive_next_sibling = torch.full((batch, nodes), -1, dtype=torch.int64, device=device)
    predicts = torch.full((batch * nodes,), -1, dtype=torch.int32, device=device)
    accept_index = torch.full((batch, nodes), -1, dtype=torch.int32, device=device)
    accept_token_num = torch.zeros(batch, dtype=torch.int32, device=device)
    kwargs = dict(
        predicts=predicts,
        accept_index=accept_index,
        accept_token_num=accept_token_num,
        candidates=candidates,
        retrive_index=retrive_index,
        retrive_next_token=retrive_next_token,
        retrive_next_sibling=retrive_next_sibling,
        uniform_samples=uniforms.contiguous(),
        uniform_samples_for_final_sampling=uniforms[:, gamma].contiguous(),
        target_probs=target_probs.float().contiguous(),
        threshold_single=1.0,
        threshold_acc=threshold_acc,
        deterministic=True,
    )
    if "draft_probs" in inspect.signature(tree_speculative_sampling_target_only).parameters:
        kwargs["draft_probs"] = torch.zeros(batch, nodes, target_probs.shape[-1], device=device)  # scratch buffer
    tree_speculative_sampling_target_only(**kwargs)
    # Emitted: predicts at the root and at each accepted node, accept_token_num + 1 tokens per row.
    tokens = predicts.view(batch, nodes).to(torch.int64)
    return torch.where(node <= accept_token_num[:, None].to(torch.int64), tokens, -1)


def _sglang_threshold_verify(target_probs, draft_probs, draft_tokens, generator=None, **kwargs):
    return _sglang_verify(target_probs, draft_probs, draft_tokens, generator, threshold_acc=0.5, **kwargs)


_SGLANG_NOTES = (
    "sgl_kernel.tree_speculative_sampling_target_only on a chain tree. Target-only: drafts are verified as point "
    "masses and draft_probs is ignored (law p, lower acceptance). Coins are float32 and compared with <=."
)


def sglang_adapter() -> Adapter:
    return Adapter(
        "sglang", _sglang_verify, ragged=True, point_mass=True, uniforms=True, device="cuda", notes=_SGLANG_NOTES
    )


def sglang_threshold_adapter() -> Adapter:
    return Adapter(
        "sglang-threshold",
        _sglang_threshold_verify,
        ragged=True,
        point_mass=True,
        uniforms=True,
        device="cuda",
        lossy=True,
        notes=_SGLANG_NOTES + " Configured with threshold_acc=0.5 (accept if coin <= 2 p(d)): lossy by design.",
    )


# --- registry ------------------------------------------------------------------------------------------------------


def _importable(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _cuda_package(module: str) -> bool:
    return torch.cuda.is_available() and _importable(module)


def builtin_adapters() -> dict[str, Callable[[], Adapter]]:
    """name -> factory, for the adapters that can run here.

    With transformers importable this also lists the pipeline kind (specref.hf.pipelines): whole speculative
    generation over tiny real models, e.g. 'transformers-generate'; their factories return PipelineAdapter.
    """
    factories: dict[str, Callable[[], Adapter]] = {
        "reference": reference_adapter,
        "batched": batched_adapter,
    }
    if _importable("transformers"):
        factories["transformers"] = transformers_adapter
        factories["transformers-ensemble"] = transformers_ensemble_adapter
        from ..hf.pipelines import builtin_pipelines

        factories.update(builtin_pipelines())
    if _cuda_package("vllm"):
        factories["vllm"] = vllm_adapter
    if _cuda_package("flashinfer"):
        factories["flashinfer"] = flashinfer_adapter
    if _cuda_package("sgl_kernel"):
        factories["sglang"] = sglang_adapter
        factories["sglang-threshold"] = sglang_threshold_adapter
    return factories
