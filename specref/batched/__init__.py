"""The batched engine: exact speculative sampling for B sequences at once, in torch (CPU or CUDA).

Modules, one concern each:

  chain        `verify` / `verify_logits`: chain verification, coupled token for token with `specref.reference`
  draw         the chain's final draw: a two-level inverse CDF over the residual or bonus row
  validation   input checks; each error names the argument and its value
  kernels/     optional fused kernels for that draw: C on CPU (compiled on first use), Triton on CUDA
  tree         `verify_tree`: the tree rules of `specref.reference.tree`, batched
  block        `verify_block`: block verification of `specref.reference.block`, batched
  bench        `python -m specref.batched.bench`: the chain engine against baselines
  bench_tree   `python -m specref.batched.bench_tree`: the tree and block engines against a per-row loop

The names below are loaded on first use, so that importing this package (as `python -m specref.batched.bench`
does) imports no torch: an entry point names a missing extra before anything needs it.
"""

from __future__ import annotations

import importlib

#: Public name -> the module of this package that defines it.
_EXPORTS = {
    "verify": "chain",
    "verify_logits": "chain",
    "draw_uniforms": "chain",
    "num_emitted": "chain",
    "release_workspace": "draw",
    "verify_tree": "tree",
    "verify_block": "block",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
