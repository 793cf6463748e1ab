"""The family-wise false-alarm rate on the design users run (issue 33, item 4): the rows of a default run or of a
--tv run, the checks and the Holm family of `specref conform`, many seeds.

    python -m specref.calibration.design --design default --seeds 600 --out reports/calibration-design.json
    python -m specref.calibration.design --design tv=0.1 --seeds 60

Each seed runs the engine's own calls (passes.feed through a Caller in a thread, the T0 checks and the tallies of
the run, the joint loop), at fixed rows per scenario from the design, then every planned T2 check at its planned
Bonferroni alpha and Holm over the planned family at each level of LEVELS: a seed is flagged at a level when a T0
check or an adapter check fails, or Holm rejects any T2 check. What it leaves out of a full run is what cannot raise
a statistical false alarm: the run-level checks (reproducibility, coupling, the forced edge probe: certain checks a
correct engine passes) and the report. The rows:
  default   what a default run of the batched engine allocates once its law checks reach the resolution floor
            (0.1): each scenario at sizing.rows_for_tv of its law checks' demands at 0.1, the allocation of a 60 s
            run on a machine fast enough for the floor (engine/plan_rows.py)
  tv=T      plan_rows.tv_rows at T: every check at distance T (the same N on every machine)
The verdict at each level is the Clopper-Pearson 95% upper bound against the level.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from ..conformance.chain.adapters import as_adapter, builtin_adapters
from ..conformance.chain.contract import CONTRACT
from ..conformance.engine.calls import Caller
from ..conformance.engine.hangs import HangLimits
from ..conformance.engine.passes import Calls, Clock, feed
from ..conformance.engine.plan import LAW, family_of
from ..conformance.engine.plan_rows import tv_rows
from ..conformance.engine.run_plan import make_plan
from ..conformance.engine.sizing import rows_for_tv
from ..stats import ErrorBudget
from .analysis import clopper_pearson

LEVELS = (1e-3, 1e-2, 5e-2)
RUN_ALPHA = 1e-3
FLOOR = 0.1


def design_rows(design: str, adapter, plan) -> dict[str, int]:
    """The rows per scenario (the probe scenario, which has no T2 check, left out) of `design` (module doc)."""
    if design.startswith("tv="):
        rows = tv_rows(CONTRACT, adapter, plan, float(design[3:]))
    elif design == "default":
        rows = {}
        for s in plan.scenarios:
            if not s.probe:
                demands = CONTRACT.demands(adapter, s, plan.checks[s.name], plan.alphas)
                rows[s.name] = rows_for_tv([d for d in demands if family_of(d.check.partition("[")[0]) == LAW], FLOOR)
    else:
        raise ValueError(f"design={design!r} must be 'default' or 'tv=T'")
    return {name: n for name, n in rows.items() if not CONTRACT.get(name).probe}


def one_seed(caller, plan, rows: dict[str, int], seed: int) -> tuple[bool, list]:
    """(whether a certain check failed, the T2 results at their planned alphas) of one seed's calls."""
    from ..conformance.engine.joint import JOINT_TOKENS, joint_counts

    scenarios = [s for s in plan.scenarios if s.name in rows]
    calls = Calls.start(scenarios, seed, lambda s: CONTRACT.tally(caller.adapter, s, seed))
    clock = Clock.start(None)
    certain_failed, results = False, []
    for s in scenarios:
        n, tally = rows[s.name], calls.tallies[s.name]
        if s.joint:
            call = lambda r, chunk, states, s=s: feed(caller, s, calls, r, chunk, states, seed=seed, clock=clock)  # noqa: E731
            tally.joint = joint_counts(call, s, n, JOINT_TOKENS, slice_end=clock.deadline, deadline=clock.deadline)
        else:
            done, chunk = 0, 0
            while done < n:
                take = min(s.rows_per_call, n - done)
                feed(caller, s, calls, take, chunk, seed=seed, clock=clock)
                done, chunk = done + take, chunk + 1
        certain_failed |= any(not r.passed for r in tally.t0_results())
        certain_failed |= any(not r.passed for r in tally.certain_results(plan.checks[s.name].certain))
        results += tally.t2_results({k: plan.alphas[f"{k}[{s.name}]"] for k in plan.checks[s.name].tested})
    return certain_failed, results


def calibrate_design(design: str, seeds: int, first_seed: int = 100_000, engine: str = "batched",
                     progress=print, exclude: tuple[str, ...] = ()) -> dict:  # fmt: skip
    """exclude: scenarios left out of the run's plan (its family and alpha split are then the others')."""
    adapter = as_adapter(builtin_adapters()[engine]())
    names = [s.name for s in CONTRACT.scenarios(adapter) if s.name not in exclude]
    plan = make_plan(adapter, names, RUN_ALPHA, CONTRACT)
    rows = design_rows(design, adapter, plan)
    family = len(plan.alphas)
    flagged = {level: 0 for level in LEVELS}
    started = time.perf_counter()
    with Caller(adapter, CONTRACT, mode="thread", limits=HangLimits(None, 600.0)) as caller:
        for i in range(seeds):
            certain, results = one_seed(caller, plan, rows, first_seed + i)
            for level in LEVELS:
                holm = ErrorBudget(level).holm(results, family_size=family)
                flagged[level] += bool(certain or not all(r.passed for r in holm))
            if progress and (i + 1) % 10 == 0:
                progress(f"{design}: {i + 1}/{seeds} seeds, flagged {flagged}, {time.perf_counter() - started:.0f} s")
    rates = []
    for level in LEVELS:
        low, high = clopper_pearson(flagged[level], seeds)
        rates.append({"level": level, "flagged": flagged[level], "seeds": seeds, "rate": flagged[level] / seeds,
                      "upper_95": high, "lower_95": low, "upper_at_or_below_level": high <= level})  # fmt: skip
    return {"design": design, "engine": engine, "run_alpha": RUN_ALPHA, "family_size": family, "rows": rows,
            "excluded": list(exclude),
            "rows_per_seed": sum(rows.values()), "first_seed": first_seed, "seeds": seeds, "family_wise": rates,
            "seconds": time.perf_counter() - started}  # fmt: skip


#: What each design's rows are, in the report's words.
WHAT = {
    "default": "The design of a default run: each scenario at the rows its law checks need for the resolution floor "
    "(TV 0.1), what `specref conform batched` allocates in a 60 s budget on a machine fast enough for the floor.",
    "tv=0.1": "The design of `specref conform batched --tv 0.1`: every check (law and rule) sized to distance 0.1 "
    "from the scenarios' probabilities (the same N on every machine).",
}


def markdown(results: list[dict], machine: str = "") -> str:
    """reports/calibration-design.md from calibrate_design results (one per design)."""
    lines = [
        "# Family-wise false alarms on the design users run",
        "",
        "Generated by `python -m specref.calibration.design` (specref/calibration/design.py). " + machine,
        "",
    ]
    for r in results:
        lines += [f"## {r['design']} ({r['engine']}): {r['seeds']} seeds from seed {r['first_seed']}, "
                  f"{r['rows_per_seed']:,} rows per seed, {r['seconds']:.0f} s", "",
                  WHAT.get(r["design"].split(" ")[0], r["design"]), "",
                  f"Run alpha {r['run_alpha']:g} split by Bonferroni over the planned family of {r['family_size']} "
                  "T2 checks; each level below re-verdicts the same p-values by Holm over that family.", "",
                  "| level | flagged | seeds | rate | 95% Clopper-Pearson upper bound | upper bound <= level |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
        for f in r["family_wise"]:
            lines.append(f"| {f['level']:g} | {f['flagged']} | {f['seeds']} | {f['rate']:.4f} | {f['upper_95']:.4f} | "
                         f"{'yes' if f['upper_at_or_below_level'] else 'no: more seeds needed'} |")  # fmt: skip
        lines += ["", "Rows per scenario: " + ", ".join(f"{k} {v:,}" for k, v in r["rows"].items()) + "."
                  + (f" Left out of the plan, for time: {', '.join(r['excluded'])}." if r.get("excluded") else ""),
                  ""]  # fmt: skip
    lines += [
        f"With no flagged seed the upper bound reaches the level after {_seeds_for(0.05)} seeds at 0.05, "
        f"{_seeds_for(0.01)} at 0.01 and {_seeds_for(0.001)} at 0.001; each flagged seed needs more.",
        "",
    ]
    return "\n".join(lines)


def _seeds_for(level: float) -> int:
    """The fewest clean seeds whose 95% Clopper-Pearson upper bound is <= level: 1 - 0.05^(1/n) <= level."""
    n = 1
    while clopper_pearson(0, n)[1] > level:
        n = int(n * 1.05) + 1
    while n > 1 and clopper_pearson(0, n - 1)[1] <= level:
        n -= 1
    return n


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m specref.calibration.design", description=__doc__.splitlines()[0])
    p.add_argument("--design", default="default", help="'default' or 'tv=T'")
    p.add_argument("--seeds", type=int, default=600)
    p.add_argument("--first-seed", type=int, default=100_000)
    p.add_argument("--exclude", default="", metavar="A,B", help="scenarios left out of the plan (for time)")
    p.add_argument("--out", default=None, help="write the result as JSON here (default: stdout)")
    args = p.parse_args(argv)
    result = calibrate_design(args.design, args.seeds, args.first_seed,
                              progress=lambda m: print(m, file=sys.stderr, flush=True),
                              exclude=tuple(x for x in args.exclude.split(",") if x))  # fmt: skip
    text = json.dumps(result, indent=1) + "\n"
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
