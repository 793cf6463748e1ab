"""The progress bar of a run on a terminal: used by `specref conform`, `specref demo` and the suites."""

from __future__ import annotations

import shutil
import sys


class ProgressBar:
    """A tqdm bar on stderr fed by run(progress=...); silent when stderr is not a terminal or tqdm is missing."""

    def __init__(self, name: str, budget_seconds: float | None):
        self.name, self.budget_seconds, self.bar = name, budget_seconds, None

    def __enter__(self) -> ProgressBar:
        if sys.stderr.isatty():
            try:
                from tqdm import tqdm
            except ImportError:
                return self
            budget = "" if self.budget_seconds is None else " of ~" + f"{self.budget_seconds:.0f}s"
            layout = "{desc:<40.40} {percentage:3.0f}%|{bar}| {elapsed}" + budget
            width = shutil.get_terminal_size((100, 20)).columns  # falls back when the terminal reports 0 columns
            self.bar = tqdm(total=100, desc=self.name, file=sys.stderr, leave=False, bar_format=layout, ncols=width)
        return self

    def update(self, message: str, fraction: float) -> None:
        if self.bar is not None:
            self.bar.set_description_str(f"{self.name}: {message}", refresh=False)
            self.bar.update(max(0.0, 100 * fraction - self.bar.n))

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()


__all__ = ["ProgressBar"]
