"""The p-values of every seed of a design calibration, saved one line a seed, and the family-wise verdicts rendered
from them over the family the current check registry plans (so a change to the family, such as a check demoted
to a derived number, is re-verdicted without rerunning).

A file is one run over some scenarios of a design (reports/calibration-design/<design>/<part>.jsonl):
  line 1   {"design", "engine", "scenarios": {name: {"rows", "digest", "checks": [kind, ...]}}, ...}
  then     [seed, [names of the scenarios whose certain checks failed], {name: [p or null (not tested), ...]}]
Every call's inputs and generator seed derive from (run seed, scenario, chunk) alone (engine/passes.py,
chain/scenarios.py), and each scenario's tally reads its own calls only, so a scenario's p-values for a seed do not
depend on which other scenarios ran: files over different scenarios join per seed. A scenario joins only where its
laws' digest equals the current scenario's (a redesigned scenario needs its own run).
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np

from .analysis import clopper_pearson

LEVELS = (1e-3, 1e-2, 5e-2)


def scenario_digest(s) -> str:
    """crc32 of a scenario's laws as given and its shape (what its p-values are draws of)."""
    digest = zlib.crc32(f"{s.name}:{s.gamma}:{s.rows_per_call}".encode())
    for law in (s.target, s.draft):
        digest = zlib.crc32(np.ascontiguousarray(law), digest)
    return f"{digest:08x}"


class Writer:
    """Appends one line a seed to `path`, after a header; resumes an existing file with the same header."""

    def __init__(self, path: Path, header: dict):
        self.path = Path(path)
        self.done: set[int] = set()
        if self.path.exists():
            lines = self.path.read_text().splitlines()
            if lines and json.loads(lines[0]) != header:
                raise ValueError(f"path={str(path)!r} holds another run (its header differs); choose another --part")
            self.done = {json.loads(line)[0] for line in lines[1:] if line.strip()}
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.path.write_text(json.dumps(header, sort_keys=True) + "\n")
        self.header = header

    def add(self, seed: int, certain_failed: list[str], pvalues: dict[str, list]) -> None:
        row = {name: [None if p is None else float(f"{p:.6g}") for p in ps] for name, ps in pvalues.items()}
        with self.path.open("a") as f:
            f.write(json.dumps([seed, certain_failed, row], separators=(",", ":")) + "\n")
        self.done.add(seed)


def load(directory: Path) -> tuple[dict, dict[str, dict[int, tuple[bool, dict]]]]:
    """(scenario -> its header entry, scenario -> seed -> (certain failed, kind -> p)) over every file under
    `directory`; a scenario in two files must have equal headers there (the same rows and laws)."""
    headers: dict[str, dict] = {}
    seeds: dict[str, dict[int, tuple[bool, dict]]] = {}
    for path in sorted(Path(directory).glob("*.jsonl")):
        lines = path.read_text().splitlines()
        header = json.loads(lines[0])
        for name, entry in header["scenarios"].items():
            if headers.setdefault(name, entry) != entry:
                raise ValueError(f"scenario {name!r} has different rows or laws in {path}: runs do not join")
        for line in lines[1:]:
            if not line.strip():
                continue
            seed, failed, row = json.loads(line)
            for name, ps in row.items():
                kinds = header["scenarios"][name]["checks"]
                seeds.setdefault(name, {})[seed] = (name in failed, dict(zip(kinds, ps)))
    return headers, seeds


def flagged(pvalues: list, certain_failed: bool, level: float, family_size: int) -> bool:
    """Whether a seed is flagged at `level`: a certain check failed, or Holm over the family rejects a T2 check,
    which it does exactly when the smallest tested p-value is <= level / family_size (Holm's first step is
    Bonferroni's; untested checks, None, keep their slots in the family)."""
    tested = [p for p in pvalues if p is not None]
    return certain_failed or (bool(tested) and min(tested) <= level / family_size)


def groups(names: list[str], seeds: dict) -> list[tuple[list[str], list[int]]]:
    """The planned scenarios split by the seeds they share: a main group, the scenarios that all have one
    scenario's seeds (the choice that covers most scenario-seeds), on those seeds; then each other scenario on its
    own seeds."""

    def members(common: frozenset) -> list[str]:
        return [n for n in names if common <= set(seeds[n])]

    candidates = {frozenset(seeds[n]) for n in names}
    main = max(candidates, key=lambda c: (len(members(c)) * len(c), len(c)))
    joined = members(main)
    return [(joined, sorted(main))] + [([n], sorted(seeds[n])) for n in names if n not in joined]


def verdicts(plan, headers: dict, seeds: dict, levels=LEVELS, run_alpha: float = 1e-3, by_size=()) -> dict:
    """The family-wise verdicts over plan's family (plan.alphas: every planned T2 check). One group of scenarios
    (groups()) when every planned scenario ran the same seeds: the rate of flagged seeds and its 95% Clopper-Pearson
    bound. Several: a seed of the full design is flagged iff one of its groups is (flagged() is a union over
    checks), so the rate is at most the sum of the groups' rates, and the sum of their bounds, each at confidence
    1 - 0.05 / groups, is a 95% upper bound on it. A scenario in `by_size` (one too slow to run the seeds the
    others do) is a group bounded by its checks' size instead: its k tested checks reject at level / m each with
    probability at most level / m (valid p-values), so it adds k level / m; its own saved seeds are shown beside.
    A planned check with no saved p-value is an error (the family grew: rerun its scenario)."""
    names = [s.name for s in plan.scenarios if not s.probe]
    missing = [n for n in names if n not in seeds]
    if missing:
        raise ValueError(f"no saved seeds for planned scenarios {missing}: run them (--only) or leave them out")
    family = list(plan.alphas)
    by_scenario: dict[str, list[str]] = {n: [] for n in names}
    for check in family:
        kind, name = check[:-1].split("[", 1)
        if kind not in headers[name]["checks"]:
            raise ValueError(f"check {check!r} is planned but was not saved: rerun scenario {name!r}")
        by_scenario[name].append(kind)
    parts = groups([n for n in names if n not in by_size], seeds) + [([n], sorted(seeds[n])) for n in by_size]
    confidence = 1 - 0.05 / sum(members[0] not in by_size for members, _ in parts)
    rates = []
    for level in levels:
        rows = []
        for members, group_seeds in parts:
            hits = sum(flagged([seeds[n][seed][1][k] for n in members for k in by_scenario[n]],
                               any(seeds[n][seed][0] for n in members), level, len(family))
                       for seed in group_seeds)  # fmt: skip
            if members[0] in by_size:
                high, how = len(by_scenario[members[0]]) * level / len(family), "size"
            else:
                high, how = clopper_pearson(hits, len(group_seeds), confidence)[1], "measured"
            rows.append({"scenarios": members, "flagged": hits, "seeds": len(group_seeds), "upper": high,
                         "bound": how})  # fmt: skip
        upper = min(1.0, sum(r["upper"] for r in rows))
        main = rows[0]
        rates.append({"level": level, "flagged": main["flagged"], "seeds": main["seeds"],
                      "rate": sum(r["flagged"] / max(r["seeds"], 1) for r in rows), "upper_95": upper,
                      "upper_at_or_below_level": upper <= level, "groups": rows})  # fmt: skip
    main_seeds = parts[0][1]
    return {"family_size": len(family), "run_alpha": run_alpha, "seeds": len(main_seeds),
            "first_seed": main_seeds[0] if main_seeds else None, "last_seed": main_seeds[-1] if main_seeds else None,
            "certain_flagged": sum(any(seeds[n][seed][0] for n in parts[0][0]) for seed in main_seeds),
            "family_wise": rates, "confidence_per_group": confidence,
            "rows": {n: headers[n]["rows"] for n in names}, "unplanned_saved": _unplanned(headers, plan)}  # fmt: skip


def _unplanned(headers: dict, plan) -> list[str]:
    """Saved checks the current plan does not test (left out of the family: a demoted check, say)."""
    planned, names = set(plan.alphas), {s.name for s in plan.scenarios}
    return sorted(f"{k}[{n}]" for n, h in headers.items() if n in names for k in h["checks"]
                  if f"{k}[{n}]" not in planned)  # fmt: skip
