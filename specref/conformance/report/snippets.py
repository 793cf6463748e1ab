"""Reproduce snippets: Python that rebuilds the very call a failure came from, for report.md, written by the
failure's contract (chain/snippet.py, tree/snippet.py; a pipeline has none)."""

from __future__ import annotations

from ..contracts import contract
from ..engine.snippets import load


def snippet(record: dict, where: dict, details: dict) -> str | None:
    """The snippet for a failure at `where` (a call or a row of report.json), or None where no single call fits."""
    return contract(record.get("contract") or _contract_of(record)).snippet(record, where, details)


def _contract_of(record: dict) -> str:
    """The contract of a report.json from before it was recorded: by the adapter's declared kind."""
    return {"tree": "tree", "pipeline": "pipeline"}.get(record["adapter"].get("kind"), "chain")


__all__ = ["load", "snippet"]
