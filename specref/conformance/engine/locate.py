"""Where an adapter raised or hung: 'file:line in function', with the adapter's own frame when the innermost one
lies in a library it called. Failure reports quote it."""

from __future__ import annotations

import inspect
import os
import traceback


def describe_error(error: BaseException) -> str:
    try:
        return f"{type(error).__name__}: {error}"
    except Exception:  # noqa: BLE001 -- a __str__ that raises
        return type(error).__name__


def _source_file(verify) -> str | None:
    declared = getattr(verify, "__specref_source__", None)  # a subject imported in the worker only (load_guard.py)
    if declared is not None:
        return os.path.abspath(declared)
    try:
        return os.path.abspath(inspect.getsourcefile(inspect.unwrap(getattr(verify, "__func__", verify))))
    except (TypeError, ValueError):
        return None


def raised_at(frames, verify, skip: str) -> str | None:
    """'file:line in function' of the innermost frame of a traceback outside the file `skip` (the harness's)."""
    stack = [
        f for f in (traceback.extract_tb(frames) if frames is not None else []) if os.path.abspath(f.filename) != skip
    ]
    return locate(stack, verify)


def locate(stack: list[traceback.FrameSummary], verify) -> str | None:
    """The innermost frame; when it lies outside verify's own file (in a library verify called), also the innermost
    frame in verify's file."""
    if not stack:
        return None
    where = f"{stack[-1].filename}:{stack[-1].lineno} in {stack[-1].name}"
    own = _source_file(verify)
    mine = [f for f in stack if own and os.path.abspath(f.filename) == own]
    if mine and mine[-1] is not stack[-1]:
        where += f", called from {mine[-1].filename}:{mine[-1].lineno} in {mine[-1].name}"
    return where
