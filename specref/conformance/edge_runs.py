"""Rare edges over many whole runs (`nox -s edges`): each IMPL conformed at seeds 0..K-1, verdicts counted.

    python -m specref.conformance.edge_runs --seeds 30 --budget 75 --out reports/edges batched transformers ...

Each run is `run()` as `specref conform IMPL --seed K --budget-seconds B` calls it (resolve.py; a spec ending in
"+tree" is given `--tree`), in one process: the budget counts from each run's start, and imports are paid once. The
forced edge probe runs after the passes and is deterministic per seed; the budget sizes the statistical checks only.
Writes OUT/edges.json (one line per run, then one summary per IMPL) and OUT/edges.md; prints the summaries.
`--probe-only` runs the forced probe alone at each seed (cheap: every built-in over 30 seeds in seconds); `--render
LOG ...` writes OUT/edges.md from the summaries in earlier logs instead (runs split over processes or environments,
e.g. vLLM's venv).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from collections import Counter
from pathlib import Path


def _describe() -> str:
    """The short commit of the checkout specref was imported from ("-dirty" with local changes)."""
    try:
        head = subprocess.run(["git", "describe", "--always", "--dirty"], cwd=Path(__file__).parent,
                              capture_output=True, text=True)  # fmt: skip
    except OSError:
        return "unknown"
    return head.stdout.strip() or "unknown"


#: The code that ran, read once at import, so a checkout that moves during a long sweep does not relabel it.
COMMIT = _describe()


def probes(impl: str, seeds: int, tell=print) -> dict:
    """The forced probe alone (edges/probe.py), at seeds 0..seeds-1: a verdict per seed ('edge named', 'passed',
    'not shown'), each edge with its site, and the probe's wall time. The probe is what a whole run's verdict adds
    for rare edges, and it is cheap, so every built-in can be swept where whole runs would take hours."""
    from .contracts import contract
    from .engine.calls import Caller
    from .resolve import resolve

    adapter, _ = resolve(impl.removesuffix("+tree"), tree=impl.endswith("+tree"))
    its = contract(adapter)
    adapter = its.wrap(adapter)
    verdicts, edges, walls = Counter(), Counter(), []
    with Caller(adapter, contract=its) as caller:
        for seed in range(seeds):
            started = time.perf_counter()
            probe = its.edge_probe(caller, seed)
            walls.append(time.perf_counter() - started)
            found = probe.summary.get("edges", {})
            named = {key: edge for key, edge in found.items() if not edge.get("natural")}
            verdict = ("edge named" if named else "law failure (no forced zero needed)" if found
                       else "not shown" if probe.summary.get("not_shown") else "passed")  # fmt: skip
            verdicts[verdict] += 1
            for key, edge in named.items():
                edges[f"{key}: {edge['words']}"] += 1
            tell(json.dumps({"impl": impl, "seed": seed, "probe": verdict, "edges": sorted(named),
                             "wall_s": round(walls[-1], 3)}))  # fmt: skip
    return {"impl": impl, "code": COMMIT, "seeds": seeds, "budget_seconds": 0, "verdicts": dict(verdicts),
            "edges_named": dict(edges), "other_failures": {}, "wall_seconds": [round(min(walls), 3),
            round(max(walls), 3)], "load1": [round(os.getloadavg()[0], 1)] * 2, "probe_only": True}  # fmt: skip


def runs(impl: str, seeds: int, budget: float, tell=print) -> dict:
    """The summary of `seeds` whole runs of `impl`: verdict counts, each edge with its site and how often it was
    named, failed checks besides the edges, wall times and the load seen."""
    from . import run
    from .resolve import resolve

    adapter, _ = resolve(impl.removesuffix("+tree"), tree=impl.endswith("+tree"))
    verdicts, edges, others, walls, loads = Counter(), Counter(), Counter(), [], []
    for seed in range(seeds):
        started = time.perf_counter()
        report = run(adapter, seed=seed, budget_seconds=budget)
        walls.append(time.perf_counter() - started)
        loads.append(os.getloadavg()[0])
        verdicts[report.verdict] += 1
        for key, edge in report.forced_probe.get("edges", {}).items():
            edges[f"{key}: {edge['words']}"] += 1
        failed = [r.name for r in report.checks if not r.passed and r.details.get("tier") != "none"]
        others.update(name for name in failed if not name.startswith("rare_edge["))
        tell(json.dumps({"impl": impl, "seed": seed, "verdict": report.verdict, "failed": failed,
                         "wall_s": round(walls[-1], 1), "load1": round(loads[-1], 1)}))  # fmt: skip
    return {"impl": impl, "code": COMMIT, "seeds": seeds, "budget_seconds": budget, "verdicts": dict(verdicts),
            "edges_named": dict(edges), "other_failures": dict(others),
            "wall_seconds": [round(min(walls), 1), round(max(walls), 1)],
            "load1": [round(min(loads), 1), round(max(loads), 1)]}  # fmt: skip


def markdown(summaries: list[dict]) -> str:
    lines = ["# Rare edges over many seeds", "", "`python -m specref.conformance.edge_runs` (nox -s edges): each "
             "engine at seeds 0..K-1. A row with a budget is K whole runs (`specref conform IMPL --seed K "
             "--budget-seconds B`): the forced edge probe is deterministic per seed and runs after the passes, so the "
             "budget sizes only the statistical checks; a run's verdict is non-conforming rather than rare edge when "
             "those checks fail beyond what the named edge explains in nature. A row 'probe only' is the forced probe "
             "alone at each seed: 'edge named', 'passed', 'not shown' (the probe cannot reach the engine's uniforms), "
             "or 'law failure' (zero-probability tokens with no forced zero). Code: the commit that ran. Wall times "
             "(seconds per run or per probe) and load (1-minute average, 2 shared cores) as measured.", "",
             "| engine | code | runs | budget (s) | verdicts | edges named (runs) | other failures (runs) | wall (s) "
             "| load |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for s in summaries:
        cell = lambda d: "; ".join(f"{k} ({v})" for k, v in d.items()) or "none"  # noqa: E731
        budget = "probe only" if s.get("probe_only") else f"{s['budget_seconds']:g}"
        lines.append(f"| `{s['impl']}` | {s.get('code', 'unknown')} | {s['seeds']} | {budget} | "
                     f"{cell(s['verdicts'])} | "
                     f"{cell(s['edges_named']).replace('|', '/')} | {cell(s['other_failures'])} | "
                     f"{s['wall_seconds'][0]}-{s['wall_seconds'][1]} | {s['load1'][0]}-{s['load1'][1]} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specref.conformance.edge_runs", description=__doc__)
    parser.add_argument("impls", nargs="*", metavar="IMPL")
    parser.add_argument("--render", nargs="+", metavar="LOG", help="edges.json logs to tabulate (no runs)")
    parser.add_argument("--probe-only", action="store_true", help="the forced probe alone at each seed (no run)")
    parser.add_argument("--builtins", action="store_true", help="add every kernel and tree built-in that runs here")
    parser.add_argument("--seeds", type=int, default=30)
    parser.add_argument("--budget", type=float, default=75.0, help="seconds per run (the demo's: 75)")
    parser.add_argument("--out", default="reports/edges")
    args = parser.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.render:
        lines = [json.loads(line) for log in args.render for line in Path(log).read_text().splitlines() if line]
        (out / "edges.md").write_text(markdown([line for line in lines if "seeds" in line]))
        return 0
    if args.builtins:
        from ..builtins import BUILTINS

        args.impls = [b.name for b in BUILTINS if b.kind != "pipeline" and b.available()] + args.impls
    if not args.impls:
        parser.error("give IMPL ... to run (or --builtins), or --render LOG ...")
    summaries = []
    with open(out / "edges.json", "w") as log:

        def tell(line: str) -> None:
            log.write(line + "\n")
            log.flush()

        for impl in args.impls:
            summaries.append(probes(impl, args.seeds, tell) if args.probe_only else
                             runs(impl, args.seeds, args.budget, tell))  # fmt: skip
            tell(json.dumps(summaries[-1]))
            print(json.dumps(summaries[-1]), flush=True)
    (out / "edges.md").write_text(markdown(summaries))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
