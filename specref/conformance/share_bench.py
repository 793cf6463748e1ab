"""Benchmark: the harness's share of a conformance run's time, as ratios in one run.

    python -m specref.conformance.share_bench [--quick] [--out reports] [--budget-seconds 60] [--impl batched]

Runs `specref conform batched` (default) at a 60 s budget (`--quick`: 20 s) and reads report.json's "timings"
(engine/timings.py): the share of the wall time outside the verifier's calls (1 - the verifier's seconds / wall),
the share when no call was in flight, specref's CPU against the verifier's (this process's CPU over the run, and the
worker's CPU inside verify), the phases (inputs, call, tally, checks, ...), and the run's resolution (the largest
detectable TV among the passed law checks, and which check it is). The machine's load average is
recorded before and after: on a shared machine wall time is polluted, and the CPU ratio is the figure that holds.
Writes reports/harness_share.md and harness_share.json. Extra arguments (the other benches' --threads, ...) are
ignored, so `nox -s bench -- --quick` passes --quick to each bench.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

#: The share of a 60 s run of the batched engine the harness aims to keep outside the verifier's calls.
TARGET_SHARE = 1 / 3


def measure(impl: str, budget_seconds: float, seed: int = 0) -> dict:
    from ..stats import tables
    from .engine.check_words import check_record
    from .engine.report import is_law_check
    from .resolve import resolve
    from .runner import run

    adapter = resolve(impl)[0]
    folder = tables.folder()
    stored_tables = len(list(folder.glob("*.npy"))) if folder is not None else None
    load_before, cpu, wall = os.getloadavg(), time.process_time(), time.perf_counter()
    report = run(adapter, seed=seed, budget_seconds=budget_seconds)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    timings = report.timings
    verifier_cpu = timings["verifier_cpu_seconds"]
    passed = [c for c in (check_record(r, report.contract.name) for r in report.checks)
              if is_law_check(c) and c["status"] == "passed" and c.get("detectable_tv") is not None]  # fmt: skip
    worst = max(passed, key=lambda c: c["detectable_tv"], default=None)
    return {
        "impl": impl,
        "budget_seconds": budget_seconds,
        "verdict": report.verdict,
        "rows": sum(s["rows"] for s in report.scenarios.values()),
        "load_average_before": [round(x, 2) for x in load_before],
        "load_average_after": [round(x, 2) for x in os.getloadavg()],
        "cpu_count": os.cpu_count(),
        "wall_seconds": round(wall, 3),
        "specref_cpu_seconds": round(cpu, 3),
        "verifier_cpu_seconds": verifier_cpu,
        "specref_cpu_share": round(cpu / (cpu + verifier_cpu), 4) if cpu + verifier_cpu else None,
        "outside_verifier_share": timings["outside_verifier_share"],
        "outside_calls_share": timings["outside_calls_share"],
        "target_share": round(TARGET_SHARE, 4),
        "resolution": report.resolution,
        "worst_law_check": None if worst is None else f"{worst['kind']}[{worst['scenario']}]",
        "uninformative": report.counts().get("uninformative", 0),
        "stored_tables_before": stored_tables,
        "timings": timings,
    }


def markdown(result: dict) -> str:
    t = result["timings"]
    phases = ", ".join(f"{name} {t['phases_wall_seconds'][name]:.1f} s ({t['phases_cpu_seconds'].get(name, 0):.1f} "
                       "CPU)" for name in t["phases_wall_seconds"] if name != "other")  # fmt: skip
    return "\n".join([
        "# The harness's share of a conformance run",
        "",
        f"`specref conform {result['impl']}` at a {result['budget_seconds']:g} s budget, in one run "
        "(`nox -s bench`; specref/conformance/share_bench.py). Ratios of this run's own times, so they hold on any "
        "machine; the load average says how polluted the wall times are.",
        "",
        f"- verdict: {result['verdict']}; {result['rows']:,} rows in {result['wall_seconds']:.1f} s wall; "
        f"{t['verifier_calls']:,} calls",
        f"- **share of the wall time outside the verifier's calls: {result['outside_verifier_share']:.3f}** "
        f"(target <= {result['target_share']:.3f}); with no call in flight: {result['outside_calls_share']:.3f}",
        f"- CPU: specref {result['specref_cpu_seconds']:.1f} s, the verifier {result['verifier_cpu_seconds']:.1f} s "
        f"(inside verify, in its worker): **specref's CPU share {result['specref_cpu_share']:.3f}**",
        f"- phases (wall, and specref's CPU; inputs and tally overlap the calls): {phases}; other "
        f"{t['phases_wall_seconds']['other']:.1f} s",
        f"- resolution: every passed law check detects TV {result['resolution'] or float('nan'):.3g} (the worst, "
        f"{result['worst_law_check']}); {result['uninformative']} uninformative",
        f"- Pearson lattice tables on disk before the run (stats/tables.py; 0: computed in this run): "
        f"{result['stored_tables_before']}",
        f"- load average (1, 5, 15 min) before {result['load_average_before']}, after "
        f"{result['load_average_after']}, on {result['cpu_count']} cores",
        "",
    ])  # fmt: skip


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specref.conformance.share_bench",
                                     description=__doc__.splitlines()[0])  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="a 20 s run instead of 60 s")
    parser.add_argument("--out", default="reports", help="directory for harness_share.md and .json")
    parser.add_argument("--budget-seconds", type=float, default=None, help="the run's budget (default 60, quick 20)")
    parser.add_argument("--impl", default="batched", help="the implementation run (default: the batched engine)")
    args, _ = parser.parse_known_args(argv)
    budget = args.budget_seconds or (20.0 if args.quick else 60.0)
    result = measure(args.impl, budget)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "harness_share.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "harness_share.md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
