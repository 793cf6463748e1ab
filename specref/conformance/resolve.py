"""IMPL on the command line -> an adapter: built-in names, `package.module:attr` and `path/to/file.py:attr`.

Every failure is a UsageError (exit 2) that names IMPL and says what to fix.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import re
import sys
from pathlib import Path

from ..extras import ADAPTER_REQUIREMENTS, missing


class UsageError(Exception):
    """A problem with what the user asked for (exit 2), as opposed to a verdict on the implementation."""


def list_builtins() -> str:
    from .adapters import builtin_adapters

    builtins = builtin_adapters()
    lines = ["built-in implementations (specref conform NAME):"]
    for name, factory in builtins.items():
        try:
            adapter = factory()
        except Exception as error:  # noqa: BLE001 -- a listing must not die on one unavailable built-in
            lines.append(f"  {name:<28} (unavailable here: {type(error).__name__}: {error})")
            continue
        about = getattr(adapter, "notes", "") or getattr(adapter, "description", "")
        tags = [getattr(adapter, "kind", "kernel")]
        if getattr(adapter, "lossy", False):
            tags.append("lossy by configuration")
        if getattr(adapter, "expected_conforming", True) is False:
            tags.append("a deliberate bug")
        lines.append(f"  {name:<28} {about.split(';')[0].split('. ')[0]} [{', '.join(tags)}]")
    for name, requirements in ADAPTER_REQUIREMENTS.items():
        absent = missing(*requirements)
        if name not in builtins and absent:
            lines.append(f"  {name:<28} (needs {', '.join(r.module for r in absent)}: "
                         f"{' && '.join(dict.fromkeys(r.install for r in absent))})")  # fmt: skip
    from .tree import builtin_tree_adapters

    lines.append("tree verifiers (specref conform NAME; the tree contract, specref.tree_contract):")
    for name, factory in builtin_tree_adapters().items():
        adapter = factory()
        lines.append(f"  {name:<28} {adapter.notes} [tree, rule {adapter.rule}, {adapter.scheme} children]")
    lines.append("Real engines (vllm, vllm-generate, llama-cpp-generate, mlx-lm-generate; flashinfer and sglang on "
                 "CUDA) are listed only where their package imports: see specref.conformance.peers.PEERS.")  # fmt: skip
    return "\n".join(lines)


# --- resolving IMPL ------------------------------------------------------------------------------------------------


def resolve(spec: str, tree: bool = False):
    """(Adapter, report-folder label) for IMPL; raises UsageError with a clear message. tree: IMPL is a tree
    verifier (also detected for the tree built-ins and for objects declaring kind='tree')."""
    from .adapters import Adapter, as_adapter, builtin_adapters
    from .tree import as_tree_adapter, builtin_tree_adapters, is_tree

    trees = builtin_tree_adapters()
    if spec in trees:
        return trees[spec](), spec
    builtins = builtin_adapters()
    if spec in builtins:
        if tree:
            raise UsageError(f"IMPL={spec!r} is a chain built-in; --tree takes a tree verifier ({', '.join(trees)})")
        return builtins[spec](), spec
    if ":" not in spec:
        raise UsageError(f"IMPL={spec!r} is not a built-in ({', '.join(builtins)}) and has no ':attr' part; use "
                         "package.module:attr or path/to/file.py:attr")  # fmt: skip
    where, attr = spec.rsplit(":", 1)
    if not where or not attr:
        raise UsageError(f"IMPL={spec!r}: both sides of ':' must be non-empty")
    module = _load_file(where) if where.endswith(".py") or os.sep in where else _import(where)
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UsageError(f"IMPL={spec!r}: {where} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if inspect.isclass(obj) and not issubclass(obj, Adapter):
        raise UsageError(f"IMPL={spec!r} is a class; point at a verify function or an adapter instance")
    stem = Path(where).stem if where.endswith(".py") else where.rsplit(".", 1)[-1]
    if getattr(obj, "kind", None) == "pipeline" and not hasattr(obj, "verify"):  # whole pipelines: run() knows them
        return obj, re.sub(r"[^A-Za-z0-9_.-]+", "-", getattr(obj, "name", f"{stem}.{attr}"))
    try:
        adapter = as_tree_adapter(obj) if tree or is_tree(obj) else as_adapter(obj)
    except ValueError as error:
        raise UsageError(f"IMPL={spec!r}: {error}") from None
    _check_signature(adapter.verify, spec, arity=5 if is_tree(adapter) else 4)
    label = adapter.name if adapter.name not in (attr, "verify", "function") else f"{stem}.{attr}"
    return adapter, re.sub(r"[^A-Za-z0-9_.-]+", "-", label)


def _import(module_name: str):
    if os.getcwd() not in sys.path:  # as `python -m` would: modules in the working directory are importable
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(module_name)
    except Exception as error:  # noqa: BLE001 -- any import failure is the user's to fix: exit 2 with the cause
        raise UsageError(f"cannot import {module_name!r}: {type(error).__name__}: {error}") from None


def _load_file(path: str):
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"IMPL file {path!r} does not exist")
    name = "specref_impl_" + re.sub(r"\W", "_", file.stem)
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot load {path!r} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(file.resolve().parent))  # its sibling modules are importable, as under `python file.py`
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as error:  # noqa: BLE001
        raise UsageError(f"cannot import {path!r}: {type(error).__name__}: {error}") from None
    return module


def _check_signature(verify, spec: str, arity: int = 4) -> None:
    try:
        signature = inspect.signature(verify)
    except (TypeError, ValueError):
        return  # builtins and C extensions: let the calls tell
    try:
        signature.bind(*[None] * arity)
    except TypeError:
        call = "draft_tokens, parents, generator" if arity == 5 else "draft_tokens, generator"
        raise UsageError(f"IMPL={spec!r}: its verify{signature} cannot be called as verify(target_probs, "
                         f"draft_probs, {call}); a factory must be called first") from None  # fmt: skip
