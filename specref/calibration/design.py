"""The family-wise false-alarm rate on the design users run (issue 33, item 4): the rows of a default run or of a
--tv run, the checks and the Holm family of `specref conform`, many seeds.

    python -m specref.calibration.design --design default --seeds 3000            # all scenarios, one file
    python -m specref.calibration.design --design default --seeds 3000 --only large_v8193_g2,large_v151936_g1 \
        --part large                                                              # joined per seed
    python -m specref.calibration.design --render                                 # reports/calibration-design.md

Each seed runs the engine's own calls (passes.feed through a Caller in a thread, the T0 checks and the tallies of
the run, the joint loop), at fixed rows per scenario from the design, then every planned T2 check; its p-values and
certain verdicts are saved, one line a seed (design_store.py, reports/calibration-design/<design>/<part>.jsonl).
The report is rendered from the saved p-values over the family the current registry plans: Holm over that family
at each level of LEVELS; a seed is flagged at a level when a T0 check or a certain check fails, or Holm rejects any
T2 check. What it leaves out of a full run is what cannot raise a statistical false alarm: the run-level checks
(reproducibility, coupling, the forced edge probe: certain checks a correct engine passes) and the report. The rows:
  default   what a default run of the batched engine allocates once its law checks reach the resolution floor
            (0.1): each scenario at sizing.rows_for_tv of its law checks' demands at 0.1, the allocation of a 60 s
            run on a machine fast enough for the floor (engine/plan_rows.py)
  tv=T      plan_rows.tv_rows at T: every check at distance T (the same N on every machine)
The rows are those of the full plan (every scenario, its Bonferroni split) whichever scenarios a part runs. The
verdict at each level is the Clopper-Pearson 95% upper bound against the level.
"""

from __future__ import annotations

import argparse
import platform
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
from .analysis import clopper_pearson
from .design_store import LEVELS as STORE_LEVELS
from .design_store import Writer, load, scenario_digest, verdicts

LEVELS = STORE_LEVELS
RUN_ALPHA = 1e-3
FLOOR = 0.1
STORE = Path("reports/calibration-design")
#: Scenarios whose share of the family-wise rate is bounded by their checks' size (design_store.verdicts), not by
#: their seeds: large_v151936_g1 costs about 20 s a seed on a loaded 2-core machine, the other 17 together 1.5 s.
BY_SIZE = ("large_v151936_g1",)


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


def one_seed(caller, plan, rows: dict[str, int], seed: int) -> tuple[list[str], dict[str, list]]:
    """(the scenarios whose T0 or certain checks failed, scenario -> its planned T2 checks' p-values, None where not
    tested) of one seed's calls, for the scenarios in `rows`."""
    from ..conformance.engine.joint import JOINT_TOKENS, joint_counts

    scenarios = [s for s in plan.scenarios if s.name in rows]
    calls = Calls.start(scenarios, seed, lambda s: CONTRACT.tally(caller.adapter, s, seed))
    clock = Clock.start(None)
    failed, pvalues = [], {}
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
        if any(not r.passed for r in tally.t0_results() + tally.certain_results(plan.checks[s.name].certain)):
            failed.append(s.name)
        kinds = plan.checks[s.name].tested
        results = tally.t2_results({k: plan.alphas[f"{k}[{s.name}]"] for k in kinds})
        pvalues[s.name] = [r.p_value if r.tested else None for r in results]
    return failed, pvalues


def calibrate_design(design: str, seeds: int, first_seed: int = 100_000, engine: str = "batched",
                     progress=print, only: tuple[str, ...] = (), part: str = "main",
                     store: Path = STORE) -> Path:  # fmt: skip
    """Run `seeds` seeds of `design` over the scenarios `only` (default: every one with a T2 check), appending each
    seed's p-values to store/<design>/<part>.jsonl (seeds already there are skipped). Returns the file."""
    adapter = as_adapter(builtin_adapters()[engine]())
    plan = make_plan(adapter, None, RUN_ALPHA, CONTRACT)
    rows = design_rows(design, adapter, plan)
    unknown = [n for n in only if n not in rows]
    if unknown:
        raise ValueError(f"only={','.join(unknown)!r}: not a scenario of the plan with T2 checks ({sorted(rows)})")
    rows = {n: r for n, r in rows.items() if not only or n in only}
    by_name = {s.name: s for s in plan.scenarios}
    header = {"design": design, "engine": engine, "run_alpha": RUN_ALPHA, "family_size": len(plan.alphas),
              "scenarios": {n: {"rows": r, "digest": scenario_digest(by_name[n]),
                                "checks": list(plan.checks[n].tested)} for n, r in rows.items()}}  # fmt: skip
    writer = Writer(Path(store) / design / f"{part}.jsonl", header)
    started, ran = time.perf_counter(), 0
    with Caller(adapter, CONTRACT, mode="thread", limits=HangLimits(None, 600.0)) as caller:
        for seed in range(first_seed, first_seed + seeds):
            if seed in writer.done:
                continue
            writer.add(seed, *one_seed(caller, plan, rows, seed))
            ran += 1
            if progress and ran % 10 == 0:
                progress(f"{design}/{part}: {ran} seeds run, {len(writer.done)} saved, "
                         f"{time.perf_counter() - started:.0f} s")  # fmt: skip
    return writer.path


def render(store: Path = STORE, engine: str = "batched", exclude: tuple[str, ...] = (),
           by_size: tuple[str, ...] = ()) -> list[dict]:  # fmt: skip
    """The verdicts of every design saved under `store`, over the family the current registry plans (less the
    scenarios in `exclude`, whose checks then leave the family and its split; `by_size`: design_store.verdicts)."""
    adapter = as_adapter(builtin_adapters()[engine]())
    out = []
    for directory in sorted(p for p in Path(store).iterdir() if p.is_dir()):
        headers, seeds = load(directory)
        names = [s.name for s in CONTRACT.scenarios(adapter) if s.name not in exclude]
        plan = make_plan(adapter, names, RUN_ALPHA, CONTRACT)
        current = design_rows(directory.name, adapter, make_plan(adapter, None, RUN_ALPHA, CONTRACT))
        stale = [n for n in headers if n in current and (headers[n]["rows"] != current[n] or headers[n]["digest"]
                 != scenario_digest(next(s for s in plan.scenarios if s.name == n)))]  # fmt: skip
        absent = [s.name for s in plan.scenarios if not s.probe and s.name not in seeds]
        if absent:  # not run yet: their checks are left out of the family (a smaller one), and the report says so
            names = [n for n in names if n not in absent]
            plan = make_plan(adapter, names, RUN_ALPHA, CONTRACT)
        result = verdicts(plan, headers, seeds, LEVELS, RUN_ALPHA, tuple(n for n in by_size if n in seeds))
        out.append({"design": directory.name, "engine": engine, "excluded": list(exclude) + absent,
                    "stale": stale, "rows_per_seed": sum(result["rows"].values()), **result})  # fmt: skip
    return out


#: What each design's rows are, in the report's words.
WHAT = {
    "default": "The design of a default run: each scenario at the rows its law checks need for the resolution floor "
    "(TV 0.1), what `specref conform batched` allocates in a 60 s budget on a machine fast enough for the floor.",
    "tv=0.1": "The design of `specref conform batched --tv 0.1`: every check (law and rule) sized to distance 0.1 "
    "from the scenarios' probabilities (the same N on every machine).",
}


def markdown(results: list[dict], machine: str = "") -> str:
    """reports/calibration-design.md from render() results (one per design)."""
    lines = [
        "# Family-wise false alarms on the design users run",
        "",
        "Generated by `python -m specref.calibration.design --render` (specref/calibration/design.py) from the "
        f"p-values each seed saved under {STORE}/ (design_store.py), re-verdicted over the family the current check "
        "registry plans. " + machine,
        "",
    ]
    for r in results:
        lines += [f"## {r['design']} ({r['engine']}): {r['seeds']:,} seeds ({r['first_seed']} to {r['last_seed']}), "
                  f"{r['rows_per_seed']:,} rows per seed", "",
                  WHAT.get(r["design"], r["design"]), "",
                  f"Run alpha {r['run_alpha']:g} split by Bonferroni over the planned family of {r['family_size']} "
                  "T2 checks; each level below re-verdicts the same p-values by Holm over that family. "
                  f"{r['certain_flagged']} seeds failed a certain check.", "",
                  "| level | flagged | seeds | rate | 95% Clopper-Pearson upper bound | upper bound <= level |",
                  "|---|---|---|---|---|---|"]  # fmt: skip
        for f in r["family_wise"]:
            lines.append(f"| {f['level']:g} | {f['flagged']} | {f['seeds']:,} | {f['rate']:.4f} | {f['upper_95']:.4f} "
                         f"| {'yes' if f['upper_at_or_below_level'] else 'no: more seeds needed'} |")  # fmt: skip
        parts = r["family_wise"][0]["groups"]
        if len(parts) > 1:
            lines += ["", f"The scenarios ran different seeds, so the rate is bounded by a union over {len(parts)} "
                      "groups (a seed is flagged iff one of its groups is): the bound is the sum of the groups' "
                      f"Clopper-Pearson bounds, each at confidence {r['confidence_per_group']:.4f}; the table's "
                      "flagged and seeds are the first group's, its rate the sum of the groups' rates.", "",
                      "| level | " + " | ".join(", ".join(g["scenarios"]) if len(g["scenarios"]) < 3
                                            else f"{len(g['scenarios'])} scenarios" for g in parts) + " |",
                      "|---|" + "---|" * len(parts)]  # fmt: skip
            for f in r["family_wise"]:
                lines.append(f"| {f['level']:g} | " + " | ".join(f"{g['flagged']} of {g['seeds']:,} (bound "
                             f"{g['upper']:.4f}{', by size' if g['bound'] == 'size' else ''})"
                             for g in f["groups"]) + " |")  # fmt: skip
            if any(g["bound"] == "size" for g in parts):
                lines += [
                    "",
                    "A group bounded *by size* ran too few seeds to measure its share: its k tested checks "
                    f"add k x level / {r['family_size']} (each p-value valid, P(p <= t) <= t, as the checks "
                    "are built and their exact sizes show; not measured on this design), its certain checks "
                    "none (a correct engine cannot fail them); its flagged seeds are shown as a check.",
                ]
        lines += ["", "Rows per scenario: " + ", ".join(f"{k} {v:,}" for k, v in r["rows"].items()) + "."]
        if r["excluded"]:
            lines += ["", f"Not in this family (no saved seeds): {', '.join(r['excluded'])}."]
        if r["stale"]:
            lines += ["", f"Saved at rows or laws that differ from the current design's: {', '.join(r['stale'])} "
                      "(the numbers hold for the rows listed, not the current ones)."]  # fmt: skip
        if r["unplanned_saved"]:
            lines += ["", f"Saved but not in the current family: {', '.join(r['unplanned_saved'])}."]
        lines.append("")
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
    p.add_argument("--only", default="", metavar="A,B", help="run only these scenarios (join the rest per seed)")
    p.add_argument("--part", default="main", help="the file name of this run under the design's folder")
    p.add_argument("--store", default=str(STORE))
    p.add_argument("--render", action="store_true", help="write reports/calibration-design.md from the saved seeds")
    p.add_argument("--exclude", default="", metavar="A,B", help="with --render: scenarios left out of the family")
    p.add_argument("--machine", default="", help="with --render: a sentence on the machine the seeds ran on")
    p.add_argument("--by-size", default=None, metavar="A,B", help="with --render: scenarios bounded by their checks' "
                   "size, not their few seeds (default: BY_SIZE; '' for none)")  # fmt: skip
    args = p.parse_args(argv)
    if args.render:
        by_size = tuple(x for x in args.by_size.split(",") if x) if args.by_size is not None else BY_SIZE
        results = render(Path(args.store), exclude=tuple(x for x in args.exclude.split(",") if x), by_size=by_size)
        machine = args.machine or f"Rendered on {platform.node()}."
        Path("reports/calibration-design.md").write_text(markdown(results, machine))
        return 0
    calibrate_design(args.design, args.seeds, args.first_seed, only=tuple(x for x in args.only.split(",") if x),
                     part=args.part, store=Path(args.store),
                     progress=lambda m: print(m, file=sys.stderr, flush=True))  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
