"""The tree suite: every tree built-in and every tree mutant through `run_tree`, one table (reports/trees.md).

    python -m specref.conformance.tree_suite [--rows N] [--mutant-rows N] [--seed S] [--out reports/trees.md]
                                             [--calibration-seeds K]

Built-ins run the whole catalogue at `rows` per scenario; mutants run the whole catalogue too, at `mutant_rows`,
and the table says whether a check designed for the mutant (mutants.CAUGHT_BY) is among those that failed.
With --calibration-seeds K it also runs K seeds of the correct built-ins at a large family-wise alpha (the measured
share of failing runs must stay below it) and K seeds of the subtlest mutants (the measured share caught: power).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ..mutants.trees import CAUGHT_BY, MUTANTS
from .tree import run_tree
from .tree.adapters import builtin_tree_adapters


def suite(rows: int = 20_000, mutant_rows: int = 4000, seed: int = 0, alpha: float = 1e-3) -> str:
    lines = ["# Tree conformance: built-ins and mutants", "",
             f"`python -m specref.conformance.tree_suite --rows {rows} --mutant-rows {mutant_rows} "
             f"--seed {seed}`; family-wise alpha {alpha:g} per run; every scenario of the tree catalogue.", "",
             "| implementation | rule | scheme | verdict | checks passed | rows | max detectable TV (laws) "
             "| caught by | by a designed check | wall s |",
             "|---|---|---|---|---:|---:|---:|---|---|---:|"]  # fmt: skip
    entries = [(name, factory, rows, None) for name, factory in builtin_tree_adapters().items()]
    entries += [(f"mutant {name}", factory, mutant_rows, CAUGHT_BY[name]) for name, factory in MUTANTS.items()]
    for label, factory, n, designed in entries:
        adapter = factory()
        started = time.perf_counter()
        report = run_tree(adapter, seed=seed, alpha=alpha, rows=n, budget_seconds=3600)
        wall = time.perf_counter() - started
        tested = [r for r in report.checks if "not_tested" not in r.details]
        laws = [r.detectable_tv for r in tested if r.details.get("tier") == "T2" and "acceptance" not in r.name]
        caught = report.caught_by()
        hit = "-" if designed is None else ("yes" if set(caught) & designed else "**no**")
        total = sum(s["rows"] for s in report.scenarios.values())
        lines.append(f"| {label} | {adapter.rule} | {adapter.scheme} | {report.verdict} | "
                     f"{sum(r.passed for r in tested)}/{len(tested)} | {total:,} | "
                     f"{max(laws, default=float('nan')):.3f} | {', '.join(caught[:4]) or '-'} | {hit} "
                     f"| {wall:.0f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


#: Calibration: family-wise alpha per run (large, so that K seeds can measure it), rows per scenario.
CALIBRATION_ALPHA, CALIBRATION_ROWS = 0.2, 2000
#: The mutants whose effects are smallest (their power is the one worth measuring), run on their own scenarios.
SUBTLE = ("merged_as_iid", "rsd_raw_q", "bonus_wrong_leaf")


def calibration(seeds: int, mutant_rows: int = 4000) -> str:
    from collections import defaultdict

    from scipy.stats import beta

    from ..mutants.trees import SCENARIOS_FOR
    from .engine.check_words import kind_of

    def upper(k, n):  # one-sided 95% Clopper-Pearson upper bound
        return 1.0 if k == n else float(beta.ppf(0.95, k + 1, n - k))

    lines = ["", f"## Calibration ({seeds} seeds)", "",
             f"Correct built-ins at family-wise alpha {CALIBRATION_ALPHA} per run, {CALIBRATION_ROWS} rows per "
             "scenario: the share of runs with any failed check (it must stay below alpha; Bonferroni and Holm "
             "make it smaller). Subtle mutants on their own scenarios at alpha 1e-3: the share of runs that flag "
             "them by a designed check (power).", "",
             "| implementation | runs | flagged | share | 95% upper bound |", "|---|---:|---:|---:|---:|"]  # fmt: skip
    p_values = defaultdict(list)  # kind -> the p-values of its tested T2 checks, every correct run
    for name in ("tree-rsd", "tree-target-only", "tree-sample-match"):
        failed = 0
        for k in range(seeds):
            report = run_tree(builtin_tree_adapters()[name](), seed=1000 + k, alpha=CALIBRATION_ALPHA,
                              rows=CALIBRATION_ROWS, budget_seconds=3600)  # fmt: skip
            failed += not report.passed
            for r in report.checks:
                if r.details.get("tier") == "T2" and "not_tested" not in r.details:
                    p_values[kind_of(r.name)].append(r.p_value)
        lines.append(f"| {name} | {seeds} | {failed} | {failed / seeds:.3f} | {upper(failed, seeds):.3f} |")
    for name in SUBTLE:
        caught = 0
        for k in range(seeds):
            report = run_tree(MUTANTS[name](), seed=2000 + k, rows=mutant_rows, scenarios=SCENARIOS_FOR[name],
                              budget_seconds=3600)  # fmt: skip
            caught += bool(set(report.caught_by()) & CAUGHT_BY[name])
        lines.append(f"| mutant {name} ({mutant_rows} rows, {', '.join(SCENARIOS_FOR[name])}) | {seeds} | {caught} "
                     f"| {caught / seeds:.3f} | - |")  # fmt: skip
    lines += ["", "P-values of every tested T2 check of the correct runs above, by kind: the share at or below a "
              "level must not exceed it (valid p-values; exact and conservative tests give less).", "",
              "| check | p-values | share <= 0.01 | 95% upper bound | share <= 0.001 | 95% upper bound |",
              "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for kind, values in sorted(p_values.items()):
        n = len(values)
        at = {level: sum(v <= level for v in values) for level in (0.01, 0.001)}
        lines.append(f"| `{kind}` | {n:,} | {at[0.01] / n:.4f} | {upper(at[0.01], n):.4f} | {at[0.001] / n:.4f} "
                     f"| {upper(at[0.001], n):.4f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--mutant-rows", type=int, default=4000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="reports/trees.md")
    parser.add_argument("--calibration-seeds", type=int, default=0)
    args = parser.parse_args(argv)
    text = suite(args.rows, args.mutant_rows, args.seed)
    if args.calibration_seeds:
        text += calibration(args.calibration_seeds, args.mutant_rows)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
