"""End-to-end checks on tiny real transformers models (`nox -s e2e`; `python -m specref.e2e [--quick] [--out DIR]`).

  1. models: build or load the tiny target/draft pair, check a rebuild is bit-for-bit, report acceptance rates;
  2. law checks: n-token continuations of specref's generation and of transformers' generate(assistant_model=...)
     against the target's exact processed law, under several processor settings;
  3. processor-mismatch mutants, which must be flagged;
  4. measured tau against tau predicted from the models' own p/q along the generated contexts, for g in {1,2,4,8};
  5. speed: plain target sampling against speculative generation, with the latency model (T_draft + T_verify)/tau.
All statistical checks share one false-alarm budget of 1e-3 (Bonferroni, specref.stats.ErrorBudget).
Writes DIR/e2e.json and DIR/e2e.md, then DIR/e2e.png (optional: without matplotlib the run says so at the start and
draws none). Exit code 0 when every check came out as expected; 2 at once when torch or transformers is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from .extras import MATPLOTLIB, TORCH, TRANSFORMERS, exit_if_missing, notice  # noqa: E402

if __name__ == "__main__":  # before the imports below, which need both
    exit_if_missing("python -m specref.e2e", TORCH, TRANSFORMERS)

import torch  # noqa: E402

from .hf import pipelines, rebuild, speed, tau, tiny  # noqa: E402
from .hf.acceptance import mean_acceptance  # noqa: E402
from .hf.generation import GenerationTrace, SpecConfig, speculative_generate  # noqa: E402
from .hf.lawcheck import law_check  # noqa: E402
from .hf.processors import Processors  # noqa: E402
from .hf.report import write_reports  # noqa: E402
from .stats import ErrorBudget, mean_ci  # noqa: E402

SPECREF_SETTINGS = [
    Processors(1.0),
    Processors(0.7),
    Processors(1.0, top_k=5),
    Processors(0.9, top_p=0.8),
]
TRANSFORMERS_SETTINGS = [Processors(0.7), Processors(1.0, top_k=5), Processors(0.9, top_p=0.8)]
EOS_SETTING = Processors(0.8)
TAU_SETTING = Processors(0.8)
GAMMAS = (1, 2, 4, 8)


@dataclass(frozen=True)
class Plan:
    n_new: int = 3
    gamma: int = 3
    specref_samples: int = 20000
    transformers_samples: int = 6000
    mutant_samples: int = 6000
    tau_prompts: int = 800
    tau_new: int = 12
    cross_contexts: int = 3
    cross_repeats: int = 3000
    speed_batch: int = 32
    speed_new: int = 48
    speed_single_prompts: int = 4
    speed_repeats: int = 3
    rebuild_target: bool = True


QUICK = Plan(
    specref_samples=4000,
    transformers_samples=1500,
    mutant_samples=3000,
    tau_prompts=200,
    tau_new=8,
    cross_contexts=1,
    cross_repeats=1500,
    speed_batch=8,
    speed_new=24,
    speed_single_prompts=2,
    speed_repeats=1,
    rebuild_target=False,
)


def prompt_for(name: str, length: int = 4) -> list[int]:
    return tiny.sample_prompts(1, length, seed=zlib.crc32(name.encode()))[0].tolist()


def run_law(adapter: pipelines.PipelineAdapter, n_samples: int, n_new: int, alpha: float, seed: int) -> dict:
    prompt = prompt_for(adapter.name)
    start = time.perf_counter()
    samples = adapter.generate(torch.tensor([prompt] * n_samples), n_new, seed)
    seconds = time.perf_counter() - start
    result = law_check(samples, adapter.law_array(prompt, n_new), alpha=alpha, name=adapter.name)
    as_expected = result.passed == adapter.expected_conforming
    return {
        "adapter": adapter.name,
        "description": adapter.description,
        "prompt": prompt,
        "expected_conforming": adapter.expected_conforming,
        "as_expected": as_expected,
        "seconds": seconds,
        "check": result.to_dict(),
    }


def run_tau(target, draft, plan: Plan, gamma: int, alpha: float, seed: int) -> dict:
    config = SpecConfig(gamma, TAU_SETTING)
    prompts = tiny.sample_prompts(plan.tau_prompts, 4, seed=seed)
    trace = GenerationTrace()
    generator = torch.Generator().manual_seed(seed)
    speculative_generate(target, draft, prompts, plan.tau_new, config, generator, trace=trace, record_contexts=True)
    predicted = tau.rao_blackwell_tau(target, draft, trace.cycle_contexts, config, generator)
    result = tau.tau_check(trace.emitted_per_cycle, predicted, alpha=alpha, name=f"tau[g={gamma}]")
    return {"gamma": gamma, "as_expected": result.passed, "check": result.to_dict()}


def run_cross(target, draft, plan: Plan, alphas: list[float], seed: int) -> list[dict]:
    """The Rao-Blackwell estimate against specref.theory.accepted_at_least (exact enumeration), g = 2."""
    config = SpecConfig(2, TAU_SETTING)
    out = []
    for i, alpha in enumerate(alphas):
        context = prompt_for(f"cross-{i}", 6)
        exact = tau.exact_expected_tau(target, draft, context, config)
        generator = torch.Generator().manual_seed(seed + i)
        estimates = tau.rao_blackwell_tau(target, draft, [context] * plan.cross_repeats, config, generator)
        result = mean_ci(estimates, expected_mean=exact, alpha=alpha, name=f"tau-rb-vs-exact[{i}]", method="t")
        out.append({"context": context, "exact": exact, "as_expected": result.passed, "check": result.to_dict()})
    return out


def run(plan: Plan, out_dir: Path, seed: int, plots: bool = True) -> dict:
    torch.set_num_threads(1)  # stable timings on a shared machine; the models are tiny
    report: dict = {"plan": plan.__dict__, "seed": seed, "torch": torch.__version__}
    import transformers

    report["transformers"] = transformers.__version__
    start = time.perf_counter()
    target, draft = tiny.tiny_pair()
    report["models"] = {
        "load_or_build_seconds": time.perf_counter() - start,
        "cache": str(tiny.cache_dir()),
        "target": {"spec": tiny.TARGET.__dict__, "params": sum(p.numel() for p in target.parameters())},
        "draft": {"spec": tiny.DRAFT.__dict__, "params": sum(p.numel() for p in draft.parameters())},
        "corpus": tiny.CORPUS.__dict__,
        "rebuild_bit_for_bit": {"draft": rebuild.rebuild_matches(tiny.DRAFT)},
    }
    if plan.rebuild_target:
        report["models"]["rebuild_bit_for_bit"]["target"] = rebuild.rebuild_matches(tiny.TARGET)
    contexts = tiny.sample_prompts(256, 12, seed=seed + 1)
    settings = {s.label: s for s in SPECREF_SETTINGS + TRANSFORMERS_SETTINGS + [TAU_SETTING]}
    report["acceptance"] = {label: mean_acceptance(target, draft, contexts, s) for label, s in settings.items()}

    adapters = [pipelines.specref_pipeline(target, draft, SpecConfig(plan.gamma, s)) for s in SPECREF_SETTINGS]
    eos = int(torch.mode(contexts.reshape(-1)).values)  # the corpus' most frequent token: EOS shows up often
    eos_config = SpecConfig(plan.gamma, EOS_SETTING, eos_token_id=eos)
    adapters.append(pipelines.specref_pipeline(target, draft, eos_config, name=f"specref-generate[eos={eos}]"))
    tf_adapters = [pipelines.transformers_pipeline(target, draft, s, plan.gamma) for s in TRANSFORMERS_SETTINGS]
    mutants = pipelines.mutant_pipelines(target, draft, plan.gamma)
    names = [a.name for a in adapters + tf_adapters + mutants] + [f"tau[g={g}]" for g in GAMMAS]
    names += [f"tau-rb-vs-exact[{i}]" for i in range(plan.cross_contexts)]
    alphas = ErrorBudget(1e-3).split(names)
    report["budget"] = {"total": 1e-3, "method": "Bonferroni", "checks": len(names), "alpha": alphas}

    laws = []
    for adapter in adapters:
        laws.append(run_law(adapter, plan.specref_samples, plan.n_new, alphas[adapter.name], seed))
    for adapter in tf_adapters:
        laws.append(run_law(adapter, plan.transformers_samples, plan.n_new, alphas[adapter.name], seed))
    for adapter in mutants:
        laws.append(run_law(adapter, plan.mutant_samples, plan.n_new, alphas[adapter.name], seed))
    report["laws"] = laws
    report["tau"] = [run_tau(target, draft, plan, g, alphas[f"tau[g={g}]"], seed + g) for g in GAMMAS]
    cross_alphas = [alphas[f"tau-rb-vs-exact[{i}]"] for i in range(plan.cross_contexts)]
    report["tau_cross"] = run_cross(target, draft, plan, cross_alphas, seed)

    batch_prompts = tiny.sample_prompts(plan.speed_batch, 4, seed=seed + 2)
    report["speed_batch"] = [
        r.to_dict()
        for r in speed.measure(
            target, draft, batch_prompts, plan.speed_new, TAU_SETTING, GAMMAS, seed=seed, repeats=plan.speed_repeats
        )
    ]
    single_prompts = batch_prompts[: plan.speed_single_prompts]
    report["speed_single"] = [
        r.to_dict()
        for r in speed.measure(
            target,
            draft,
            single_prompts,
            plan.speed_new,
            TAU_SETTING,
            GAMMAS,
            seed=seed,
            one_at_a_time=True,
            repeats=plan.speed_repeats,
        )
    ]
    checks = laws + report["tau"] + report["tau_cross"]
    report["all_as_expected"] = all(c["as_expected"] for c in checks) and all(
        report["models"]["rebuild_bit_for_bit"].values()
    )
    write_reports(report, out_dir, plots=plots)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specref.e2e", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller samples (a few minutes on one core)")
    parser.add_argument("--out", type=Path, default=Path("reports/e2e"), help="report directory")
    parser.add_argument("--seed", type=int, default=20261130)
    args = parser.parse_args(argv)
    exit_if_missing(parser.prog, TORCH, TRANSFORMERS)  # main() called directly, not through `python -m`
    note = notice(plots=True, progress=False)
    if note:
        print(f"{parser.prog}: {note}", file=sys.stderr, flush=True)
    import transformers

    transformers.utils.logging.set_verbosity_error()
    report = run(QUICK if args.quick else Plan(), args.out, args.seed, plots=MATPLOTLIB.available)
    print(json.dumps({"all_as_expected": report["all_as_expected"], "out": str(args.out)}))
    return 0 if report["all_as_expected"] else 1


if __name__ == "__main__":
    sys.exit(main())
