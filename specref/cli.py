"""The `specref` command line."""

from __future__ import annotations

import argparse
import os
import sys
from collections import Counter

from . import __version__


def worked(args: argparse.Namespace) -> int:
    """Run the worked cases of specref.worked: the exact law from enumeration beside seeded sampled frequencies."""
    from . import exact, reference, worked
    from .randomness import Sampled

    rng = Sampled(args.seed)
    for case in (worked.REJECT_CASE, worked.ACCEPT_CASE):
        target_rows, draft_rows, tokens = worked.rows_for(case["prefix"], case["drafts"])
        law = exact.verify_law(target_rows, draft_rows, tokens)
        counts = Counter(tuple(reference.verify(target_rows, draft_rows, tokens, rng)) for _ in range(args.n))
        print(f'\nprefix "{case["prefix"]}"  drafts "{case["drafts"]}"')
        print(f"  {'emitted':<32} {'exact P':>10} {'sampled':>9}")
        for outcome, prob in sorted(law.items(), key=lambda kv: -kv[1]):
            print(f"  {worked.decode(outcome):<32} {str(prob):>10} {counts[outcome] / args.n:>9.4f}")
    return 0


def add_demo(sub) -> None:
    """`specref demo` (specref.demo): the README's first command; like conform, its parser imports no torch."""
    from .demo import add_parser

    add_parser(sub)


def add_conform(sub) -> None:
    """`specref conform` (specref.conformance.cli). Building the parser imports no torch: a missing package is
    reported by the command itself, at once, with the pip command that installs it (specref.extras)."""
    from .conformance.cli import add_parser

    add_parser(sub)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="specref", description=__doc__)
    parser.add_argument("--version", action="version", version=f"specref {__version__}")
    sub = parser.add_subparsers(dest="command")
    add_demo(sub)
    p_worked = sub.add_parser("worked", help="the worked cases: exact law against sampled frequencies")
    p_worked.add_argument("--seed", type=int, default=0)
    p_worked.add_argument("-n", type=int, default=20000, help="sampled verify steps per case")
    p_worked.set_defaults(func=worked)
    add_conform(sub)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return args.func(args)


def entry() -> None:
    """The `specref` command: main(), then leave without the interpreter's teardown. Its verdict and report are
    written by then; unloading torch and its thread pools took 1.5 s of every run alone and 3-6 s on a loaded
    machine, time past a run's --budget-seconds. (Tests call main() and keep their process.)"""
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    entry()
