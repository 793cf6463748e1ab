"""The progress of a run: a bar on a terminal, and without one (a CI log) one line per scenario with its rows, the
time elapsed and the expected end. Used by `specref conform`, `specref demo` and the suites."""

from __future__ import annotations

import shutil
import sys
import time


class ProgressBar:
    """A tqdm bar on stderr fed by run(progress=...) on a terminal (none when tqdm is missing); elsewhere one line
    on stderr per scenario the main pass finishes."""

    def __init__(self, name: str, budget_seconds: float | None):
        self.name, self.budget_seconds, self.bar = name, budget_seconds, None
        self.lines, self.began = not sys.stderr.isatty(), time.perf_counter()

    def __enter__(self) -> ProgressBar:
        if not self.lines and self.bar is None:  # entered once: the CLI shows it before the subject loads
            try:
                from tqdm import tqdm
            except ImportError:
                return self
            budget = "" if self.budget_seconds is None else " of ~" + f"{self.budget_seconds:.0f}s"
            layout = "{desc:<40.40} {percentage:3.0f}%|{bar}| {elapsed}" + budget
            width = shutil.get_terminal_size((100, 20)).columns  # falls back when the terminal reports 0 columns
            self.bar = tqdm(total=100, desc=self.name, file=sys.stderr, leave=False, bar_format=layout, ncols=width)
        return self

    def loading(self, what: str) -> None:
        """Say on the bar what is loading (before the run's first progress); nothing without a terminal."""
        if self.bar is not None:
            self.bar.set_description_str(f"{self.name}: {what}")

    def update(self, message: str, fraction: float) -> None:
        if self.lines and not message.startswith("probe ") and message != "done":
            print(self.line(message, fraction, time.perf_counter() - self.began), file=sys.stderr, flush=True)
        if self.bar is not None:
            self.bar.set_description_str(f"{self.name}: {message}", refresh=False)
            self.bar.update(max(0.0, 100 * fraction - self.bar.n))

    def line(self, message: str, fraction: float, elapsed: float) -> str:
        """`specref: NAME: SCENARIO: ROWS rows (P%), E s elapsed, expected end in ~R s`."""
        if self.budget_seconds is not None:
            left = max(0.0, self.budget_seconds - elapsed)
        else:
            left = elapsed / fraction * (1 - fraction) if fraction > 0 else float("nan")
        return (f"specref: {self.name}: {message} ({100 * fraction:.0f}%), {elapsed:.0f} s elapsed, expected end "
                f"in ~{left:.0f} s")  # fmt: skip

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()


__all__ = ["ProgressBar"]
