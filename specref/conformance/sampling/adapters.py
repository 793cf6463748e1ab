"""Sampling adapters: a verifier of the sampling contract with what it declares, and the built-ins.

    verify(target_logits [B, g+1, V], draft_probs [B, g, V] | None, draft_tokens [B, g], params (B SamplingParams),
           histories (B History, before this step), generator, [uniforms=]) -> tokens [B, g+1] | (tokens, logprobs)

Declarations (attributes of the function or of an adapter object; the chain Adapter's too, such as `dtype`,
`device`, `uniforms`): `kind = "sampling"`; `chain` (a reference chain of specref.reference.processors) or `law`
(law(logits [V] float64, SamplingParams, History) -> [V]: the engine's own non-speculative sampler, so the engine is
compared with itself); `logprobs` (None, "processed" or "raw"); `point_mass_drafts`; `supports` (the parameter
names it accepts: scenarios' requests that set others are left out; default: what its chain takes).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import torch

from ...errors import BadArgument
from ...randomness import Injected
from ...reference.processors import SUPPORTS, check_chain
from ...reference.sampling import chain_law, verify_row
from ..chain.adapters import _CAPABILITIES, Adapter, contract_output
from ..engine.registry import SAMPLING

LOGPROBS = (None, "processed", "raw")


@dataclass
class SamplingAdapter(Adapter):
    kind: str = SAMPLING
    chain: str | None = "vllm"  # the reference chain whose law it keeps (None when `law` is given)
    law: Callable | None = None  # the engine's own sampler's law, instead of a chain
    logprobs: str | None = None  # what its second output is: None (no logprobs), "processed" or "raw"
    point_mass_drafts: bool = False  # accepts draft_probs=None
    supports: frozenset | None = None  # parameter names it accepts; None: its chain's

    def __post_init__(self):
        if self.law is None:
            check_chain(self.chain)
        if self.logprobs not in LOGPROBS:
            raise BadArgument(f"logprobs={self.logprobs!r} must be one of {LOGPROBS}")
        self.point_mass = self.point_mass_drafts
        if self.supports is None:
            self.supports = SUPPORTS[self.chain] if self.law is None else SUPPORTS["vllm"]

    @property
    def law_key(self):
        return self.chain if self.law is None else f"law:{getattr(self.law, '__qualname__', self.law)}"

    def target_law(self) -> Callable:
        return self.law if self.law is not None else chain_law(self.chain)


_DECLARED = (*_CAPABILITIES, "chain", "law", "logprobs", "point_mass_drafts", "supports")


def as_sampling_adapter(obj, name: str | None = None) -> SamplingAdapter:
    """A SamplingAdapter passes through; a function or an object with `verify` is wrapped with what it declares."""
    if isinstance(obj, SamplingAdapter):
        return obj if name is None else replace(obj, name=name)
    verify = getattr(obj, "verify", None)
    verify = verify if callable(verify) else obj
    if not callable(verify):
        raise BadArgument(f"obj={obj!r} is neither a sampling verify function nor an object with a verify attribute")
    declared = {f: getattr(obj, f) for f in _DECLARED if hasattr(obj, f) and f != "kind"}
    if "supports" in declared and declared["supports"] is not None:
        declared["supports"] = frozenset(declared["supports"])
    label = name or getattr(obj, "name", None) or getattr(verify, "__name__", type(obj).__name__)
    return SamplingAdapter(name=str(label), verify=verify, **declared)


# --- the built-ins ---------------------------------------------------------------------------------------------------


def reference_sampling_verify(target_logits, draft_probs, draft_tokens, params, histories, generator=None, *,
                              uniforms=None, chain: str = "vllm", logprobs: str | None = None):  # fmt: skip
    """specref.reference.sampling.verify_row per row on float64; uniforms [B, g+1] replayed through Injected (u_g
    feeds the final draw of every row, the batched engine's convention)."""
    batch, gamma = draft_tokens.shape
    if uniforms is None:
        if generator is None:
            raise BadArgument("generator=None and uniforms=None: the reference sampling verifier needs one of them")
        uniforms = torch.rand(batch, gamma + 1, generator=generator, dtype=torch.float64, device=generator.device)
    logits = target_logits.double().cpu().numpy()
    q = None if draft_probs is None else draft_probs.double().tolist()
    tokens, u = draft_tokens.tolist(), uniforms.double().tolist()
    law = chain_law(chain)
    emitted, values = [], []
    for b in range(batch):
        row, lp = verify_row(law, logits[b], None if q is None else q[b], tokens[b], params[b], histories[b],
                             Injected(u[b]), logprobs)  # fmt: skip
        emitted.append(row)
        values.append(lp)
    out = contract_output(emitted, gamma, target_logits.device)
    if logprobs is None:
        return out
    lp = torch.full((batch, gamma + 1), float("nan"), dtype=torch.float64)
    for b, row in enumerate(values):
        lp[b, : len(row)] = torch.tensor(row, dtype=torch.float64)
    return out, lp


def _reference_processed(target_logits, draft_probs, draft_tokens, params, histories, generator=None, *,
                         uniforms=None):  # fmt: skip
    return reference_sampling_verify(target_logits, draft_probs, draft_tokens, params, histories, generator,
                                     uniforms=uniforms, logprobs="processed")  # fmt: skip


def reference_sampling_adapter() -> SamplingAdapter:
    return SamplingAdapter("sampling-reference", _reference_processed, uniforms=True, dtype=torch.float64,
                           uniform_dtype=torch.float64, chain="vllm", logprobs="processed", point_mass_drafts=True,
                           notes="specref.reference.sampling.verify_row per row: the vllm processor chain "
                           "(specref.reference.processors), then exact speculative sampling; float64")  # fmt: skip


def _batched(target_logits, draft_probs, draft_tokens, params, histories, generator=None, *, uniforms=None):
    from ...batched.sampling import verify_sampling

    return verify_sampling(target_logits, draft_probs, draft_tokens, params, histories, generator,
                           uniforms=uniforms, logprobs=True)  # fmt: skip


def batched_sampling_adapter(device: str = "cpu") -> SamplingAdapter:
    return SamplingAdapter(f"sampling-batched{'-cuda' * (device == 'cuda')}", _batched, uniforms=True, device=device,
                           uniform_dtype=torch.float32, chain="vllm", logprobs="processed", point_mass_drafts=True,
                           notes="specref.batched.sampling.verify_sampling: the vllm chain vectorised over rows and "
                           "positions in torch, then specref.batched.verify")  # fmt: skip


def builtin_sampling_adapters() -> dict[str, Callable[[], SamplingAdapter]]:
    """name -> factory of the sampling built-ins that can run here (specref.builtins' rows of kind sampling)."""
    from ...builtins import BUILTINS

    return {b.name: b.load for b in BUILTINS if b.kind == SAMPLING and b.available()}


#: The reference engine each chain has in specref's uniforms convention: what coupling compares with.
REFERENCES = {"vllm": reference_sampling_adapter}

__all__ = [
    "LOGPROBS",
    "REFERENCES",
    "SAMPLING",
    "SamplingAdapter",
    "as_sampling_adapter",
    "batched_sampling_adapter",
    "builtin_sampling_adapters",
    "reference_sampling_adapter",
    "reference_sampling_verify",
]
