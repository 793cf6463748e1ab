"""IMPL on the command line -> an adapter: built-in names, `package.module:attr` and `path/to/file.py:attr`.

Every failure is a UsageError (exit 2) that names IMPL and says what to fix. The checks that need nothing but the
user's own module (a missing file, a missing attribute, a class, a wrong signature) run before torch is imported,
so they answer at once. Library code: the command line (conformance/cli.py), the demo and the pytest plugin use it.
"""

from __future__ import annotations

import dataclasses
import difflib
import importlib
import importlib.util
import inspect
import multiprocessing
import os
import re
import sys
from pathlib import Path

from .. import arguments
from ..builtins import BY_NAME, CONTRACTS, listing
from ..errors import UsageError
from ..extras import TORCH, require
from . import scenario_names
from .load_guard import Deferred, load_guarded, rehearse

CHAIN_ARGS = ("target_probs", "draft_probs", "draft_tokens", "generator")
TREE_ARGS = ("target_probs", "draft_probs", "draft_tokens", "parents", "generator")
SAMPLING_ARGS = ("target_logits", "draft_probs", "draft_tokens", "params", "histories", "generator")
#: Adapter names that say nothing about the implementation: the report is named from IMPL instead.
_GENERIC_NAMES = ("verify", "verify_tree", "function", "<lambda>")


def absolute_spec(spec: str) -> str:
    """`file.py:attr` with the file's absolute path (other specs as they are): what a report records, so that its
    snippets run from any folder."""
    module, sep, attr = spec.rpartition(":")
    return f"{os.path.abspath(module)}:{attr}" if sep and module.endswith(".py") else spec


def list_builtins() -> str:
    """`specref conform --list` (specref.builtins.listing): imports neither torch nor any engine."""
    return listing()


# --- resolving IMPL ------------------------------------------------------------------------------------------------


def resolve(spec: str, tree: bool = False, before_load=None):
    """(Adapter, report-folder label) for IMPL; raises UsageError with a clear message. tree: IMPL is a tree
    verifier (also detected for the tree built-ins and for objects declaring kind='tree'). before_load(kind), when
    given, is called with the subject's declared kind ('kernel', 'tree', 'pipeline') before anything costly loads
    (a pipeline's models, a built-in's engine): the CLI refuses options the kind cannot take there.

    The module of a `module:attr` or `file.py:attr` IMPL is imported in a forked child, which checks it and sends
    back its declaration (`_declare`); the adapter built here calls it through a `Deferred`, so the module is
    imported only in the worker that runs the calls. Pipelines, adapters that run in this process (CUDA; no fork;
    SPECREF_CALL_MODE=thread) and declarations that do not travel are loaded here, guarded, after the rehearsal."""
    if spec in BY_NAME:
        if before_load is not None:
            before_load(BY_NAME[spec].kind)
        return _builtin(spec, tree), spec
    if ":" not in spec:
        close = difflib.get_close_matches(spec, BY_NAME, n=3)
        guess = f"did you mean {' or '.join(map(repr, close))}? " if close else ""
        raise UsageError(f"IMPL={spec!r} is not a built-in ({guess}`specref conform --list` names them) and has no "
                         "':attr' part; use package.module:attr or path/to/file.py:attr")  # fmt: skip
    where, attr = spec.rsplit(":", 1)
    if not where or not attr:
        raise UsageError(f"IMPL={spec!r}: both sides of ':' must be non-empty")
    if where.endswith(".py") or os.sep in where:
        _check_file(where)  # before the rehearsal: a missing file needs no child process
    _share_torch(where)
    facts = rehearse(spec, lambda: _declare(spec, where, attr, tree))
    stem = Path(where).stem if where.endswith(".py") else where.rsplit(".", 1)[-1]
    label = f"{stem}.{attr}"
    if before_load is not None and facts is not None:
        before_load(facts["kind"])
    obj = _stand_in(spec, facts, lambda: _subject(spec, where, attr)) if facts is not None else None
    if obj is None:
        obj = load_guarded(spec, lambda: _subject(spec, where, attr), rehearsed=True)
        if before_load is not None and facts is None:
            before_load(getattr(obj, "kind", None))
    if getattr(obj, "kind", None) == "pipeline" and not hasattr(obj, "verify"):  # whole pipelines: run() knows them
        return obj, _safe(getattr(obj, "name", label))
    tree = tree or getattr(obj, "kind", None) == "tree"
    sampling = getattr(obj, "kind", None) == "sampling"
    _check_loaded(obj, spec, where, attr, _expected_args(getattr(obj, "kind", None), tree))
    require(f"IMPL={spec!r}", *BY_NAME["reference"].requirements)  # torch, before the adapters import it
    from .chain.adapters import as_adapter
    from .sampling.adapters import as_sampling_adapter
    from .tree.adapters import as_tree_adapter

    try:
        adapter = as_sampling_adapter(obj) if sampling else as_tree_adapter(obj) if tree else as_adapter(obj)
    except ValueError as error:
        raise UsageError(f"IMPL={spec!r}: {error}") from None
    if adapter.name in (*_GENERIC_NAMES, attr, attr.rsplit(".", 1)[-1]):  # name the subject by module:attr
        adapter = dataclasses.replace(adapter, name=label)
    return adapter, _safe(adapter.name)


def _expected_args(kind, tree: bool) -> tuple[str, ...]:
    """The verify arguments the subject's contract passes."""
    return SAMPLING_ARGS if kind == "sampling" else TREE_ARGS if tree else CHAIN_ARGS


def _check_loaded(obj, spec: str, where: str, attr: str, expected: tuple[str, ...]) -> None:
    """A class, or a callable of the wrong signature, is a usage error naming what to point IMPL at instead."""
    if inspect.isclass(obj) and not _is_adapter_class(obj):
        raise UsageError(f"IMPL={spec!r} is a class; point at a verify function or an adapter instance (e.g. "
                         f"{attr} = {obj.__name__}(...) in {where})")  # fmt: skip
    if not isinstance(obj, (Deferred, _Declared)):  # a stand-in was checked where the module was imported
        _check_signature(getattr(obj, "verify", obj), spec, expected)


# --- the subject's declaration, read in the rehearsal's child -------------------------------------------------------

#: The adapter classes a declaration rebuilds from their fields (exactly these: a subclass is loaded here instead).
_ADAPTER_CLASSES = {"Adapter": "chain.adapters", "TreeAdapter": "tree.adapters"}


class _Declared:
    """An object with `verify` as the subject declared it: its picklable attributes, and a Deferred for verify."""


def _declare(spec: str, where: str, attr: str, tree: bool) -> dict:
    """In the rehearsal's child: the subject imported and checked (class, signature), then what an adapter is built
    from (its kind, shape, attributes; the real verify's module, qualname and file), picklable."""
    from .engine.fingerprint import _callable_of, _source_file

    obj = _subject(spec, where, attr)
    kind = getattr(obj, "kind", None)
    facts = {"kind": kind if isinstance(kind, str) else None, "shape": "other"}
    if facts["kind"] == "pipeline" and not hasattr(obj, "verify"):
        return facts
    tree = tree or facts["kind"] == "tree"
    _check_loaded(obj, spec, where, attr, _expected_args(facts["kind"], tree))
    target = _callable_of(obj)
    facts.update(module=getattr(target, "__module__", None), qualname=getattr(target, "__qualname__", None),
                 name=getattr(target, "__name__", None), source_file=_source_file(target))  # fmt: skip
    verify = getattr(obj, "verify", None)
    cls = type(obj)
    if cls.__name__ in _ADAPTER_CLASSES and cls.__module__ == f"{__package__}.{_ADAPTER_CLASSES[cls.__name__]}":
        fields = {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.name != "verify"}
        facts.update(shape=cls.__name__, fields=fields)
    elif callable(verify) and not inspect.isclass(obj):
        facts.update(shape="object", type_name=cls.__name__, fields=_picklable_attributes(obj))
    elif callable(obj) and not inspect.isclass(obj):
        facts.update(shape="function", name=getattr(obj, "__name__", None))
    return facts


def _picklable_attributes(obj) -> dict:
    """The public data attributes of obj that pickle (its declared capabilities among them)."""
    import pickle

    found = {}
    for name in dir(obj):
        if name.startswith("_") or name == "verify":
            continue
        try:
            value = getattr(obj, name)
            if not callable(value):
                pickle.dumps(value)
                found[name] = value
        except Exception:  # noqa: BLE001 -- a property that raises, a value that does not pickle: not declared here
            continue
    return found


def _stand_in(spec: str, facts: dict, load):
    """The subject rebuilt from its declaration around a Deferred verify, or None where it must load here."""
    if facts["shape"] == "other" or _in_this_process(facts):
        return None

    def load_verify():
        obj = load()
        return obj if facts["shape"] == "function" else obj.verify

    verify = Deferred(load_verify, module=facts["module"], qualname=facts["qualname"], name=facts["name"],
                      source_file=facts["source_file"])  # fmt: skip
    if facts["shape"] == "function":
        return verify
    if facts["shape"] == "object":
        stand_in = type(facts["type_name"], (_Declared,), {})()
        vars(stand_in).update(facts["fields"], verify=verify)
        return stand_in
    require(f"IMPL={spec!r}", *BY_NAME["reference"].requirements)
    module = importlib.import_module(f"{__package__}.{_ADAPTER_CLASSES[facts['shape']]}")
    return getattr(module, facts["shape"])(verify=verify, **facts["fields"])


def _in_this_process(facts: dict) -> bool:
    """Whether the subject loads in specref's own process: its calls run here (engine/calls.call_mode: CUDA,
    SPECREF_CALL_MODE=thread), it is a pipeline, or a sampling subject (its `law` declaration is a callable, which
    the declaration does not carry)."""
    device = str(facts.get("fields", {}).get("device", "cpu"))
    thread = os.environ.get("SPECREF_CALL_MODE") == "thread" or "fork" not in multiprocessing.get_all_start_methods()
    return thread or facts["kind"] in ("pipeline", "sampling") or not device.startswith("cpu")


def _subject(spec: str, where: str, attr: str):
    """The object IMPL names: its module imported (or file loaded), then the attribute path walked."""
    obj = _load_file(where) if where.endswith(".py") or os.sep in where else _import(where)
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise UsageError(f"IMPL={spec!r}: {where} has no attribute {part!r}" +
                             (f" (in {attr!r})" if part != attr else ""))  # fmt: skip
        obj = getattr(obj, part)
    return obj


def _share_torch(where: str) -> None:
    """Import torch before the rehearsal when the subject's source names it: the child then shares this import
    instead of paying for its own (a module that does not name torch is rehearsed, and refused, without it)."""
    file = Path(where) if where.endswith(".py") or os.sep in where else None
    if file is None and "." not in where:
        try:
            found = importlib.util.find_spec(where) if where not in sys.modules else None
        except (ImportError, ValueError):
            found = None
        file = Path(found.origin) if found is not None and found.origin and found.origin.endswith(".py") else None
    try:
        names_torch = file is not None and "torch" in file.read_text(errors="replace")
    except OSError:
        names_torch = False
    if names_torch and TORCH.available:
        import torch  # noqa: F401


def _builtin(name: str, tree: bool):
    row = BY_NAME[name]
    if tree and row.kind != "tree":
        trees = ", ".join(b for b, r in BY_NAME.items() if r.kind == "tree")
        raise UsageError(f"IMPL={name!r} is a chain built-in; --tree takes a tree verifier ({trees})")
    require(f"IMPL={name!r}", *row.requirements)
    if row.cuda_only and not row.available():
        raise UsageError(f"IMPL={name!r} runs on CUDA only, and torch sees no CUDA device here")
    return row.load()


def _safe(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", str(label))


def _is_adapter_class(cls) -> bool:
    adapters = sys.modules.get(f"{__package__}.adapters")  # a subclass of Adapter has imported it already
    return adapters is not None and issubclass(cls, adapters.Adapter)


def _import(module_name: str):
    if os.getcwd() not in sys.path:  # as `python -m` would: modules in the working directory are importable
        sys.path.insert(0, os.getcwd())
    try:
        return importlib.import_module(module_name)
    except Exception as error:  # noqa: BLE001 -- any import failure is the user's to fix: exit 2 with the cause
        raise UsageError(f"cannot import {module_name!r}: {type(error).__name__}: {error}") from None


def _check_file(path: str) -> None:
    file = Path(path)
    if not file.is_file():
        raise UsageError(f"IMPL file {path!r} does not exist" + ("" if file.parent.is_dir() else
                         f" (nor does its folder {str(file.parent)!r})"))  # fmt: skip


def _load_file(path: str):
    _check_file(path)
    file = Path(path)
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


def _check_signature(verify, spec: str, expected: tuple[str, ...] = CHAIN_ARGS) -> None:
    """verify must accept the contract's positional arguments; the message says what was expected and what given."""
    if not callable(verify):
        raise UsageError(f"IMPL={spec!r} is a {type(verify).__name__}, not a verify function or an object with a "
                         "verify method")  # fmt: skip
    try:
        signature = inspect.signature(verify)
    except (TypeError, ValueError):
        return  # builtins and C extensions: let the calls tell
    try:
        signature.bind(*[None] * len(expected))
        return
    except TypeError:
        pass
    params = signature.parameters.values()
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in params if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if any(p.kind == p.VAR_POSITIONAL for p in params):
        given = f"it requires {', '.join(p.name for p in required if p.kind == p.KEYWORD_ONLY)} by keyword"
    elif len(required) > len(expected):
        given = f"it requires {len(required)} arguments ({', '.join(p.name for p in required)}), not {len(expected)}"
    elif len(positional) < len(expected):
        given = f"it takes {len(positional)} positional argument{'s' * (len(positional) != 1)}, not {len(expected)}"
    else:
        given = f"it requires {', '.join(p.name for p in required if p.kind == p.KEYWORD_ONLY)} by keyword"
    name = getattr(verify, "__name__", "verify")
    hint = ""
    if not required:  # callable with no arguments: perhaps a factory that builds the verifier
        hint = "; if it builds the verifier, point IMPL at what it returns (e.g. VERIFIER = " + name + "())"
    raise UsageError(f"IMPL={spec!r}: {name}{signature} cannot be called as verify({', '.join(expected)}): "
                     f"{given}{hint}")  # fmt: skip


# --- --scenarios -----------------------------------------------------------------------------------------------------


def check_scenario_names(spec: str, names: str | list | None, tree: bool = False) -> None:
    """Refuse an unknown --scenarios name before IMPL or torch loads (scenario_names: read from the catalogues'
    source). A built-in's or --tree's contract is known here; a file's kind is read when it loads, so its names are
    held to every verify-level contract now and to its own contract by select_scenarios after the load."""
    if names is None:
        return
    wanted = arguments.scenarios(names, "--scenarios")
    kind = BY_NAME[spec].kind if spec in BY_NAME else "tree" if tree else None
    if kind == "pipeline":
        raise UsageError("--scenarios applies to verify-level adapters, not to pipelines")
    contracts = scenario_names.VERIFY_LEVEL if kind is None else tuple(
        row.name for row in CONTRACTS if row.kind == kind)  # fmt: skip
    scenario_names.check_known(wanted, contracts)


def select_scenarios(adapter, names: str | list | None) -> list[str] | None:
    """The --scenarios list (a comma-separated string or a list), validated against the scenarios the adapter's
    capabilities allow."""
    if names is None:
        return None
    from .contracts import PIPELINE, TREE, contract_of, scenario_names

    if contract_of(adapter) == PIPELINE:
        raise UsageError("--scenarios applies to verify-level adapters, not to pipelines")
    wanted = arguments.scenarios(names, "--scenarios")

    allowed, known = scenario_names(adapter)
    for name in wanted:
        close = difflib.get_close_matches(name, known, n=1) if name not in known else []
        guess = f" (did you mean {close[0]!r}?)" if close else ""
        if contract_of(adapter) == TREE and name not in allowed:
            raise UsageError(f"--scenarios: {name!r} is not a tree scenario {adapter.name!r} can run{guess}; known: "
                             f"{', '.join(known)}")  # fmt: skip
        if name not in known:
            raise UsageError(f"--scenarios: {name!r} is unknown{guess}; known: {', '.join(known)}")
        if name not in allowed:
            raise UsageError(f"--scenarios: {name!r} needs a capability {adapter.name!r} does not declare")
    return wanted


__all__ = ["UsageError", "check_scenario_names", "list_builtins", "resolve", "select_scenarios"]
