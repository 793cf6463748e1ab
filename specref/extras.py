"""Optional dependencies, checked before a run starts rather than discovered when it ends.

`pip install specref` gives numpy and scipy. Everything else is optional:

    torch          the engines and the conformance harness              pip install 'specref[torch]'
    transformers   the transformers adapters and pipelines, the e2e     pip install 'specref[transformers]'
                   checks, the bench baseline
    matplotlib     PNG plots (every report is complete without them)    pip install 'specref[plots]'
    tqdm           the progress bar on a terminal                       pip install 'specref[plots]'

A run that needs a package it lacks stops at once with exit 2 and the command that fixes it (`require`); one
that can do without (plots, progress) says so once at the start and goes on (`notice`). The checks call
importlib.util.find_spec, which does not import the package: they cost milliseconds, even for torch.

What each built-in of `specref conform NAME` needs beyond torch is declared in its row of the table in
specref.builtins (`builtins.adapter_requirements` reads it); MissingDependency is one of specref.errors.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass

from .errors import MissingDependency


@dataclass(frozen=True)
class Requirement:
    module: str  # the top-level import name, e.g. "sgl_kernel"
    install: str  # the shell command that provides it, e.g. "pip install 'specref[plots]'"

    @property
    def available(self) -> bool:
        if self.module in sys.modules:  # imported already (or blocked: sys.modules[name] = None)
            return sys.modules[self.module] is not None
        try:
            return importlib.util.find_spec(self.module) is not None
        except (ImportError, ValueError):
            return False


TORCH = Requirement("torch", "pip install 'specref[torch]'")
TRANSFORMERS = Requirement("transformers", "pip install 'specref[transformers]'")
MATPLOTLIB = Requirement("matplotlib", "pip install 'specref[plots]'")
TQDM = Requirement("tqdm", "pip install 'specref[plots]'")


def missing(*requirements: Requirement) -> list[Requirement]:
    """The requirements that cannot be imported here, in order, without duplicates."""
    return [r for r in dict.fromkeys(requirements) if not r.available]


def require(what: str, *requirements: Requirement) -> None:
    """Raise MissingDependency naming `what` (e.g. "specref conform transformers") if any requirement is missing."""
    absent = missing(*requirements)
    if absent:
        raise MissingDependency(what, absent)


def exit_if_missing(what: str, *requirements: Requirement) -> None:
    """For `python -m` entry points, before their heavy imports: the MissingDependency message and exit 2."""
    try:
        require(what, *requirements)
    except MissingDependency as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def notice(*, plots: bool, progress: bool) -> str | None:
    """One line saying what a run will do without (PNG plots, the progress bar), or None when nothing is missing.

    plots: the run would draw PNGs; progress: it would show a bar (stderr is a terminal).
    """
    wanted = [(MATPLOTLIB, "no PNG plots")] if plots else []
    wanted += [(TQDM, "no progress bar")] if progress else []
    absent = [(r, effect) for r, effect in wanted if not r.available]
    if not absent:
        return None
    modules = " and ".join(r.module for r, _ in absent)
    commands = " && ".join(dict.fromkeys(r.install for r, _ in absent))
    return f"{modules} not installed: {', '.join(e for _, e in absent)} this run ({commands} adds them)"


__all__ = [
    "MATPLOTLIB",
    "TORCH",
    "TQDM",
    "TRANSFORMERS",
    "MissingDependency",
    "Requirement",
    "exit_if_missing",
    "missing",
    "notice",
    "require",
]
