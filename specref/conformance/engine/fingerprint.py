"""What a shard ran: a fingerprint of the subject, so that `merge` never sums the counts of two different codes.

The fingerprint holds the source of the module (and file) defining the subject's verify callable, the adapter's
declaration as report.json records it, and the versions of torch and of specref. Paths are shown, never compared:
the same code checked out in two places merges; the same label on two files, or a file edited between shards, does
not.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import sys

from ... import __version__


def _callable_of(subject):
    """The function whose module defines the subject: verify unwrapped from methods, partials and decorators."""
    target = getattr(subject, "verify", subject)
    for _ in range(16):  # a bounded walk: wrappers may point at each other
        if isinstance(target, functools.partial):
            target = target.func
        elif inspect.ismethod(target):
            target = target.__func__
        elif getattr(target, "__wrapped__", None) is not None:
            target = target.__wrapped__
        else:
            break
    return target


def _source_file(target) -> str | None:
    declared = getattr(target, "__specref_source__", None)  # a subject imported in the worker only (load_guard.py)
    if declared is not None:
        return declared
    for get in (inspect.getsourcefile, inspect.getfile):
        try:
            return get(target)
        except (TypeError, OSError):
            continue
    module = sys.modules.get(getattr(target, "__module__", None) or "")
    return getattr(module, "__file__", None)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fingerprint(subject, declaration: dict) -> dict:
    """{module, file, source_sha256, declaration_sha256, torch, specref, digest}; digest covers all but file."""
    import torch  # here: the rehearsal's child reads _callable_of and _source_file without torch

    target = _callable_of(subject)
    file = _source_file(target)
    try:
        source = _sha(open(file, "rb").read()) if file else None  # noqa: SIM115 -- a short read
    except OSError:
        source = None
    record = {
        "module": getattr(target, "__module__", None),
        "qualname": getattr(target, "__qualname__", type(target).__name__),
        "source_sha256": source,
        "declaration_sha256": _sha(json.dumps(declaration, sort_keys=True, default=str).encode()),
        "torch": torch.__version__,
        "specref": __version__,
    }
    record["digest"] = _sha(json.dumps(record, sort_keys=True).encode())
    return {**record, "file": file}


def words(fp: dict | None) -> str:
    """One fingerprint in words, for a refused merge."""
    if not fp:
        return "no fingerprint (a shard of an older specref)"
    source, declared = (fp.get("source_sha256") or "unknown")[:12], (fp.get("declaration_sha256") or "")[:12]
    return (f"{fp.get('module')}.{fp.get('qualname')} from {fp.get('file')} (source sha256 {source}, declaration "
            f"{declared}, torch {fp.get('torch')}, specref {fp.get('specref')})")  # fmt: skip
