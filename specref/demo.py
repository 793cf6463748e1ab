"""`specref demo`: the main job on an embedded default, in a minute or two.

It conforms transformers' own verify kernel (`_speculative_sampling`, the `transformers` built-in adapter) and a
mutant that carries a bug transformers once shipped (`softmax_residual`: the residual normalised with a softmax,
fixed in transformers PR 28508), on the same three scenarios with the same seed, prints both verdicts side by side
and writes both reports. Both runs include the forced edge probe (specref.conformance.edge_probe), which shows
the non-strict accept test of transformers 5.24.0 and before, `r_i <= probability_ratio`, in one call: the kernel's
verdict is "non-conforming: rare edge", with the edge named (a zero-probability draft accepted when the float32
uniform is exactly 0, 2^-24 per accept test on CPU) and the output law otherwise exact. transformers 5.25.0 made the
test strict, and its kernel conforms (conformance/peers/findings.py). Exit 0 when the yardstick works: the kernel
keeps the target law (conforming, or only a rare edge named) and the mutant is flagged; exit 1 otherwise.

What it omits for time, and `specref conform transformers` (or `nox -s conformance`) runs: the other scenarios
(ragged drafts, large vocabularies, batches of mixed rows, the joint loop) and the statistical rare-edge probe, which
needs ~77M accept tests to see a float32 u = 0 with probability 0.99.

Catch probability. The mutant draws its correction from softmax(max(0, p - q)), which puts mass on tokens outside
the support of max(0, p - q); each such draw fails the certain check t0_residual_support. On a context-free
scenario a row rejects some draft with probability 1 - a^g (a = sum min(p, q)) and then leaves the support with
probability m, so a row shows the bug with probability r = (1 - a^g) m, and N rows all miss it with (1 - r)^N.
"""

from __future__ import annotations

import argparse
import math
import sys
import textwrap
from pathlib import Path

from .errors import UsageError
from .extras import MATPLOTLIB, TORCH, TRANSFORMERS, notice, require
from .outputs import REPORTS, default_folder

EXIT_DEMONSTRATED, EXIT_NOT_DEMONSTRATED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3

SCENARIOS = ["cf_dense_g4", "cf_zero_support_g3", "markov_g5"]  # dense laws, p = 0 edges, a context
MUTANT = "softmax_residual"
#: Where the mutant's catch probability is stated: the scenario of its certain check (context-free).
CATCH_SCENARIO = "cf_dense_g4"
#: The check whose detectable TV the summary shows (the first-token law on dense rows).
TV_CHECK = "first_token_law[cf_dense_g4]"
#: Shares of the budget: the row loop of the kernel needs time, the vectorised mutant little.
KERNEL_SHARE = 0.8
DEFAULT_BUDGET = 75.0
#: Failed checks shown side by side (the reports list them all).
SHOWN_CHECKS = 8
#: The summary fits a terminal of WIDTH columns; check names wider than LABEL_WIDTH wrap.
WIDTH, LABEL_WIDTH, GAP = 100, 42, "  "


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser(
        "demo",
        help="the main job in a minute: transformers' kernel and a known bug, side by side, with their reports",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--out", metavar="DIR",
                   help=f"report folder; one subfolder per implementation (default {REPORTS}/demo, git-ignored; "
                   "the committed snapshot is reports/demo)")  # fmt: skip
    share = round(100 * KERNEL_SHARE)
    p.add_argument("--budget-seconds", type=float, default=DEFAULT_BUDGET, metavar="S",
                   help=f"time for both runs, {share}%% to the kernel (default {DEFAULT_BUDGET:g})")  # fmt: skip
    p.add_argument("--seed", type=int, default=0, help="seed of the scenarios and generators (default 0)")
    p.add_argument("--alpha", type=float, default=1e-3,
                   help="family-wise false-alarm probability of each run (default 1e-3)")  # fmt: skip
    p.add_argument("--no-plots", action="store_true", help="write no PNG plots")
    p.set_defaults(func=demo)
    return p


def choose_impl() -> tuple[str, str | None]:
    """(built-in name, note): `transformers` when it is installed, else `batched` with a note saying so."""
    if TRANSFORMERS.available:
        return "transformers", None
    return "batched", (f"transformers is not installed ({TRANSFORMERS.install}): the demo conforms specref's "
                       "batched engine instead")  # fmt: skip


def demo(args: argparse.Namespace) -> int:
    try:
        require("specref demo", TORCH)
        if not args.budget_seconds > 0:
            raise UsageError(f"--budget-seconds={args.budget_seconds!r} must be > 0")
        if not 0 < args.alpha < 1:
            raise UsageError(f"--alpha={args.alpha!r} must lie in (0, 1)")
        where = args.out or str(Path(REPORTS) / "demo")
        try:
            out = Path(args.out or default_folder("demo"))
            out.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UsageError(f"--out: cannot create {where!r}: {error.strerror or error}") from None
    except UsageError as error:  # MissingDependency among them
        print(f"specref demo: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    impl, note = choose_impl()
    plots = not args.no_plots and MATPLOTLIB.available
    for line in filter(None, [note, notice(plots=not args.no_plots, progress=False)]):
        print(f"specref demo: {line}", file=sys.stderr)
    try:
        reports = _runs(impl, args, out, plots)
    except Exception:  # noqa: BLE001 -- verdicts live inside run(); anything raised here is specref's own bug
        import traceback

        traceback.print_exc()
        print(f"specref demo: internal error: the harness failed (a bug in specref, not a verdict); exit "
              f"{EXIT_INTERNAL}", file=sys.stderr)  # fmt: skip
        return EXIT_INTERNAL
    print(side_by_side(*reports, out=out))
    code, message = outcome(*(report for report, _ in reports))
    print(textwrap.fill(message, WIDTH, break_long_words=False, break_on_hyphens=False))
    return code


def _runs(impl: str, args: argparse.Namespace, out: Path, plots: bool) -> list[tuple]:
    """(report, paths) of the kernel, then of the mutant. One torch thread: the kernels loop over rows of V <= 32,
    where a second thread only adds OpenMP waits (tens of times slower on a loaded 2-core machine)."""
    import torch

    from .conformance import as_adapter, builtin_adapters, run
    from .conformance.engine.progress import ProgressBar
    from .conformance.report.render import write_report
    from .mutants import CATALOGUE

    mutant = as_adapter(CATALOGUE[MUTANT])
    plan = [(builtin_adapters()[impl](), impl, KERNEL_SHARE), (mutant, MUTANT, 1 - KERNEL_SHARE)]
    reports = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the forked workers inherit it
    try:
        for adapter, label, share in plan:
            budget = share * args.budget_seconds
            print(f"specref demo: checking {label} on {', '.join(SCENARIOS)} for {budget:.0f} s ...", flush=True)
            with ProgressBar(label, budget) as bar:
                report = run(adapter, seed=args.seed, budget_seconds=budget, alpha=args.alpha, scenarios=SCENARIOS,
                             progress=bar.update)  # fmt: skip
            spec = impl if adapter is not mutant else f"specref.mutants.bugs:{MUTANT}"
            reports.append((report, write_report(report, out / label, spec=spec, plots=plots)))
    finally:
        torch.set_num_threads(threads)  # a caller in the same process (pytest) keeps its own setting
    return reports


def rare_edges(report) -> list[str]:
    """The words of each rare edge the forced probe named in a report (edges/probe.py)."""
    from .conformance.engine.check_words import family
    from .conformance.engine.report import EDGE

    return [r.details["edge"] for r in report.failures if family(r) == EDGE and r.details.get("edge")]


def outcome(kernel, mutant) -> tuple[int, str]:
    """The exit code and its sentence: 0 only when the kernel keeps the law (conforming, or only a rare edge named)
    and the mutant is flagged."""
    from .conformance.engine.report import CONFORMING, RARE_EDGE

    kernel_ok, caught = kernel.verdict in (CONFORMING, RARE_EDGE), not mutant.passed
    if kernel_ok and caught:
        kept = "conforms" if kernel.verdict == CONFORMING else "keeps the target law except one rare edge, named"
        return EXIT_DEMONSTRATED, (f"demo: the yardstick works: {kernel.adapter.name} {kept}, and the mutant "
                                   f"{mutant.adapter.name} is flagged (exit 0).")  # fmt: skip
    problems = []
    if not kernel_ok:
        problems.append(f"{kernel.adapter.name} was not found conforming ({kernel.verdict}): a false alarm (at "
                        f"most {kernel.alpha:g} for the statistical checks), a run cut short (see 'not run' in "
                        "its report), or a real defect")  # fmt: skip
    if not caught:
        problems.append(f"the mutant {mutant.adapter.name} was not flagged: a miss (see the catch probability "
                        "above) or a broken harness")  # fmt: skip
    return EXIT_NOT_DEMONSTRATED, "demo: NOT demonstrated (exit 1): " + "; ".join(problems) + "."


# --- the side-by-side summary --------------------------------------------------------------------------------------


def _cell(r) -> str:
    """One check in a few words, from its status: pass or FAIL with its p-value and detectable TV (statistical) or
    its violations in rows (certain), FAIL (not run), or not tested."""
    if r is None:
        return "-"
    status = r.status
    if status == "not run":
        return "FAIL (not run)"
    if status == "not tested":
        return "not tested"
    word = "pass" if status == "passed" else "FAIL"
    if r.details.get("tier") == "T2":
        tv = "" if not math.isfinite(r.guaranteed_tv) else f", detectable TV {r.guaranteed_tv:.3f}"
        return f"{word} p={r.p_value:.2g}{tv}"
    if not math.isfinite(r.statistic):
        return word
    return f"{word} {int(r.statistic):,} violations" + (f" in {r.n:,} rows" if r.n else "")


def side_by_side(kernel_pair: tuple, mutant_pair: tuple, *, out: Path) -> str:
    (kernel, kernel_paths), (mutant, mutant_paths) = kernel_pair, mutant_pair
    from .conformance.engine.check_words import counts_line

    def count(report) -> str:
        return counts_line(report.counts())

    def rows(report) -> str:
        return f"{sum(s['rows'] for s in report.scenarios.values()):,} in {report.wall_seconds:.0f} s"

    def tv(report) -> str:
        r = next((r for r in report.checks if r.name == TV_CHECK), None)
        return "-" if r is None or not math.isfinite(r.guaranteed_tv) else f"{r.guaranteed_tv:.3f}"

    mutant_title = f"{mutant.adapter.name} (mutant)"
    table = [
        ("", kernel.adapter.name, mutant_title),
        ("verdict", kernel.verdict.upper(), mutant.verdict.upper()),
        ("checks", count(kernel), count(mutant)),
        ("rows", rows(kernel), rows(mutant)),
        (f"detectable TV of {TV_CHECK} (power 0.999)", tv(kernel), tv(mutant)),
    ]
    by_name = {r.name: r for r in kernel.checks}
    failed = sorted(kernel.failures + mutant.failures, key=lambda r: (r.details.get("tier") != "T0", r.p_value))
    names = list(dict.fromkeys(r.name for r in failed))
    mutant_by_name = {r.name: r for r in mutant.checks}
    for name in names[:SHOWN_CHECKS]:
        table.append((name, _cell(by_name.get(name)), _cell(mutant_by_name.get(name))))
    heading = "failing checks (pass/FAIL, p-value, detectable TV, power 0.999):" if names else "failing checks: none"
    widths = _widths(table)
    lines = ["", *_columns(table[:5], widths), heading, *_columns(table[5:], widths)]
    if len(names) > SHOWN_CHECKS:
        lines.append(f"... and {len(names) - SHOWN_CHECKS} more failed checks (see the reports)")
    from .conformance.chain.plan import scenarios_for
    from .conformance.engine.passes import MIN_ROWS  # every scenario gets MIN_ROWS before any sizing

    rows_seen = mutant.scenarios.get(CATCH_SCENARIO, {}).get("rows", 0)
    left_out = len(scenarios_for(kernel.adapter)) - len(SCENARIOS)
    r = row_catch_probability()
    prose = [
        f"False alarms: each verdict's statistical checks share a family-wise false-alarm probability of "
        f"{kernel.alpha:g}; T0 checks are certain.",
        f"Catch probability: on {CATCH_SCENARIO} a row of the mutant leaves the residual's support with probability "
        f"{r:.3f} (t0_residual_support, a certain check), so it escapes {MIN_ROWS} rows (the fewest a scenario "
        f"gets) with probability {_small(miss_probability(MIN_ROWS))} and the {rows_seen:,} rows run here with "
        f"{_small(miss_probability(rows_seen))}.",
        *[f"Rare edge of {kernel.adapter.name}: {words}." for words in rare_edges(kernel)],
        f"Left out for time: {left_out} scenarios, the statistical rare-edge probe among them (the forced edge probe "
        f"ran in both runs); the full run is `specref conform {kernel.adapter.name}` or `nox -s conformance`.",
        f"Reports: {kernel_paths['md']}  {mutant_paths['md']}",
    ]
    lines += [
        "",
        *(
            line
            for text in prose
            for line in textwrap.wrap(text, WIDTH, break_long_words=False, break_on_hyphens=False)
        ),
    ]
    return "\n".join(lines)


def _widths(table: list[tuple[str, str, str]]) -> list[int]:
    """Column widths within WIDTH: the label column at most LABEL_WIDTH, the value columns sharing what is left."""
    natural = [max(len(row[i]) for row in table) for i in range(3)]
    label = min(natural[0], LABEL_WIDTH)
    room = WIDTH - label - 2 * len(GAP)
    first = min(natural[1], max(room // 2, room - natural[2]))
    return [label, first, min(natural[2], room - first)]


def _columns(rows: list[tuple[str, str, str]], widths: list[int]) -> list[str]:
    """The rows as columns of `widths` (_widths); a cell too wide wraps onto more lines."""
    lines = []
    for row in rows:
        cells = [textwrap.wrap(cell, w) or [""] for cell, w in zip(row, widths)]
        for i in range(max(map(len, cells))):
            parts = [(c[i] if i < len(c) else "").ljust(w) for c, w in zip(cells, widths)]
            lines.append(GAP.join(parts).rstrip())
    return lines


def _small(probability: float) -> str:
    return f"{probability:.1e}" if probability > 1e-300 else "< 1e-300"


def row_catch_probability(dtype=None) -> float:
    """r = (1 - a^g) m: the probability that one row of the mutant on CATCH_SCENARIO fails t0_residual_support
    (module docstring), on the rows as given in `dtype` (default float32, as the mutant declares)."""
    import numpy as np
    import torch

    from .conformance.chain.scenarios import get

    s = get(CATCH_SCENARIO).given(dtype or torch.float32)
    p, q = s.target[0], s.draft[0]  # [V] each; context-free
    a = np.minimum(p, q).sum()
    residual = np.maximum(p - q, 0.0)
    softmax = np.exp(residual) / np.exp(residual).sum()
    m = softmax[residual <= 0].sum()
    return float((1 - a**s.gamma) * m)


def miss_probability(rows: int) -> float:
    """(1 - r)^rows: the chance that t0_residual_support sees no violation in `rows` rows of CATCH_SCENARIO."""
    return math.exp(rows * math.log1p(-row_catch_probability()))


__all__ = [
    "add_parser",
    "choose_impl",
    "demo",
    "miss_probability",
    "outcome",
    "rare_edges",
    "row_catch_probability",
    "side_by_side",
]
