"""`python -m specref.calibration [--seeds 2000] [--rows N] [--jobs J] [--dtype D] [--quick] [--out reports]`: see
specref.calibration."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

from . import MUTANTS, Settings, calibrate, rerender
from .sweep import DTYPES


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(prog="python -m specref.calibration", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a few minutes: 20 seeds, 1024 rows per scenario")
    parser.add_argument("--seeds", type=int, help="seeds for the batched engine (default 2000; quick 20)")
    parser.add_argument("--reference-seeds", type=int, help="seeds for the reference engine (default 100)")
    parser.add_argument("--mutant-seeds", type=int, help="seeds for each biased sampler (default 50; quick 5)")
    parser.add_argument("--curve-seeds", type=int, help="seeds per power-curve point (default 20; 0 skips them)")
    parser.add_argument("--rows", type=int, help="rows per small scenario per seed (default 2048; quick 1024)")
    parser.add_argument("--reference-rows", type=int, help="rows per scenario per seed, reference engine")
    parser.add_argument("--jobs", type=int, help="worker processes for the seeds (default 1)")
    parser.add_argument("--dtype", choices=DTYPES, help="the dtype every adapter asks for (default float32); the "
                        "harness gives rows exact in it. Use a separate --out for each dtype")  # fmt: skip
    parser.add_argument("--no-sizes", action="store_true", help="skip the exact-size table (about 30 s)")
    parser.add_argument("--mutants", help=f"comma-separated mutant names (default {','.join(MUTANTS)})")
    parser.add_argument("--out", type=Path, default=Path("reports"), help="report directory (default reports)")
    parser.add_argument("--render-from", type=Path, metavar="JSON", help="only rebuild the reports from this JSON")
    args = parser.parse_args(argv)
    if args.render_from is not None:
        try:
            result = rerender(args.render_from, args.out)
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        print(f"wrote {', '.join(result['files'])}")
        return 0
    settings = Settings.quick() if args.quick else Settings()
    overrides = {
        "seeds": args.seeds,
        "reference_seeds": args.reference_seeds,
        "mutant_seeds": args.mutant_seeds,
        "curve_seeds": args.curve_seeds,
        "jobs": args.jobs,
        "dtype": args.dtype,
        "sizes": False if args.no_sizes else None,
        "rows": args.rows,
        "reference_rows": args.reference_rows,
        "mutants": tuple(args.mutants.split(",")) if args.mutants else None,
    }
    try:
        settings = dataclasses.replace(settings, **{k: v for k, v in overrides.items() if v is not None})
        started = time.perf_counter()
        result = calibrate(
            settings,
            args.out,
            progress=lambda m: print(f"[{time.perf_counter() - started:6.0f} s] {m}", flush=True),
            argv=argv,
        )
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for null in result["null"]:
        fw = null["family_wise"][0]
        print(
            f"{null['engine']}: runs flagged at alpha {fw['alpha']:g}: {fw['count']}/{fw['trials']} "
            f"[{fw['ci_low']:.4f}, {fw['ci_high']:.4f}]"
        )
    for m in result["power"]:
        f = m["flagged"]
        print(f"{m['engine']}: power {f['count']}/{f['trials']} [{f['ci_low']:.3f}, {f['ci_high']:.3f}]")
    print(
        f"wrote {', '.join(result.get('files', []))}; sweeps {result['wall_seconds']:.0f} s, "
        f"total {time.perf_counter() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
