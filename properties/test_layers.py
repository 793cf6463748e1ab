"""The layers of specref/, written down once (LAYERS) and held from the source: the import graph, built with `ast`
(module-level and function-level imports alike; `if TYPE_CHECKING:` blocks and third-party packages aside), has no
circle, no import from a lower layer into a higher one, no import between the tree and pipeline contracts, and
the harness's engine imports no contract. docs/harness.md draws the same layers in words."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

pytestmark = pytest.mark.exact

ROOT = Path(__file__).resolve().parent.parent / "specref"
C = "specref.conformance"

#: Lowest first. A module belongs to the layer of the longest prefix that names it (a package prefix covers its
#: submodules).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("the engines and the math", ("specref", "specref.errors", "specref.validation", "specref.outputs",
                                  "specref.extras", "specref.builtins", "specref.forced", "specref.randomness",
                                  "specref.stats", "specref.exact", "specref.exact_tree", "specref.exact_store",
                                  "specref.theory", "specref.theory_tree", "specref.rules_tau", "specref.worked",
                                  "specref.strategies", "specref.tree_contract", "specref.tree_inputs",
                                  "specref.reference", "specref.batched", "specref.models")),
    ("the harness's engine: one run for every contract", (f"{C}.engine",)),
    ("the forced rare-edge probe", (f"{C}.edges",)),
    ("the chain contract", (f"{C}.chain",)),
    ("tiny real models and whole pipelines", ("specref.hf",)),
    ("the tree and pipeline contracts", (f"{C}.tree", f"{C}.pipeline", f"{C}.sampling")),
    ("the mutant catalogue", ("specref.mutants",)),
    ("which contract a subject declares", (f"{C}.contracts",)),
    ("rendering reports", (f"{C}.report",)),
    ("real engines", (f"{C}.peers",)),
    ("the harness's face: run, contracts' re-exports, resolving IMPL", (C,)),
    ("programs", ("specref.cli", "specref.demo", "specref.e2e", "specref.calibration", "specref.pytest_plugin",
                  f"{C}.cli", f"{C}.suite", f"{C}.tree_suite", f"{C}.lossy_suite", f"{C}.edge_runs",
                  f"{C}.peers.suite", f"{C}.share_bench")),
)  # fmt: skip
#: The layers whose packages must not import each other (in the others, modules of one layer may).
INDEPENDENT = ("the tree and pipeline contracts",)
#: The contract packages: the engine imports none of them.
CONTRACT_PACKAGES = (f"{C}.chain", f"{C}.tree", f"{C}.pipeline", f"{C}.sampling")


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            lines |= {n.lineno for sub in node.body for n in ast.walk(sub) if hasattr(n, "lineno")}
    return lines


def import_graph() -> dict[str, set[str]]:
    """{module: the specref modules it imports}, from the source."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        skip, package = _type_checking_lines(tree), path.name == "__init__.py"
        graph[name] = set()
        for node in ast.walk(tree):
            if getattr(node, "lineno", None) in skip:
                continue
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    here = name.split(".") if package else name.split(".")[:-1]
                    base = ".".join(here[: len(here) - node.level + 1] + ([node.module] if node.module else []))
                targets = [base] + [f"{base}.{alias.name}" for alias in node.names]
            else:
                continue
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name and target.startswith("specref"):
                    graph[name].add(target)
    return graph


def layer_of(module: str) -> tuple[int, str]:
    """(layer index, the prefix that places it)."""
    best = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > len(best[1])):
                best = (index, prefix)
    assert best is not None, f"{module} is in no layer of LAYERS"
    return best


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of two or more modules (Tarjan), a package and its own submodules aside."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return [c for c in out if not all(a.startswith(b + ".") or b.startswith(a + ".") or a == b for a in c for b in c)]


def test_no_import_circle():
    assert _circles(import_graph()) == []


def test_no_import_from_a_lower_layer_into_a_higher_one():
    upward, across = [], []
    for module, targets in import_graph().items():
        (low, mine) = layer_of(module)
        for target in targets:
            (high, theirs) = layer_of(target)
            if high > low:
                upward.append(f"{module} ({LAYERS[low][0]}) imports {target} ({LAYERS[high][0]})")
            elif high == low and mine != theirs and LAYERS[low][0] in INDEPENDENT:
                across.append(f"{module} imports {target}: two packages of the layer {LAYERS[low][0]!r}")
    assert upward == [] and across == []


def test_the_engine_imports_no_contract():
    engine = f"{C}.engine"
    bad = [(m, t) for m, ts in import_graph().items() if m == engine or m.startswith(engine + ".") for t in ts
           if any(t == p or t.startswith(p + ".") for p in CONTRACT_PACKAGES)]  # fmt: skip
    assert bad == []


def test_the_checker_sees_imports_written_inside_functions():
    """A function-level import counts (it hides a circle as well as a module-level one would): the graph holds the
    tree package's lazy import of the engine's run."""
    assert f"{C}.engine.run" in import_graph()[f"{C}.tree"]


def test_every_module_is_in_a_layer():
    for module in import_graph():
        layer_of(module)
