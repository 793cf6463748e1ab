"""The built-ins table (specref.builtins), the layering of the package and its one exception base (all exact).

One table: --list, the adapters, the tree adapters, the peers and the missing-package check derive from it, and
each built-in's adapter declares what its row declares. Layers: library code never imports the command line, the
table imports no torch, and the adapters import no engine until a factory is called.
"""

from __future__ import annotations

import ast
import inspect
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specref import builtins, errors, extras
from specref.builtins import BUILTINS, BY_NAME, Builtin

pytestmark = pytest.mark.exact

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "specref"
#: The command-line layer: the only modules that may import the CLI modules.
CLI_MODULES = {"specref.cli", "specref.conformance.cli"}


def fresh(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)


# --- the table -----------------------------------------------------------------------------------------------------


def test_names_are_unique_and_rows_well_formed():
    assert len(BY_NAME) == len(BUILTINS) >= 20
    for b in BUILTINS:
        assert b.kind in builtins.KINDS and b.about and "\n" not in b.about, b
        assert all(r.install.startswith("pip install ") for r in b.needs), b
        assert b.requirements[0] == extras.TORCH
    with pytest.raises(ValueError, match="kind='chain'"):
        Builtin("x", "chain", "a:b", "x")
    with pytest.raises(ValueError, match="name='nope' is not a built-in"):
        builtins.builtin("nope")


def test_every_factory_imports_without_its_engine():
    """The factory's module imports here even where the engine does not (engines are imported inside factories)."""
    for b in BUILTINS:
        assert callable(builtins.load(b.factory)), b


def test_the_adapters_and_tree_adapters_are_the_available_rows_in_table_order():
    from specref.conformance.chain.adapters import builtin_adapters
    from specref.conformance.sampling.adapters import builtin_sampling_adapters
    from specref.conformance.tree import builtin_tree_adapters

    chain = [b.name for b in BUILTINS if b.kind in ("kernel", "pipeline") and b.available()]
    tree = [b.name for b in BUILTINS if b.kind == "tree" and b.available()]
    sampling = [b.name for b in BUILTINS if b.kind == "sampling" and b.available()]
    assert list(builtin_adapters()) == chain and list(builtin_tree_adapters()) == tree
    assert list(builtin_sampling_adapters()) == sampling and {"sampling-reference", "sampling-batched"} <= set(sampling)
    assert {"reference", "batched"} <= set(chain) and "tree-mss" in tree


@pytest.mark.parametrize("name", [b.name for b in BUILTINS if b.kind != "pipeline"])
def test_each_adapter_declares_what_its_row_declares(name):
    row = BY_NAME[name]
    if not row.available():
        pytest.skip(f"{name} does not run here: {row.missing() or 'CUDA only'}")
    adapter = row.load()
    assert adapter.name == name
    assert (adapter.kind, adapter.rule, adapter.lossy) == (row.kind, row.rule, row.lossy)
    assert getattr(adapter, "expected_conforming", True) is not row.bug


def test_the_pipelines_rows_match_what_they_build():
    pytest.importorskip("transformers")
    from specref.hf.pipelines import builtin_pipelines

    rows = [b for b in BUILTINS if b.kind == "pipeline" and b.factory == "specref.hf.pipelines:builtin_pipeline"]
    assert [b.name for b in rows] == list(builtin_pipelines())
    for b in rows:
        assert b.args == (b.name,) and b.needs == (extras.TRANSFORMERS,)
    adapter = BY_NAME["mutant-ratio-q-unprocessed"].load()  # one build: the tiny models are cached
    assert (
        adapter.kind == "pipeline"
        and adapter.expected_conforming is False
        and adapter.name.startswith("mutant-ratio-q-unprocessed[")
    )


def test_listing_names_every_builtin_once_and_agrees_with_its_last_line(monkeypatch):
    monkeypatch.setitem(sys.modules, "transformers", None)  # as where transformers is not installed
    listing = builtins.listing()
    lines = listing.splitlines()
    for b in BUILTINS:
        (line,) = [x for x in lines if x.startswith(f"  {b.name} ")]
        assert b.about in line and b.kind in line
        assert ("(needs " in line) is bool(b.missing()), line
        if b.cuda_only:
            assert "CUDA only" in line
    assert "(needs transformers: pip install 'specref[transformers]')" in listing
    assert "Every built-in is listed, installed or not" in lines[-1]


def test_a_new_peer_is_one_row(monkeypatch):
    """A row whose factory lives in specref.conformance.peers is a peer, an adapter where it imports, and gets a row
    of the peers report; nothing else is edited."""
    from specref.conformance import peers
    from specref.conformance.chain import adapters
    from specref.conformance.peers import suite

    row = Builtin("my-engine", "kernel", "specref.conformance.adapters:batched_adapter", "my engine",
                  needs=(extras.Requirement("json", "pip install json"),))  # fmt: skip
    peer_row = Builtin("my-peer", "kernel", "specref.conformance.peers.vllm:vllm_adapter", "my peer",
                       needs=(extras.Requirement("no_such_engine_xyz", "pip install no-such-engine"),),
                       engine=builtins.Engine(("no-such-dist",), "my_engine.verify"))  # fmt: skip
    monkeypatch.setattr(builtins, "BUILTINS", (*BUILTINS, row, peer_row))
    monkeypatch.setattr(suite, "BUILTINS", builtins.BUILTINS)
    assert "my-engine" in adapters.builtin_adapters() and "my-peer" not in adapters.builtin_adapters()
    assert peer_row.peer and not row.peer
    listing = builtins.listing()
    assert "  my-engine " in listing and "  my-peer " in listing
    assert "(needs no_such_engine_xyz: pip install no-such-engine)" in listing
    (report_row,) = suite.engine_rows(Path("unused"), seed=0, budget_seconds=1, only={"my-peer"})
    assert report_row.package == "no-such-dist (not installed)" and report_row.code_path == "my_engine.verify"
    assert report_row.verdict == "did not run" and "pip install no-such-engine" in report_row.why
    assert peers.PEERS == tuple(b for b in BUILTINS if b.peer)  # PEERS is derived when the package is imported


# --- layers --------------------------------------------------------------------------------------------------------


def _imports(path: Path) -> set[str]:
    """The modules a file imports, relative imports resolved against its package."""
    module = ".".join(path.relative_to(REPO).with_suffix("").parts)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            target = ".".join(filter(None, [base, node.module or ""]))
            found.add(target)
            found |= {f"{target}.{alias.name}" for alias in node.names}
    return found


def test_library_code_never_imports_the_command_line():
    offenders = {}
    for path in PACKAGE.rglob("*.py"):
        module = ".".join(path.relative_to(REPO).with_suffix("").parts)
        if module in CLI_MODULES:
            continue
        bad = _imports(path) & CLI_MODULES
        if bad:
            offenders[module] = sorted(bad)
    assert not offenders, f"library modules importing the CLI: {offenders}"
    assert "specref.conformance.cli" in _imports(PACKAGE / "cli.py")  # the matcher sees a real import


def test_the_table_extras_and_errors_import_no_torch_and_the_adapters_no_engine():
    code = (
        "import sys\nimport specref.builtins, specref.errors, specref.extras, specref.outputs\n"
        "print('torch' in sys.modules)\n"
        "import specref.conformance.adapters\n"
        "print(sorted(m for m in sys.modules if m.startswith(('specref.conformance.peers', 'specref.hf',"
        " 'transformers'))))"
    )
    result = fresh(code)
    assert result.returncode == 0, result.stderr
    torch_imported, engines = result.stdout.splitlines()
    assert torch_imported == "False" and engines == "[]"


# --- one exception base --------------------------------------------------------------------------------------------


def test_every_error_specref_raises_on_purpose_has_one_base():
    from specref.conformance.engine import calls, shards

    assert issubclass(errors.UsageError, errors.SpecrefError)
    for cls in (errors.MissingDependency, errors.MergeError):
        assert issubclass(cls, errors.UsageError)  # exit 2 on the command line
    assert issubclass(errors.AdapterFailure, errors.SpecrefError) and not issubclass(
        errors.AdapterFailure, errors.UsageError
    )
    assert extras.MissingDependency is errors.MissingDependency and shards.MergeError is errors.MergeError
    assert calls.AdapterFailure is errors.AdapterFailure
    from specref.conformance import resolve

    assert resolve.UsageError is errors.UsageError
    from specref import pytest_plugin

    defined = [
        obj
        for module in (errors, extras, builtins, pytest_plugin)
        for _, obj in inspect.getmembers(module, inspect.isclass)
        if issubclass(obj, Exception) and obj.__module__.startswith("specref")
    ]
    assert all(issubclass(cls, errors.SpecrefError) for cls in defined), defined
