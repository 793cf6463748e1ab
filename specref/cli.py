"""The `specref` command line."""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from . import __version__


def demo(args: argparse.Namespace) -> int:
    """Run DESIGN.md's worked cases: the exact law from enumeration beside seeded sampled frequencies."""
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


def add_conform(sub) -> None:
    """`specref conform` (specref.conformance.cli); without torch, a stub that says what to install."""
    try:
        from .conformance.cli import add_parser
    except ImportError as error:  # torch is an optional dependency; `demo` must work without it
        message = str(error)
        p_conform = sub.add_parser("conform", help="check an implementation (needs torch)")
        p_conform.add_argument("rest", nargs=argparse.REMAINDER)
        p_conform.set_defaults(func=lambda args: _missing(message))
        return
    add_parser(sub)


def _missing(message: str) -> int:
    print(f"specref conform: error: {message}; install the extras: pip install 'specref[transformers,plots]'",
          file=sys.stderr)  # fmt: skip
    return 2


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="specref", description=__doc__)
    parser.add_argument("--version", action="version", version=f"specref {__version__}")
    sub = parser.add_subparsers(dest="command")
    p_demo = sub.add_parser("demo", help="the worked cases: exact law against sampled frequencies")
    p_demo.add_argument("--seed", type=int, default=0)
    p_demo.add_argument("-n", type=int, default=20000, help="sampled verify steps per case")
    p_demo.set_defaults(func=demo)
    add_conform(sub)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
