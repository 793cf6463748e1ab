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
from .findings import package_of, with_findings

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
        package = package_of(facts.distributions)
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
    vllm_package = package_of(BY_NAME["vllm"].engine.distributions)
    for name, package, code_path, rule, why in _no_adapter(vllm_package):
        if only is None or name in only:
            rows.append(not_run(name, package, code_path, rule, why))
    return rows


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
        "| engine | package | code path that ran | device | rule | verdict | failing checks | rows | smallest detectable TV (one law check) |",
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
