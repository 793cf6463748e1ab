"""Render where the CI suite's time went: `nox -s timings` writes reports/timings.md and timings.json with this.

Inputs: the set-up steps the session timed (a JSON file), pytest's junit XML (each test's setup + call + teardown,
on whichever worker ran it) and the cache folder the run filled. Out: the steps, the tests' seconds summed per
file (worker-seconds: on 2 workers the wall time is about half their total), the slowest tests, and what the run
built into the cache. Standard library only.
"""

from __future__ import annotations

import argparse
import json
import xml.etree.ElementTree as ElementTree
from collections import defaultdict
from pathlib import Path

SLOWEST = 30


def tests(junit: Path) -> list[dict]:
    """[{"id", "file", "seconds", "outcome", "output"}] from pytest's junit XML."""
    rows = []
    for case in ElementTree.parse(junit).getroot().iter("testcase"):
        outcome = next((child.tag for child in case if child.tag in ("failure", "error", "skipped")), "passed")
        module = case.get("classname", "")
        name = f"{module}::{case.get('name')}"
        output = "".join(child.text or "" for child in case if child.tag == "system-out")
        file = "/".join(module.split(".")[:2]) + ".py"  # classname: folder.module[.Class]
        rows.append({"id": name, "file": file, "seconds": float(case.get("time") or 0), "outcome": outcome,
                     "output": output.strip()})  # fmt: skip
    return rows


def built(cache: Path) -> list[tuple[str, int]]:
    """(top folder or file under the cache, bytes) for what the run left there."""
    if not cache.is_dir():
        return []
    sizes: dict[str, int] = defaultdict(int)
    for path in cache.rglob("*"):
        if path.is_file() and not path.is_symlink():
            relative = path.relative_to(cache).parts
            sizes["/".join(relative[:2])] += path.stat().st_size
    return sorted(sizes.items())


def render(steps: dict, rows: list[dict], cache_contents: list[tuple[str, int]]) -> str:
    per_file: dict[str, float] = defaultdict(float)
    for row in rows:
        per_file[row["file"]] += row["seconds"]
    total = sum(per_file.values())
    outcomes: dict[str, int] = defaultdict(int)
    for row in rows:
        outcomes[row["outcome"]] += 1
    lines = ["# Where the CI suite's time goes", "", steps.get("title", ""), "",
             "| step | wall s | CPU s (user + system) |", "| --- | --- | --- |"]  # fmt: skip
    for step in steps["steps"]:
        cpu = "" if step.get("cpu") is None else f"{step['cpu']:.0f}"
        lines.append(f"| {step['name']} | {step['wall']:.1f} | {cpu} |")
    lines += ["", f"Load average (1, 5, 15 min) before: {steps['load_before']}, after: {steps['load_after']}.", "",
              f"Tests: {dict(sorted(outcomes.items()))}; {total:.0f} worker-seconds in all (setup + call + teardown,"
              " summed over the workers).", "", "## Worker-seconds per file", "", "| file | s | share |",
              "| --- | --- | --- |"]  # fmt: skip
    for name, seconds in sorted(per_file.items(), key=lambda item: -item[1]):
        if seconds >= 0.005 * total:
            lines.append(f"| {name} | {seconds:.1f} | {seconds / total:.1%} |")
    lines += ["", f"## The {SLOWEST} slowest tests", "", "| test | s |", "| --- | --- |"]
    for row in sorted(rows, key=lambda row: -row["seconds"])[:SLOWEST]:
        lines.append(f"| {row['id']} | {row['seconds']:.1f} |")
    notes = [row for row in rows if "seconds per step" in row["output"]]
    if notes:
        lines += ["", "## Set-up steps inside tests", ""]
        lines += [f"- {row['id']}: {line}" for row in notes for line in row["output"].splitlines() if line.strip()]
    lines += ["", "## What the run built into its cache", "", "| entry | MB |", "| --- | --- |"]
    lines += [f"| {name} | {size / 2**20:.1f} |" for name, size in cache_contents] or ["| (nothing) | |"]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=Path, required=True)
    parser.add_argument("--junit", type=Path, required=True)
    parser.add_argument("--cache", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=Path("reports"))
    args = parser.parse_args(argv)
    steps = json.loads(args.steps.read_text())
    rows = tests(args.junit) if args.junit.is_file() else []
    contents = built(args.cache)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "timings.md").write_text(render(steps, rows, contents))
    tests_record = [{key: row[key] for key in ("id", "seconds", "outcome")} for row in rows]
    record = {**steps, "cache": dict(contents), "tests": tests_record}
    (args.out / "timings.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"wrote {args.out / 'timings.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
