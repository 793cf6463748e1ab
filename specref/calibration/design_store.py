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

from ..stats import ErrorBudget
from ..stats.record import CheckResult
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


def verdicts(plan, headers: dict, seeds: dict, levels=LEVELS, run_alpha: float = 1e-3) -> dict:
    """The family-wise verdicts over plan's family (plan.alphas: every planned T2 check), on the seeds every planned
    scenario has. A planned check with no saved p-value is an error (the family grew: rerun its scenario)."""
    names = [s.name for s in plan.scenarios if not s.probe]
    missing = [n for n in names if n not in seeds]
    if missing:
        raise ValueError(f"no saved seeds for planned scenarios {missing}: run them (--only) or leave them out")
    common = sorted(set.intersection(*(set(seeds[n]) for n in names)))
    family = list(plan.alphas)
    for check in family:
        kind, name = check[:-1].split("[", 1)
        if kind not in headers[name]["checks"]:
            raise ValueError(f"check {check!r} is planned but was not saved: rerun scenario {name!r}")
    flagged = {level: 0 for level in levels}
    certain = 0
    for seed in common:
        failed = any(seeds[n][seed][0] for n in names)
        certain += failed
        results = []
        for check in family:
            kind, name = check[:-1].split("[", 1)
            p = seeds[name][seed][1][kind]
            results.append(CheckResult(check, 0.0, 0, 1.0 if p is None else p, 0, plan.alphas[check], float("nan"),
                                       True, tested=p is not None))  # fmt: skip
        for level in levels:
            holm = ErrorBudget(level).holm(results, family_size=len(family))
            flagged[level] += bool(failed or not all(r.passed for r in holm))
    rates = []
    for level in levels:
        low, high = clopper_pearson(flagged[level], len(common))
        rates.append({"level": level, "flagged": flagged[level], "seeds": len(common),
                      "rate": flagged[level] / max(len(common), 1), "upper_95": high, "lower_95": low,
                      "upper_at_or_below_level": high <= level})  # fmt: skip
    return {"family_size": len(family), "run_alpha": run_alpha, "seeds": len(common),
            "first_seed": common[0] if common else None, "last_seed": common[-1] if common else None,
            "certain_flagged": certain, "family_wise": rates,
            "rows": {n: headers[n]["rows"] for n in names}, "unplanned_saved": _unplanned(headers, plan)}  # fmt: skip


def _unplanned(headers: dict, plan) -> list[str]:
    """Saved checks the current plan does not test (left out of the family: a demoted check, say)."""
    planned = set(plan.alphas)
    return sorted(f"{k}[{n}]" for n, h in headers.items() if n in plan.checks for k in h["checks"]
                  if f"{k}[{n}]" not in planned)  # fmt: skip
