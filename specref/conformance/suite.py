"""The conformance suite behind `nox -s conformance` and `nox -s mutants`.

    python -m specref.conformance.suite [--mutants-only] [--seed N] [--budget-seconds S]
                                        [--mutant-budget-seconds S] [--only a,b] [--dtypes a,b] [--out reports]

Runs the built-in implementations (reference, batched, transformers, transformers-ensemble, and the GPU peers where
they can run) at the CLI's default budget, then every mutant of specref.mutants.CATALOGUE at a smaller budget
(mutants are vectorised) once per dtype of --dtypes (float32, bfloat16 and float16 rows by default), and writes
reports/<impl>/ for each built-in, reports/mutants[-<dtype>]/<name>/ for each mutant, reports/index.md and
reports/mutants[-<dtype>].md (which checks caught each mutant, whether the check designed for it was
among them, and the wall time of its run). Exit 0 when every built-in gets its expected verdict (conforming, lossy
by configuration for the lossy ones, or a real engine's known finding: peers/findings.py)
and every mutant is flagged by a check designed for it; else 1.

Optional packages are checked at the start: a built-in whose package is missing is named and skipped (exit 2 when
asked for by --only), and without matplotlib the suite says so once and draws no PNGs. Each report.json and
report.md is written before its plots, and index.md last, so neither can cost a verdict.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from dataclasses import dataclass, replace
from pathlib import Path

from ..builtins import BUILTINS
from ..errors import MissingDependency
from ..extras import MATPLOTLIB, TORCH, exit_if_missing, notice

if __name__ == "__main__":  # before torch is imported below
    exit_if_missing("python -m specref.conformance.suite", TORCH)

from . import run  # noqa: E402
from .chain.adapters import as_adapter, builtin_adapters  # noqa: E402
from .engine import registry
from .engine.report import CONFORMING, LOSSY, NON_CONFORMING, RARE_EDGE  # noqa: E402
from .peers.findings import known_verdict  # noqa: E402
from .report.render import write_index, write_report  # noqa: E402

HARNESS_ERROR = "harness error"
BUILTIN_BUDGET_SECONDS = 150.0  # half the CLI default (300 s), so the whole suite runs in about 20 minutes
MUTANT_BUDGET_SECONDS = 15.0


@dataclass
class Outcome:
    name: str
    verdict: str
    expected_verdict: str
    caught_by: list[str]
    wall_seconds: float
    budget_seconds: float
    designed_for: list[str] | None = None  # mutants: the check kinds meant to catch it
    measured_tv: dict | None = None
    bug_class: str = ""

    @property
    def ok(self) -> bool:
        if self.designed_for is None:
            return self.verdict == self.expected_verdict
        return self.verdict == self.expected_verdict and self.caught_expected

    @property
    def caught_expected(self) -> bool:
        return bool(set(self.caught_by) & set(self.designed_for or []))


def run_one(adapter, out_dir: Path, *, spec: str, seed: int, budget_seconds: float, plots: bool = True):
    """(report, wall seconds, None), or (None, wall seconds, message) when the harness itself failed on this impl:
    one such failure is recorded as a suite failure and the suite goes on."""
    started = time.perf_counter()
    try:
        report = run(adapter, seed=seed, budget_seconds=budget_seconds)
        write_report(report, out_dir, spec=spec, plots=plots)
    except Exception as error:  # noqa: BLE001 -- a harness bug on one impl must not hide the others' verdicts
        message = f"{HARNESS_ERROR}: {type(error).__name__}: {error}"
        _say(f"  {message}\n" + "".join(traceback.format_exception(error)[-4:]))
        return None, time.perf_counter() - started, message
    return report, time.perf_counter() - started, None


def run_builtins(
    out: Path,
    names: list[str],
    *,
    seed: int,
    budget_seconds: float,
    mutant_budget: float = MUTANT_BUDGET_SECONDS,
    plots: bool = True,
) -> list[Outcome]:
    """The built-ins at budget_seconds each; those that are deliberate bugs (pipeline mutants) at mutant_budget."""
    outcomes = []
    factories = builtin_adapters()
    for name in names:
        adapter = factories[name]()
        lossy = getattr(adapter, "lossy", False)
        buggy = getattr(adapter, "expected_conforming", True) is False  # built-in pipeline mutants
        expected = known_verdict(name) or (LOSSY if lossy else NON_CONFORMING if buggy else CONFORMING)
        budget = min(budget_seconds, mutant_budget) if buggy else budget_seconds
        _say(f"[builtin] {name}: running (budget {budget:g} s, expected {expected})")
        report, wall, error = run_one(adapter, out / name, spec=name, seed=seed, budget_seconds=budget, plots=plots)
        outcome = Outcome(name, error or report.verdict, expected, [] if error else report.caught_by(), wall, budget,
                          measured_tv=report.measured_tv() if lossy and not error else None)  # fmt: skip
        outcomes.append(outcome)
        _say(f"[builtin] {name}: {outcome.verdict} in {wall:.0f} s" + ("" if outcome.ok else "  <-- UNEXPECTED"))
        if report is not None and not outcome.ok:
            _say("  " + report.summary().replace("\n", "\n  "))
    return outcomes


def mutants_folder(dtype: str) -> str:
    """reports/mutants for float32 (the default dtype), reports/mutants-<dtype> for the others."""
    return "mutants" if dtype == "float32" else f"mutants-{dtype}"


def run_mutants(out: Path, names: list[str], *, seed: int, budget_seconds: float, plots: bool = True,
                dtype: str = "float32") -> list[Outcome]:  # fmt: skip
    """Every mutant as an adapter that asks for `dtype` rows (the harness gives it rows exact in that dtype)."""
    import torch

    from ..mutants import CATALOGUE

    outcomes = []
    for name in names:
        mutant = CATALOGUE[name]
        spec = f"{mutant.verify.__module__}:{mutant.verify.__name__}"  # also a valid `specref conform` IMPL
        if mutant.rule != "exact":  # the function alone would declare exact: the Mutant carries its rule
            spec = f"specref.mutants:MUTANTS.{name}"
        adapter = replace(as_adapter(mutant), dtype=getattr(torch, dtype))
        report, wall, error = run_one(adapter, out / mutants_folder(dtype) / name, spec=spec, seed=seed,
                                      budget_seconds=budget_seconds, plots=plots)  # fmt: skip
        edge_only = {registry.family_of(kind) for kind in mutant.caught_by} == {registry.EDGE}  # "Zero edges"
        expected = LOSSY if mutant.lossy else RARE_EDGE if edge_only else NON_CONFORMING
        outcome = Outcome(name, error or report.verdict, expected, [] if error else report.caught_by(), wall,
                          budget_seconds, designed_for=list(mutant.caught_by), bug_class=mutant.bug_class,
                          measured_tv=report.measured_tv() if mutant.lossy and not error else None)  # fmt: skip
        outcomes.append(outcome)
        mark = "caught" if outcome.caught_expected else "NOT CAUGHT by a designed check"
        _say(f"[mutant] {name}: {outcome.verdict}, {mark} ({', '.join(outcome.caught_by[:3]) or '-'}) in {wall:.0f} s")
    return outcomes


def write_mutants_md(out: Path, outcomes: list[Outcome], *, seed: int, budget_seconds: float,
                     dtype: str = "float32") -> Path:  # fmt: skip
    caught = sum(o.caught_expected for o in outcomes)
    folder = mutants_folder(dtype)
    lines = [
        f"# Mutants ({dtype} rows): which check caught each deliberately wrong verifier",
        "",
        f"{caught}/{len(outcomes)} mutants flagged by a check designed for them. Each mutant declared dtype {dtype}, "
        "so the harness gave it rows exact in that dtype (each summing to exactly 1) and held it to their law. "
        "Each ran as a black box "
        f"(no injected uniforms) through `specref.conformance.run` with seed {seed}, a budget of {budget_seconds:g} s "
        "per mutant and the run's family-wise false-alarm probability 1e-3. Wall time is that of the whole run "
        "(probe, sizing, every check), so it bounds the time to the verdict.",
        "",
        "| mutant | bug class | designed check(s) | caught by (most certain first) | designed check among them? | "
        "verdict | wall s |",
        "|---|---|---|---|---|---|---:|",
    ]
    for o in outcomes:
        verdict = o.verdict
        if o.verdict == LOSSY:
            tv = o.measured_tv or {}
            worst = max(tv.items(), key=lambda kv: kv[1]) if tv else None
            verdict = "lossy by configuration" + (f"; measured TV up to {worst[1]:.3f} ({worst[0]})" if worst else "")
        lines.append(
            f"| {o.name if o.verdict.startswith(HARNESS_ERROR) else f'[{o.name}]({folder}/{o.name}/report.md)'} "
            f"| {o.bug_class} | {', '.join(o.designed_for or [])} | "
            f"{', '.join(o.caught_by[:4]) or '-'}{' ...' if len(o.caught_by) > 4 else ''} | "
            f"{'yes' if o.caught_expected else '**no**'} | {verdict} | {o.wall_seconds:.0f} |"
        )
    path = out / f"{folder}.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _say(message: str) -> None:
    print(message, flush=True)


def main(argv: list[str] | None = None) -> int:
    from ..mutants import CATALOGUE

    parser = argparse.ArgumentParser(prog="python -m specref.conformance.suite", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--mutants-only", action="store_true", help="skip the built-in implementations")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget-seconds", type=float, default=None, metavar="S",
                        help=f"budget per built-in (default {BUILTIN_BUDGET_SECONDS:g}); with --mutants-only, per "
                        "mutant")  # fmt: skip
    parser.add_argument("--mutant-budget-seconds", type=float, default=None, metavar="S",
                        help=f"budget per mutant (default {MUTANT_BUDGET_SECONDS:g})")  # fmt: skip
    parser.add_argument("--only", metavar="A,B", help="run only these built-ins and mutants")
    parser.add_argument("--dtypes", default="float32,bfloat16,float16", metavar="A,B",
                        help="the dtypes the mutants ask for, torch dtype names (default float32,bfloat16,float16); "
                        "reports/mutants.md for float32, reports/mutants-<dtype>.md for the others")  # fmt: skip
    parser.add_argument("--out", default="reports", help="reports folder (default reports)")
    args = parser.parse_args(argv)
    builtin_budget = BUILTIN_BUDGET_SECONDS if args.budget_seconds is None else args.budget_seconds
    if args.mutant_budget_seconds is not None:
        mutant_budget = args.mutant_budget_seconds
    elif args.mutants_only and args.budget_seconds is not None:
        mutant_budget = args.budget_seconds
    else:
        mutant_budget = MUTANT_BUDGET_SECONDS
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    bad_dtypes = [d for d in dtypes if d not in ("float32", "bfloat16", "float16", "float64")]
    if bad_dtypes or not dtypes:
        parser.error(f"--dtypes={args.dtypes!r}: each must be one of float32, bfloat16, float16, float64")
    for label, value in (("--budget-seconds", builtin_budget), ("--mutant-budget-seconds", mutant_budget)):
        if not value > 0:
            parser.error(f"{label}={value!r} must be > 0")
    available = builtin_adapters()
    builtins = [] if args.mutants_only else list(available)
    mutants = list(CATALOGUE)
    # Built-ins this machine lacks a package for: a usage error when asked for by name, else named once and skipped.
    unavailable = {b.name: absent for b in BUILTINS if b.name not in available and (absent := b.missing())}
    if args.only:
        wanted = [n.strip() for n in args.only.split(",") if n.strip()]
        for name in wanted:
            if name in unavailable:
                parser.exit(2, f"{parser.prog}: error: {MissingDependency(f'--only {name}', unavailable[name])}\n")
        unknown = [n for n in wanted if n not in available and n not in CATALOGUE]
        if unknown:
            parser.error(f"--only: unknown {unknown}; built-ins {list(available)}, mutants {list(CATALOGUE)}")
        builtins = [n for n in builtins if n in wanted]
        mutants = [n for n in mutants if n in wanted]
    elif builtins:
        by_install: dict[str, list[str]] = {}
        for name, absent in unavailable.items():
            by_install.setdefault(" && ".join(r.install for r in absent), []).append(name)
        for install, names in by_install.items():
            _say(f"suite: skipping {', '.join(names)}: not installed here ({install})")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    note = notice(plots=True, progress=False)
    if note:
        _say(f"suite: {note}")
    plots = MATPLOTLIB.available

    started = time.perf_counter()
    outcomes = run_builtins(out, builtins, seed=args.seed, budget_seconds=builtin_budget, mutant_budget=mutant_budget,
                            plots=plots)  # fmt: skip
    mutant_outcomes = []
    for dtype in dtypes:
        outcomes_at = run_mutants(out, mutants, seed=args.seed, budget_seconds=mutant_budget, plots=plots, dtype=dtype)
        if outcomes_at:
            path = write_mutants_md(out, outcomes_at, seed=args.seed, budget_seconds=mutant_budget, dtype=dtype)
            _say(f"wrote {path}")
        mutant_outcomes += outcomes_at
    try:  # the index is optional: rebuilt from the report.json files, which are all written by now
        _say(f"wrote {write_index(out)}")
    except Exception as error:  # noqa: BLE001
        _say(f"suite: {out / 'index.md'} not written: {type(error).__name__}: {error}")
    everything = outcomes + mutant_outcomes
    bad = [o.name for o in everything if not o.ok]
    _say(f"suite: {len(everything) - len(bad)}/{len(everything)} as expected in {time.perf_counter() - started:.0f} s"
         + (f"; unexpected: {', '.join(bad)}" if bad else ""))  # fmt: skip
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
