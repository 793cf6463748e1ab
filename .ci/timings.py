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
        if not module:  # a collection error's entry
            continue
        name = f"{module}::{case.get('name')}"
        output = "".join(child.text or "" for child in case if child.tag == "system-out")
        cpu = [float(p.get("value")) for p in case.iter("property") if p.get("name") == "cpu_seconds"]
        file = "/".join(module.split(".")[:2]) + ".py"  # classname: folder.module[.Class]
        rows.append({"id": name, "file": file, "seconds": float(case.get("time") or 0), "cpu": sum(cpu),
                     "outcome": outcome, "output": output.strip()})  # fmt: skip
    return rows


def built(cache: Path) -> list[tuple[str, int, int]]:
    """(entry at the cache's top level, or in its kernels/ and test-envs/ folders; files; bytes) the run left."""
    if not cache.is_dir():
        return []
    sizes: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for path in cache.rglob("*"):
        if path.is_file() and not path.is_symlink() and path.suffix != ".lock":
            parts = path.relative_to(cache).parts
            entry = sizes["/".join(parts[:2] if parts[0] in ("kernels", "test-envs") else parts[:1])]
            entry[0] += 1
            entry[1] += path.stat().st_size
    return [(name, files, size) for name, (files, size) in sorted(sizes.items())]


def render(steps: dict, rows: list[dict], cache_contents: list[tuple[str, int, int]]) -> str:
    per_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    outcomes: dict[str, int] = defaultdict(int)
    for row in rows:
        per_file[row["file"]][0] += row["seconds"]
        per_file[row["file"]][1] += row["cpu"]
        outcomes[row["outcome"]] += 1
    wall, cpu = sum(v[0] for v in per_file.values()), sum(v[1] for v in per_file.values())
    lines = ["# Where the CI suite's time goes", "", steps.get("title", ""), "",
             "| step | wall s | CPU s (user + system) |", "| --- | --- | --- |"]  # fmt: skip
    for step in steps["steps"]:
        lines.append(
            f"| {step['name']} | {step['wall']:.1f} | {'' if step.get('cpu') is None else round(step['cpu'])} |"
        )
    lines += ["", f"Load average (1, 5, 15 min) before: {_load(steps['load_before'])}; after: "
              f"{_load(steps['load_after'])}.", "",
              f"Tests: {dict(sorted(outcomes.items()))}; {wall:.0f} worker-seconds (setup + call + teardown, summed "
              f"over the workers: on a loaded machine they include the waits for a core) and {cpu:.0f} CPU seconds "
              "(each test's process and the subprocesses it waited for; the workers' start-up is not in it).", "",
              "## Per file, by CPU seconds (worker-seconds where CPU was not recorded)", "",
              "| file | worker-s | CPU s | CPU share |",
              "| --- | --- | --- | --- |"]  # fmt: skip
    by = 1 if cpu else 0  # runs without cpu_times: by worker-seconds
    for name, (seconds, cpu_seconds) in sorted(per_file.items(), key=lambda item: -item[1][by]):
        if (seconds, cpu_seconds)[by] >= 0.005 * (wall, cpu)[by]:
            lines.append(f"| {name} | {seconds:.1f} | {cpu_seconds:.1f} | {cpu_seconds / max(cpu, 1e-9):.1%} |")
    lines += ["", f"## The {SLOWEST} slowest tests (worker-seconds)", "", "| test | s | CPU s |", "| --- | --- | --- |"]
    for row in sorted(rows, key=lambda row: -row["seconds"])[:SLOWEST]:
        lines.append(f"| {row['id']} | {row['seconds']:.1f} | {row['cpu']:.1f} |")
    notes = [(row["id"], line) for row in rows for line in row["output"].splitlines() if "seconds per step" in line]
    if notes:
        lines += ["", "## Set-up steps inside tests", ""] + [f"- {name}: {line.strip()}" for name, line in notes]
    lines += ["", "## What the run built into its cache", "", "| entry | files | MB |", "| --- | --- | --- |"]
    lines += [f"| {name} | {files} | {size / 2**20:.1f} |" for name, files, size in cache_contents] or [
        "| (nothing) | | |"
    ]
    return "\n".join(lines) + "\n"


def _load(triple) -> str:
    return ", ".join(f"{x:.2f}" for x in triple)


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
    record = {**steps, "cache": {name: size for name, _, size in contents},
              "test_columns": ["id", "worker-seconds", "CPU seconds", "outcome"], "tests": "TESTS"}  # fmt: skip
    test_lines = ",\n".join(json.dumps([row["id"], round(row["seconds"], 2), round(row["cpu"], 2), row["outcome"]])
                       for row in rows)  # fmt: skip
    text = json.dumps(record, indent=1).replace('"TESTS"', "[\n" + test_lines + "\n]")  # one line per test
    (args.out / "timings.json").write_text(text + "\n")
    print(f"wrote {args.out / 'timings.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
