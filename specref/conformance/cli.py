"""`specref conform`: check one implementation from the command line.

    specref conform IMPL [--seed N] [--budget-seconds S] [--report DIR] [--json FILE]
    specref conform --list
    specref conform IMPL --rows N --shard K/N --report DIR      then   specref merge DIR... [--out DIR]
    specref conform IMPL --tree      (a verifier of the tree contract; detected for built-ins and kind="tree")

IMPL is a built-in name (`specref conform --list`), `package.module:attr` or `path/to/file.py:attr`; the attribute
(dotted paths allowed) is a verify function or an adapter object declaring its capabilities. Exit codes: 0
conforming; 1 non-conforming (a check failed, the adapter raised, hung or returned malformed output, or the rule is
lossy by configuration); 2 usage error; 3 (an extension) an internal error of specref itself, never a verdict;
130 interrupted by Ctrl-C (a partial report is written first).

Extensions: --alpha (the run's family-wise false-alarm probability, default 1e-3), --scenarios a,b (run only
these scenarios), --rows N (a fixed N per scenario), --no-plots (skip the PNGs), --shard K/N (run the K-th of N
disjoint parts of the run, with --rows; `specref merge` sums the shards' counts into the run's report, the same as
one unsharded run, and exits as conform does; docs/scaling.md).

Packages the run needs (torch; transformers for the transformers adapters; an engine's own package for a peer) are
checked before it starts: a missing one is a usage error (exit 2) naming the pip command. Without matplotlib or
tqdm the run says so once and writes no PNGs or no progress bar. report.json and report.md are written before the
plots, so a failed plot never costs the verdict or the report.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from pathlib import Path
from types import SimpleNamespace

from .. import arguments
from ..builtins import adapter_requirements
from ..errors import MergeError, UsageError
from ..extras import MATPLOTLIB, TORCH, notice, require
from ..folders import writing
from ..outputs import REPORTS, default_folder
from .contracts import PIPELINE, contract, contract_of
from .engine.progress import ProgressBar
from .resolve import absolute_spec, check_scenario_names, list_builtins, resolve, select_scenarios

EXIT_CONFORMING, EXIT_NON_CONFORMING, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 3
#: Ctrl-C (SIGINT): the shell's 128 + 2; the run's partial report is written first when there is one.
EXIT_INTERRUPTED = 130


def add_parser(sub) -> argparse.ArgumentParser:
    """Register `conform` on the `specref` subparsers."""
    p = sub.add_parser(
        "conform",
        help="check an implementation against exact speculative sampling",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("impl", nargs="?", metavar="IMPL", help="built-in name, package.module:attr or path/file.py:attr")
    p.add_argument("--list", action="store_true", help="list the built-in implementations and exit")
    p.add_argument("--seed", type=int, default=0, help="seed of the scenarios and generators (default 0)")
    p.add_argument("--budget-seconds", type=float, default=None, metavar="S",
                   help="time budget; N per check is sized to it (default 300; none with --rows)")  # fmt: skip
    p.add_argument("--report", metavar="DIR",
                   help=f"report folder (default {REPORTS}/<impl>/, git-ignored; the run prints where)")  # fmt: skip
    p.add_argument("--json", metavar="FILE", help="also write report.json here ('-' for stdout)")
    p.add_argument("--alpha", type=float, default=1e-3,
                   help="extension: family-wise false-alarm probability of the run (default 1e-3)")  # fmt: skip
    p.add_argument("--scenarios", metavar="A,B", help="extension: run only these scenarios (comma-separated)")
    p.add_argument("--rows", type=int, metavar="N",
                   help="extension: a fixed N of rows per scenario instead of sizing by time, every scenario gets "
                   "them (no time cap unless --budget-seconds is also given; then a scenario it cuts short is "
                   "named); reproducible sample sizes for CI")  # fmt: skip
    p.add_argument("--tv", type=float, metavar="T",
                   help="size every scenario so that each check detects TV T (rule checks: T in their own units) "
                   "at power 0.999, from the scenarios' probabilities alone (the same N on every machine); the run "
                   "says how long it expects to take, and stops if --budget-seconds cannot reach T (no time cap "
                   "without it)")  # fmt: skip
    p.add_argument("--resolution", type=float, default=0.1, metavar="T",
                   help="a law check that detects no less than TV T is 'uninformative at this N', counted apart "
                   "from the passes (default 0.1)")  # fmt: skip
    p.add_argument("--no-plots", action="store_true", help="extension: write no PNG plots")
    p.add_argument("--allow-edge", action="store_true",
                   help="exit 0 when the only failures are rare edges the forced probe named (verdict 'non-conforming: "
                   "rare edge', e.g. u <= p/q at u = 0, 2^-24 per accept test); default: exit 1")  # fmt: skip
    p.add_argument("--shard", metavar="K/N", help="extension: run only the K-th (0-based) of N disjoint parts of the "
                   "run (needs --rows); merge the N report folders with `specref merge`")  # fmt: skip
    p.add_argument("--tree", action="store_true",
                   help="IMPL verifies trees (specref.tree_contract): run the tree harness; detected without this "
                   "flag for tree built-ins and adapters declaring kind='tree'")  # fmt: skip
    p.set_defaults(func=conform)
    add_merge_parser(sub)
    return p


def add_merge_parser(sub) -> argparse.ArgumentParser:
    """Register `merge`: shards of one run (conform --shard K/N) summed into the run's report."""
    p = sub.add_parser("merge", help="merge the report folders of `conform --shard K/N` runs into one report",
                       description="Sum the counts of the N shards of one run (`specref conform IMPL --rows R "
                       "--shard K/N`), recompute every check at the merged N, and write report.md/report.json; "
                       "exit codes as conform. Shards of another run, or a missing or repeated shard, are a usage "
                       "error (exit 2).")  # fmt: skip
    p.add_argument("dirs", nargs="+", metavar="DIR", help="the shards' report folders (each with its report.json)")
    p.add_argument("--out", metavar="DIR", help="report folder (default: merged/ beside the first DIR)")
    p.add_argument("--json", metavar="FILE", help="also write report.json here ('-' for stdout)")
    p.add_argument("--no-plots", action="store_true", help="write no PNG plots")
    p.set_defaults(func=merge_shards)
    return p


def conform(args: argparse.Namespace) -> int:
    try:
        return _conform(args)
    except KeyboardInterrupt:  # while IMPL loads, or torch: no run yet
        print(f"specref conform: interrupted (SIGINT) before the run started; exit {EXIT_INTERRUPTED}",
              file=sys.stderr)  # fmt: skip
        return EXIT_INTERRUPTED


def _conform(args: argparse.Namespace) -> int:
    try:
        if args.list:
            print(list_builtins())
            return EXIT_CONFORMING
        if not args.impl:
            raise UsageError("IMPL is required (a built-in name, package.module:attr or path/file.py:attr); "
                             "see `specref conform --list`")  # fmt: skip
        arguments.tv(args.tv, "--tv")
        arguments.resolution(args.resolution, "--resolution")
        arguments.tv_or_rows(args.tv, args.rows, ("--tv", "--rows"))
        if args.budget_seconds is None and args.rows is None and args.tv is None:
            args.budget_seconds = 300.0
        arguments.budget_seconds(args.budget_seconds, "--budget-seconds")  # the same checks as run()'s, by flag
        arguments.alpha(args.alpha, "--alpha")
        arguments.rows(args.rows, "--rows")
        arguments.seed(args.seed, "--seed")
        check_scenario_names(args.impl, args.scenarios, tree=getattr(args, "tree", False))  # before torch loads
        if args.shard is not None:
            _check_shard(args.shard, args.rows)
        for folder, flag, given in ((args.report, "--report", None), (_json_folder(args.json), "--json", args.json)):
            if folder is not None:
                _check_writable(folder, flag, given)  # before IMPL is loaded: no torch needed to refuse it
        require(f"IMPL={args.impl!r}", *adapter_requirements(args.impl))  # before torch is imported
    except UsageError as error:  # MissingDependency among them
        print(f"specref conform: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    bar = ProgressBar(args.impl, args.budget_seconds).__enter__()  # on a terminal: shown now, before torch loads
    bar.loading("loading")
    try:
        adapter, label = resolve(args.impl, tree=getattr(args, "tree", False),
                                 before_load=lambda kind: _check_for_kind(kind, args))  # fmt: skip
        scenarios = select_scenarios(adapter, args.scenarios)
        out_dir = args.report or _default_folder(label)
        _check_writable(out_dir, "--report")
    except BaseException as error:
        bar.__exit__(None, None, None)
        if not isinstance(error, UsageError):  # MissingDependency among them
            raise
        print(f"specref conform: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    plots = not args.no_plots
    note = notice(plots=plots, progress=sys.stderr.isatty())
    if note:
        print(f"specref conform: {note}", file=sys.stderr)
    try:
        lock = writing(out_dir, "--report")
        lock.__enter__()  # one run at a time into out_dir: a second is refused now, naming this one
    except UsageError as error:
        bar.__exit__(None, None, None)
        print(f"specref conform: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    bar.name = getattr(adapter, "name", args.impl)
    try:
        code = run_and_report(adapter, spec=absolute_spec(args.impl), out_dir=out_dir, json_file=args.json,
                              seed=args.seed, budget_seconds=args.budget_seconds, alpha=args.alpha,
                              scenarios=scenarios, rows=args.rows, plots=plots and MATPLOTLIB.available,
                              shard=args.shard, allow_edge=args.allow_edge, bar=bar, tv=args.tv,
                              resolution=args.resolution)  # fmt: skip
    finally:
        lock.__exit__(None, None, None)
    return _leave_if_abandoned(code)


def _check_for_kind(kind: str | None, args: argparse.Namespace) -> None:
    """The options a subject's kind cannot take, refused before the subject loads (a pipeline's models: seconds)."""
    declared = SimpleNamespace(kind=kind)
    if args.shard is not None and not contract(declared).shardable:
        raise UsageError(f"--shard={args.shard!r}: {contract_of(declared)} runs cannot be sharded; run it unsharded")
    if args.scenarios is not None and contract_of(declared) == PIPELINE:
        raise UsageError("--scenarios applies to verify-level adapters, not to pipelines")


def _json_folder(json_file: str | None) -> str | None:
    return None if json_file in (None, "-") else str(Path(json_file).parent)


def _check_shard(shard: str, rows: int | None) -> None:
    arguments.shard(shard, "--shard")
    if rows is None:
        raise UsageError(f"--shard={shard!r} needs --rows N: a time budget leaves the shard's chunks undefined")


def merge_shards(args: argparse.Namespace) -> int:
    """`specref merge DIR...`: the shards' counts summed, every check recomputed, one report; exit as conform."""
    try:
        for folder in args.dirs:  # before torch loads: a folder without a report is refused at once
            if not (Path(folder) / "report.json").is_file():
                raise MergeError(f"{folder}: no report.json there (a shard's folder is the --report of `specref "
                                 "conform ... --shard K/N`)")  # fmt: skip
        require("merge", TORCH)
        from .shards import merge

        out_dir = args.out or str(Path(args.dirs[0]).parent / "merged")
        report, spec = merge(args.dirs)  # first: shards that do not merge leave no --out folder behind
        _check_writable(out_dir, "--out")
    except UsageError as error:  # MergeError and MissingDependency among them
        print(f"specref merge: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        with writing(out_dir, "--out"):
            return _write_and_tell(report, out_dir, spec, args.json,
                                   plots=not args.no_plots and MATPLOTLIB.available,
                                   stream=sys.stderr if args.json == "-" else sys.stdout)  # fmt: skip
    except UsageError as error:
        print(f"specref merge: error: {error}", file=sys.stderr)
        return EXIT_USAGE


def _default_folder(label: str) -> str:
    try:
        return default_folder(label)
    except OSError as error:
        raise UsageError(f"cannot create the report folder {REPORTS!r} here ({error.strerror or error}); give "
                         "--report DIR") from None  # fmt: skip


def _check_writable(folder: str, flag: str, given: str | None = None) -> None:
    """Create folder now: an unwritable report path is a usage error before the run, not a lost verdict after.
    given: the flag's value when folder is the folder of a file it names (--json FILE)."""
    named = f"{flag}={given!r}: its folder {folder!r}" if given else f"{flag}: {folder!r}"
    blocking = next((p for p in [Path(folder), *Path(folder).parents] if p.exists() and not p.is_dir()), None)
    if blocking is not None:
        raise UsageError(f"{named} cannot be created: {str(blocking)!r} is a file, not a folder")
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"{named} cannot be created: {error.strerror or error}") from None
    if not os.access(folder, os.W_OK):
        raise UsageError(f"{named} is not writable")


def _leave_if_abandoned(code: int) -> int:
    """Exit at once (after flushing) when a hung call was abandoned in a thread (thread mode: CUDA adapters): that
    thread returning into a finalising interpreter aborts the process (exit 134), after the verdict was printed."""
    from .engine.calls import abandoned_threads

    if abandoned_threads():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


def run_and_report(adapter, *, spec, out_dir, json_file=None, seed=0, budget_seconds=None, alpha=1e-3,
                   scenarios=None, rows=None, plots=True, stream=None, shard=None,
                   allow_edge=False, bar: ProgressBar | None = None, tv=None, resolution=0.1) -> int:  # fmt: skip
    """Run, write the report folder, print a compact summary; returns the exit code. bar: a progress bar already
    shown (closed here when the run ends); default: one for the run."""
    from . import run

    stream = stream or (sys.stderr if json_file == "-" else sys.stdout)  # stdout keeps pure JSON with --json -
    extra = {} if rows is None else {"rows": rows}
    if hasattr(adapter, "verify"):
        extra["started"] = process_started()  # the budget is the command's: start-up and imports count
    if shard is not None:
        extra["shard"] = shard
    try:
        with bar or ProgressBar(getattr(adapter, "name", spec), budget_seconds) as bar:
            report = run(adapter, seed=seed, budget_seconds=budget_seconds, alpha=alpha, scenarios=scenarios,
                         progress=_telling(bar.update), tv=tv, resolution=resolution, **extra)  # fmt: skip
    except UsageError as error:  # --tv with a budget too small for it (plan_rows.BudgetTooSmall)
        print(f"specref conform: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:  # before the run's first call or after its last: nothing partial to report
        print(f"specref conform: interrupted (SIGINT) before a report was made; exit {EXIT_INTERRUPTED}",
              file=sys.stderr)  # fmt: skip
        return EXIT_INTERRUPTED
    except Exception:  # noqa: BLE001 -- the adapter's own failures are verdicts inside run(); this is specref's bug
        return _internal_error(spec)
    return _write_and_tell(report, out_dir, spec, json_file, plots=plots, stream=stream, allow_edge=allow_edge)


def _telling(update):
    """The progress callback, printing the run's sizing (how many rows, how long it expects) to stderr as it is
    fixed, before the main pass."""

    def progress(message: str, fraction: float) -> None:
        if message.startswith("sizing: "):
            print(f"specref conform: {message}", file=sys.stderr, flush=True)
        update(message, fraction)

    return progress


def process_started() -> float:
    """The time.perf_counter() at which this process started (Linux /proc; elsewhere: now)."""
    import time

    try:
        ticks = os.sysconf("SC_CLK_TCK")
        since_boot = float(Path("/proc/uptime").read_text().split()[0])
        stat = Path("/proc/self/stat").read_text()
        started_at = int(stat[stat.rindex(")") + 2 :].split()[19]) / ticks  # field 22: starttime, in ticks
        return time.perf_counter() - max(0.0, since_boot - started_at)
    except (OSError, ValueError, IndexError):
        return time.perf_counter()


def _internal_error(spec) -> int:
    traceback.print_exc()
    print("specref conform: internal error: the harness failed, which is a bug in specref, not a verdict on "
          f"{spec!r}; exit {EXIT_INTERNAL}", file=sys.stderr)  # fmt: skip
    return EXIT_INTERNAL


def _write_and_tell(report, out_dir, spec, json_file, *, plots, stream, allow_edge=False) -> int:
    """Write the report folder (and --json), print the summary; returns the exit code."""
    from .engine.report import INTERRUPTED, LOSSY, RARE_EDGE
    from .report.render import write_report

    try:
        paths = write_report(report, out_dir, spec=spec, plots=plots)
        if plots:
            report.contract.draw(report, paths)  # the contract's own pictures (trees: acceptance per node)
    except Exception:  # noqa: BLE001 -- writing the report is specref's own job
        return _internal_error(spec)
    if json_file == "-":
        print(Path(paths["json"]).read_text())
    elif json_file:
        Path(json_file).parent.mkdir(parents=True, exist_ok=True)
        Path(json_file).write_text(Path(paths["json"]).read_text())
    print(report.summary(), file=stream)
    if report.verdict == LOSSY:
        print("  exit 1: lossy by configuration (the rule does not keep the target law, by design; not a crash)",
              file=stream)  # fmt: skip
    if report.verdict == RARE_EDGE:
        print(f"  exit {EXIT_CONFORMING if allow_edge else EXIT_NON_CONFORMING}: only a rare edge failed "
              + ("(accepted by --allow-edge)" if allow_edge else "(--allow-edge accepts it)"), file=stream)  # fmt: skip
    print(f"  report: {paths['md']}", file=stream)
    if report.verdict == INTERRUPTED:
        print(f"  exit {EXIT_INTERRUPTED}: interrupted; the report is partial", file=stream)
        return EXIT_INTERRUPTED
    edge_only = allow_edge and report.verdict == RARE_EDGE
    return EXIT_CONFORMING if report.passed or edge_only else EXIT_NON_CONFORMING


__all__ = ["add_parser", "add_merge_parser", "conform", "list_builtins", "merge_shards", "resolve", "run_and_report",
           "select_scenarios"]  # fmt: skip
