"""Shards: one run split into N disjoint parts, run anywhere, merged exactly.

    specref conform IMPL --rows 100000 --shard 0/3 --report out/shard-0     # ... 1/3, 2/3, on any scheduler
    specref merge out/shard-0 out/shard-1 out/shard-2 --out out/merged

Every call's inputs and generator seed derive from (run seed, scenario, chunk) alone (passes.py), and every count
behind a check is a sum over calls. With a fixed N per scenario the chunks are fixed too: chunk 0 (the probe-pass
call), chunks 1, 2, ... of the main pass, and for a joint scenario batches 0, 1, ... (chunks 1000 + 3b + j). Shard
K of N runs the units u (chunk c is unit c, joint batch b is unit b + 1) with u mod N = K, and the run-level checks
(reproducibility, coupling) on shard 0. The plan and the alpha split are the unsharded run's. Its report.json keeps
the raw counts; `merge` sums them and recomputes every check at the merged N, so the merged report equals, bit for
bit, the report of one unsharded run with the same seed and rows (wall times aside), when no call fails.

Every contract shards the same way (chains, trees, pipelines): a tally's counts travel as counts.py encodes them.
A shard's own report carries only the certain checks (adapter, T0, run-level): a failure there is already the
verdict (exit 1); otherwise its verdict is "partial" (exit 0) and the T2 checks wait for the merge.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ... import __version__, arguments
from ...errors import BadArgument, MergeError
from ...stats import CheckResult, ErrorBudget
from .assemble import build_report
from .calls import AdapterFailure
from .contract import Contract
from .counts import chunk_of
from .fingerprint import fingerprint, words
from .passes import Calls
from .report import RESOLUTION_FLOOR, Report
from .results import failure_details, t0_result
from .run_plan import RunPlan, make_plan

PARTIAL = "partial"


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count` (0 <= index < count)."""

    index: int
    count: int

    @classmethod
    def of(cls, shard) -> Shard:
        """From (K, N), "K/N" or a Shard; raises BadArgument (a ValueError) naming the value."""
        if isinstance(shard, Shard):
            return shard
        return cls(*arguments.shard(shard))

    def owns(self, unit: int) -> bool:
        """Whether this shard runs a scenario's unit (chunk c is unit c; joint batch b is unit b + 1)."""
        return unit % self.count == self.index


def fixed_rows(plan: RunPlan, rows, shard: Shard) -> dict[str, int]:
    """The fixed N of every scenario; a shard needs one, since a time budget leaves its chunk set undefined."""
    fixed = {s.name: rows.get(s.name) if isinstance(rows, dict) else rows for s in plan.scenarios}
    missing = [name for name, n in fixed.items() if n is None]
    if missing:
        raise BadArgument(f"shard={shard.index}/{shard.count} needs a fixed number of rows (rows=N, --rows N) for "
                         f"every scenario, not a time budget, to fix its chunks; none for {missing}")  # fmt: skip
    return fixed


# --- a shard's report -----------------------------------------------------------------------------------------------


@dataclass
class ShardReport(Report):
    """A shard's report: its certain checks and, in to_dict()["shard"], the raw counts that `merge` sums."""

    shard: dict = field(default_factory=dict)

    def summary(self) -> str:
        k, n = self.shard["index"], self.shard["count"]
        merge = f"  shard {k}/{n}: counts in report.json; `specref merge` the {n} shard folders for the verdict"
        return super().summary() + "\n" + merge

    @property
    def law_kept(self) -> None:
        """A shard runs no law check: it claims nothing about the law until the merge."""
        return None

    def to_dict(self) -> dict:
        return {**super().to_dict(), "shard": self.shard}


def shard_report(contract: Contract, adapter, plan: RunPlan, calls: Calls, run_results: list, run_not_run: list, *,
                 shard: Shard, rows: dict, seed: int, budget_seconds: float, alpha: float,
                 wall_seconds, resolution: float = RESOLUTION_FLOOR,
                 sizing: dict | None = None) -> ShardReport:  # fmt: skip
    """The certain checks this shard can decide, and its counts. Scenarios it ran no unit of carry no check."""
    report = ShardReport(adapter, contract, seed=seed, budget_seconds=budget_seconds, alpha=alpha,
                         resolution_floor=resolution, sizing=sizing or {})  # fmt: skip
    results = list(run_results)
    for s in plan.scenarios:
        tally, summary, failure = calls.tallies[s.name], calls.summary(s.name), calls.broken.get(s.name)
        report.scenarios[s.name] = {"description": s.description,
                                    **contract.describe(adapter, s, tally, failure),
                                    "vocab_size": s.vocab_size, "rows": tally.rows,
                                    "rows_per_second": tally.rows / tally.seconds if tally.seconds else None,
                                    "calls": summary}  # fmt: skip
        if failure is not None:
            results.append(t0_result(f"adapter[{s.name}]", 1, tally.rows, failure_details(failure)))
        if tally.rows:
            report.add_t0(s.name, tally.t0_results())
    report.add_t0("run", results + run_not_run)
    report.finish(ErrorBudget(alpha), wall_seconds(), family_size=len(plan.alphas))
    if not report.failures:
        report.verdict = PARTIAL
    report.shard = {
        "index": shard.index,
        "count": shard.count,
        "plan": plan.fingerprint(),
        "scenarios": [s.name for s in plan.scenarios],
        "rows": rows,
        "specref": __version__,
        "fingerprint": fingerprint(adapter, report.to_dict()["adapter"]),
        "counts": {name: t.counts() for name, t in calls.tallies.items()},
        "calls": {s.name: calls.summary(s.name) for s in plan.scenarios},
        "broken": {name: _encode_failure(f) for name, f in calls.broken.items()},
        "stopped": calls.stopped,
        "finished": sorted(calls.finished),
        "run_checks": [r.to_dict() for r in run_results],
        "run_not_run": [r.to_dict() for r in run_not_run],
    }
    return report


def _encode_failure(failure: AdapterFailure) -> dict:
    return {"kind": failure.kind, "message": failure.message, "location": failure.location, "call": failure.call}


# --- merge ----------------------------------------------------------------------------------------------------------


@dataclass
class Merged:
    """The shards' counts summed (assemble.Counted): what one unsharded run's calls would have left."""

    tallies: dict  # scenario -> its contract's tally
    summaries: dict[str, dict]
    broken: dict[str, AdapterFailure]
    stopped: str | None
    finished: set[str]

    def summary(self, name: str) -> dict:
        return self.summaries[name]


def load(folders: list[str]) -> list[tuple[str, dict]]:
    """(folder, its report.json record) of each shard folder."""
    records = []
    for folder in folders:
        path = Path(folder) / "report.json"
        try:
            records.append((folder, json.loads(path.read_text())))
        except (OSError, ValueError) as error:
            raise MergeError(f"{folder}: cannot read {path}: {error}") from None
    return records


def check_shards(records: list[tuple[str, dict]]) -> list[tuple[str, dict]]:
    """The (folder, record) pairs sorted by shard index, checked to be the N shards of one run, each exactly once."""
    if not records:
        raise MergeError("no shard folders given")
    for folder, record in records:
        if not isinstance(record.get("shard"), dict):
            raise MergeError(f"{folder}: its report.json is not a shard's (run `specref conform ... --shard K/N`)")
    first_folder, first = records[0]
    same = {"impl": lambda r: r["impl"], "seed": lambda r: r["seed"], "alpha": lambda r: r["alpha"],
            "N (shard count)": lambda r: r["shard"]["count"], "plan": lambda r: r["shard"]["plan"],
            "scenarios": lambda r: r["shard"]["scenarios"], "rows": lambda r: r["shard"]["rows"],
            "adapter": lambda r: r["adapter"], "specref version": lambda r: r["shard"]["specref"]}  # fmt: skip
    for folder, record in records[1:]:
        for what, get in same.items():
            if get(record) != get(first):
                raise MergeError(f"{folder}: {what} {get(record)!r} differs from {get(first)!r} in {first_folder}: "
                                 "not shards of one run")  # fmt: skip
    for folder, record in records[1:]:
        mine, theirs = record["shard"].get("fingerprint"), first["shard"].get("fingerprint")
        if (mine or {}).get("digest") != (theirs or {}).get("digest"):
            raise MergeError(f"{folder} ran {words(mine)}, but {first_folder} ran {words(theirs)}: not shards of "
                             "one code")  # fmt: skip
    seen: dict[int, str] = {}
    for folder, record in records:
        k = record["shard"]["index"]
        if k in seen:
            raise MergeError(f"{folder} and {seen[k]} are both shard {k}/{first['shard']['count']}")
        seen[k] = folder
    absent = sorted(set(range(first["shard"]["count"])) - set(seen))
    if absent:
        given = ", ".join(folder for folder, _ in records)
        raise MergeError(f"shards {absent} of {first['shard']['count']} are missing (given: {given})")
    return sorted(records, key=lambda fr: fr[1]["shard"]["index"])


def merge_records(records: list[tuple[str, dict]], contract_named) -> tuple[Report, str | None]:
    """(the merged Report, the IMPL spec): the shards' counts summed, every check recomputed at the merged N.

    records: (folder or label, report.json record) of each shard, in any order; contract_named(name) -> the bundle
    of the contract report.json names (specref.conformance.contracts.contract)."""
    records = check_shards(records)
    first = records[0][1]
    under = contract_named(first["contract"])
    adapter = under.adapter_from_record(first)  # as the shards recorded it: merge never calls the implementation
    plan = make_plan(adapter, first["shard"]["scenarios"], first["alpha"], under)
    if plan.fingerprint() != first["shard"]["plan"]:
        raise MergeError(f"{records[0][0]}: the shards' plan differs from this specref's (scenario rows, checks or "
                         f"alphas; shards by specref {first['shard']['specref']}, this is {__version__})")  # fmt: skip
    shards = [record["shard"] for _, record in records]
    merged = Merged({}, {}, {}, None, set(plan.checks))
    for s in plan.scenarios:
        merged.tallies[s.name] = tally = under.tally(adapter, s, first["seed"])
        for part in shards:
            tally.absorb(part["counts"][s.name])
        merged.summaries[s.name] = _sum_calls([sh["calls"][s.name] for sh in shards])
        failures = [sh["broken"][s.name] for sh in shards if s.name in sh["broken"]]
        if failures:  # the earliest chunk's, as one run would have stopped there
            f = min(failures, key=lambda f: chunk_of(f["call"]))
            merged.broken[s.name] = AdapterFailure(f["kind"], f["message"], f["location"], f["call"])
    for sh in shards:
        merged.stopped = merged.stopped or sh["stopped"]
        merged.finished &= set(sh["finished"])
    run_results = [CheckResult.from_dict(r) for r in shards[0]["run_checks"]]
    run_not_run = [CheckResult.from_dict(r) for r in shards[0]["run_not_run"]]
    wall = sum(record["wall_seconds"] for _, record in records)  # the shards' time, summed
    report = build_report(under, adapter, plan, merged, run_results, run_not_run, seed=first["seed"],
                          budget_seconds=_total_budget(records), alpha=first["alpha"], wall_seconds=lambda: wall,
                          resolution=first.get("resolution_floor", RESOLUTION_FLOOR))  # fmt: skip
    report.sizing = first.get("sizing") or {}
    return report, first.get("spec")


def _total_budget(records) -> float | None:
    budgets = [r["budget_seconds"] for _, r in records]
    return None if None in budgets else sum(budgets)


def _sum_calls(parts: list[dict]) -> dict:
    ran = [p for p in parts if p["count"]]
    if not ran:
        return {"count": 0, "first": None, "rows": 0}
    return {"count": sum(p["count"] for p in ran), "first": min((p["first"] for p in ran), key=chunk_of),
            "chunks": [min(p["chunks"][0] for p in ran), max(p["chunks"][1] for p in ran)],
            "rows": sum(p["rows"] for p in ran)}  # fmt: skip
