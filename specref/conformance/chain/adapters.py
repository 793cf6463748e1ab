"""Adapters: every verifier the harness runs, wrapped into the verify contract with its declared capabilities.

    verify(target_probs, draft_probs, draft_tokens, generator, **capability_kwargs) -> [B, g+1] int64, -1 padded

capability_kwargs are passed only when declared: num_draft=[B] int64 (ragged), uniforms=[B, g+1] (the coupling
convention of `specref.randomness`); draft_probs=None only when point_mass is declared.

Built-ins (`builtin_adapters`): the rows of the table in `specref.builtins` that can run here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from ...randomness import Injected, inverse_cdf
from ..engine.seeds import global_rng_from, seeds_from

__all__ = ["Adapter", "as_adapter", "builtin_adapters", "contract_output", "global_rng_from", "seeds_from"]


@dataclass
class Adapter:
    name: str
    verify: Callable  # verify(target_probs, draft_probs, draft_tokens, generator, **capability_kwargs) -> [B, g+1]
    ragged: bool = False  # accepts num_draft=[B] int64
    adaptive: bool = False  # verifies its own number of drafts per row: return_num_draft=True -> (tokens, used [B])
    point_mass: bool = False  # accepts draft_probs=None
    uniforms: bool = False  # accepts uniforms=[B, g+1] (specref coupling convention)
    coupled: bool = True  # with uniforms: in specref's convention (checked token for token); False: its own convention
    device: str = "cpu"
    dtype: torch.dtype = torch.float32  # dtype of the probabilities it wants
    kind: str = "kernel"  # "kernel" (the verify contract) | "pipeline"
    rule: str = "exact"  # the verification rule it implements: "exact" (min(1, p/q) + residual), "match", ...
    lossy: bool = False  # lossy by configuration: report the measured TV, not a bug
    notes: str = ""  # shown in reports
    uniform_dtype: torch.dtype | None = None  # dtype of the uniforms it draws (the rare-edge event); None: undeclared


_CAPABILITIES = (
    "ragged",
    "adaptive",
    "point_mass",
    "uniforms",
    "coupled",
    "device",
    "dtype",
    "kind",
    "rule",
    "lossy",
    "notes",
    "uniform_dtype",
)


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


# --- reference -------------------------------------------------------------------------------------------------


def _reference_verify(target_probs, draft_probs, draft_tokens, generator=None, *, num_draft=None, uniforms=None):
    """specref.reference.verify per row on float64 lists; uniforms [B, g+1] replayed through Injected."""
    from ... import reference

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
        uniform_dtype=torch.float64,
        notes="specref.reference.verify, one Python loop over rows on float64 lists; uniforms drawn as [B, g+1]",
    )


def batched_adapter() -> Adapter:
    from ...batched import verify

    return Adapter(
        "batched",
        verify,
        ragged=True,
        point_mass=True,
        uniforms=True,
        uniform_dtype=torch.float32,
        notes="specref.batched.verify: vectorised torch, no loop over B or g",
    )


def batched_block_adapter() -> Adapter:
    from ...batched.block import verify_block

    return Adapter(
        "batched-block",
        verify_block,
        ragged=True,
        point_mass=True,
        uniforms=True,
        uniform_dtype=torch.float32,
        rule="block",
        notes="specref.batched.block.verify_block: block verification (Sun et al., ICLR 2025), vectorised torch",
    )


def _block_reference_verify(target_probs, draft_probs, draft_tokens, generator=None, *, num_draft=None,
                            uniforms=None):  # fmt: skip
    """specref.reference.block.verify_block per row on float64 lists; uniforms [B, g+1] replayed through Injected,
    u_g feeding the final draw of every row (the batched engine's convention)."""
    from ...reference import block

    batch, gamma = draft_tokens.shape
    if uniforms is None:
        if generator is None:
            raise ValueError("generator=None and uniforms=None: the block reference adapter needs one of them")
        uniforms = torch.rand(batch, gamma + 1, generator=generator, dtype=torch.float64, device=generator.device)
    target_rows = target_probs.double().tolist()
    draft_rows = None if draft_probs is None else draft_probs.double().tolist()
    tokens, u = draft_tokens.tolist(), uniforms.double().tolist()
    counts = [gamma] * batch if num_draft is None else [int(n) for n in num_draft.tolist()]
    emitted = []
    for b, n in enumerate(counts):
        row_uniforms = u[b][:n] + [u[b][gamma]]
        if n == 0:  # no drafts: the bonus alone, drawn from p_1
            emitted.append([inverse_cdf(target_rows[b][0], row_uniforms[-1])])
            continue
        q = None if draft_rows is None else draft_rows[b][:n]
        emitted.append(block.verify_block(target_rows[b][: n + 1], q, tokens[b][:n], Injected(row_uniforms)))
    return contract_output(emitted, gamma, target_probs.device)


def block_reference_adapter() -> Adapter:
    return Adapter("block-reference", _block_reference_verify, ragged=True, point_mass=True, uniforms=True,
                   dtype=torch.float64, uniform_dtype=torch.float64, rule="block",
                   notes="specref.reference.block.verify_block, a Python loop over rows on float64 lists")  # fmt: skip


#: The reference engine of each rule that has one, in specref's uniforms convention: what coupling compares with.
REFERENCES = {"exact": reference_adapter, "block": block_reference_adapter}


# --- transformers: transformers/generation/utils.py `_speculative_sampling` (read with inspect.getsource, 5.24) ---
# It takes logits (we pass log(probs); log 0 = -inf, and softmax(-inf) = 0 exactly), handles one sequence, and
# draws from torch's global RNG (rand_like, then multinomial). Per call the global RNG takes the state of the
# harness's generator (copied, not reseeded: a forced state from specref.forced reaches the engine's draws), the rows
# run under torch.random.fork_rng (the caller's global RNG state is left as it was), and the generator takes the
# global state back, so it has advanced by exactly what the engine drew.


def _transformers_verify(target_probs, draft_probs, draft_tokens, generator=None, *, ensemble_weight=None):
    from transformers.generation.utils import _speculative_sampling

    batch, gamma = draft_tokens.shape
    target_logits = target_probs.log()  # [B, g+1, V]
    draft_logits = draft_probs.log()  # [B, g, V]
    rows = []
    with torch.random.fork_rng(devices=[]), global_rng_from(generator):
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
    "It uses torch's global RNG: per call it takes the harness's generator's state (copied, so a forced state "
    "reaches its draws), inside torch.random.fork_rng (the global state is restored afterwards)."
)


def transformers_adapter() -> Adapter:
    return Adapter("transformers", _transformers_verify, notes=_TRANSFORMERS_NOTES, uniform_dtype=torch.float32)


def transformers_ensemble_adapter() -> Adapter:
    return Adapter(
        "transformers-ensemble",
        _transformers_ensemble_verify,
        lossy=True,
        uniform_dtype=torch.float32,
        notes=_TRANSFORMERS_NOTES + " Configured with assistant_ensemble_weight=0.5 (DIVERSE static ensemble): "
        "lossy by design.",
    )


# --- registry ------------------------------------------------------------------------------------------------------


def builtin_adapters() -> dict[str, Callable[[], Adapter]]:
    """name -> factory of the chain and pipeline built-ins that can run here, in the order of the table in
    specref.builtins (its rows of kind kernel and pipeline whose packages import here, and CUDA for the CUDA-only
    ones). Pipeline factories (specref.hf.pipelines, the real engines' generate) return a PipelineAdapter. Nothing
    is imported until a factory is called."""
    from ...builtins import BUILTINS

    return {b.name: b.load for b in BUILTINS if b.kind in ("kernel", "pipeline") and b.available()}
