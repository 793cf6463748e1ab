"""Exact tree-cycle laws kept on disk across processes: enumerated once per machine, equal to enumerating them again.

    target, draft = exact_store.machine(target_rows, draft_rows, next_state, start)   # Fraction rows per state
    law = exact_store.tree_cycle_law(target_rows, draft_rows, next_state, start, shape, scheme, rule, label=...)

A law is keyed by everything it is a function of: the model (every Fraction of its rows, its transitions and its
start state), the tree shape, the drafting scheme and the rule; and a fingerprint of the code that enumerates it
(the source of exact_tree.py, exact.py, validation.py, randomness.py, every module of reference/ and this module,
Python's version). A file holds its full key and its law, each probability as exact "numerator/denominator"
strings, and a digest of the law's text; a file whose key or digest does not match, or that does not parse, is
enumerated again and rewritten, never trusted. Files are written atomically (a temporary file, then os.replace), so
processes (xdist workers) share them; saving a law removes the same label's laws of other keys (an older model or
code). Files live under $SPECREF_CACHE/exact (default ~/.cache/specref/exact); without a writable folder laws are
enumerated every time. SPECREF_TABLES=0 turns the disk off, for these laws as for stats/tables.py's tables.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from collections.abc import Sequence
from fractions import Fraction
from functools import lru_cache
from pathlib import Path

from . import cache, exact, exact_tree, randomness, reference, validation
from .exact import Law
from .reference import Model, Row

ENV = cache.TABLES
DIGEST = 20  # hex characters of a key's digest in a file name


def folder() -> Path | None:
    """$SPECREF_CACHE/exact (default ~/.cache/specref/exact), created; None when the disk is off or not writable."""
    return cache.table_folder("exact")


@lru_cache(maxsize=1)
def fingerprint() -> str:
    """A digest of the source that enumerates a law, and Python's version."""
    files = [Path(m.__file__) for m in (exact, exact_tree, randomness, validation, sys.modules[__name__])]
    files += sorted(Path(reference.__file__).parent.glob("*.py"))
    text = hashlib.sha256(f"{sys.version_info[:2]}".encode())
    for path in files:
        text.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return text.hexdigest()


def machine(target_rows: Sequence[Row], draft_rows: Sequence[Row], next_state, start: int) -> tuple[Model, Model]:
    """(target, draft) as functions of a context (tokens from the start state) returning that state's row."""

    def state(context):
        s = start
        for token in context:
            s = int(next_state[s][token])
        return s

    return (lambda context: target_rows[state(context)]), (lambda context: draft_rows[state(context)])


def _fractions(rows: Sequence[Row]) -> list[list[str]]:
    return [[f"{Fraction(x).numerator}/{Fraction(x).denominator}" for x in row] for row in rows]


def key(target_rows, draft_rows, next_state, start: int, shape, scheme: str, rule: str) -> str:
    """The full key of a law: its inputs, exactly, and the code's fingerprint (a JSON text)."""
    transitions = [[int(s) for s in row] for row in next_state]
    return json.dumps({"target": _fractions(target_rows), "draft": _fractions(draft_rows), "next_state": transitions,
                       "start": int(start), "shape": repr(shape), "scheme": scheme, "rule": rule,
                       "code": fingerprint()}, sort_keys=True)  # fmt: skip


def _path(label: str, full_key: str) -> Path | None:
    directory = folder()
    if directory is None:
        return None
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", label)  # no glob character: save's pattern below matches it as written
    return directory / f"{safe}-{hashlib.sha256(full_key.encode()).hexdigest()[:DIGEST]}.json"


def _law_text(law: Law) -> str:
    return json.dumps(sorted([list(map(int, tokens)), f"{p.numerator}/{p.denominator}"] for tokens, p in law.items()))


def load(path: Path, full_key: str) -> Law | None:
    """The law in path, or None when absent, unreadable, of another key, or not matching its own digest."""
    try:
        stored = json.loads(path.read_text())
        if stored["key"] != full_key or hashlib.sha256(stored["law"].encode()).hexdigest() != stored["digest"]:
            return None
        law = {}
        for tokens, prob in json.loads(stored["law"]):
            numerator, denominator = prob.split("/")
            law[tuple(int(t) for t in tokens)] = Fraction(int(numerator), int(denominator))
        return law
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ZeroDivisionError):
        return None  # absent, partial or foreign: enumerated again (and rewritten)


def save(path: Path, full_key: str, law: Law) -> None:
    text = _law_text(law)
    record = {"key": full_key, "law": text, "digest": hashlib.sha256(text.encode()).hexdigest()}
    label = path.name[: -len(".json") - DIGEST - 1]
    stale = f"{label}-{'?' * DIGEST}.json"  # the label's other keys
    cache.write(path, lambda handle: handle.write(json.dumps(record).encode()), stale)


def tree_cycle_law(target_rows: Sequence[Row], draft_rows: Sequence[Row], next_state, start: int, shape,
                   scheme: str, rule: str, *, label: str = "tree") -> Law:  # fmt: skip
    """exact_tree.tree_cycle_law from the start state of the machine (target_rows, draft_rows, next_state, start),
    read from the disk when an equal key was enumerated before, else enumerated and saved. label names the file
    (a scenario, its dtype, shape, scheme and rule) and nothing else: the key is what a law is looked up by."""
    full_key = key(target_rows, draft_rows, next_state, start, shape, scheme, rule)
    path = _path(label, full_key)
    law = load(path, full_key) if path is not None else None
    if law is None:
        target, draft = machine(target_rows, draft_rows, next_state, start)
        law = exact_tree.tree_cycle_law(target, draft, (), shape, scheme, rule)
        if path is not None:
            save(path, full_key, law)
    return law


__all__ = ["ENV", "fingerprint", "folder", "key", "load", "machine", "save", "tree_cycle_law"]
