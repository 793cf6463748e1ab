"""specref's sessions. `nox -s properties` is CI; the costly sessions are opt-in (default=False)."""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["properties", "lint"]

# pip has this CPU build on disk here; any other pin pulls a CUDA build of several GB.
TORCH_CPU = "torch==2.13.0"


# The CUDA kernel (specref/kernels/cuda.py) is Triton; its tests run it on CPU under Triton's interpreter.
TRITON = "triton==3.9.0; platform_system == 'Linux' and platform_machine == 'x86_64'"


def install(session: nox.Session, extras: str = "test,transformers,plots", torch: str = TORCH_CPU, *extra: str) -> None:
    session.install(torch, *extra, "-e", f".[{extras}]")


TIERS = ("exact", "statistical", "hypothesis_stat")  # cheapest and most certain first


@nox.session
def properties(session: nox.Session) -> None:
    """The CI suite by tier (exact, statistical, Hypothesis), then a quick CPU pass of gpu_tests.

    The exact tier includes properties/test_minimal_install.py: a venv with the core dependencies and torch only
    (no extras), in which the CLI must run a short conformance check, write its report and exit with its verdict.

    With posargs, one pytest run with them instead of the tiers (e.g. `nox -s properties -- -k coupling`).
    """
    install(session, "test,transformers,plots", TORCH_CPU, TRITON)
    if session.posargs:
        session.run("pytest", "-n", "auto", *session.posargs)
        return
    for tier in TIERS:
        session.run("pytest", "-n", "auto", "-m", tier)
    session.run("pytest", "gpu_tests", "-q", "-m", "not slow", env={"SPECREF_DEVICE": "cpu"})


@nox.session(default=False)
def gpu(session: nox.Session) -> None:
    """CUDA tests (gpu_tests/); every test skips with a reason when CUDA is absent. Uses the torch at hand."""
    session.install("-e", ".[test,transformers,plots]")
    session.run("pytest", "gpu_tests", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and format check."""
    session.install("ruff")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(default=False)
def calibration(session: nox.Session) -> None:
    """Meta-test: false-alarm rate over >= 200 seeds and power on biased samplers; writes reports/calibration*."""
    install(session)
    session.run("python", "-m", "specref.calibration", *session.posargs)


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """Benchmark the batched engines against baselines; writes reports/bench.md, bench_tree.md and their json."""
    install(session)
    session.run("python", "-m", "specref.bench", *session.posargs)
    session.run("python", "-m", "specref.bench_tree", *session.posargs)


@nox.session(default=False)
def conformance(session: nox.Session) -> None:
    """The main job: conform the built-ins, the transformers adapter and every mutant; writes reports/."""
    install(session)
    session.run("python", "-m", "specref.conformance.suite", *session.posargs)


@nox.session(default=False)
def mutants(session: nox.Session) -> None:
    """Run the conformance suite on every mutant in specref.mutants; writes reports/mutants.md."""
    install(session)
    session.run("python", "-m", "specref.conformance.suite", "--mutants-only", *session.posargs)


@nox.session(default=False)
def e2e(session: nox.Session) -> None:
    """End-to-end checks on tiny real transformers models: laws, tau, processor mutants, speed; reports/e2e/."""
    install(session)
    session.run("python", "-m", "specref.e2e", *session.posargs)
