"""The chain contract's reproduce snippet: Python that rebuilds the very call a failure came from, for report.md.

It rebuilds the batch the harness sent (its scenario, chunk, rows, dtype and device) and calls the implementation
with the harness's generator seed. Laws over chained calls (the joint scenarios) are not one call, so they get none
unless the call's start states were recorded.
"""

from __future__ import annotations

from ..engine.snippets import load, where_of
from .scenarios import SCENARIOS


def snippet(record: dict, where: dict, details: dict) -> str | None:
    """The snippet for a failure at `where` (a call or a row of report.json), or None where no single call fits."""
    if where.get("scenario") not in SCENARIOS:  # the catalogue's: `get(name)` rebuilds them
        return None
    if SCENARIOS[where["scenario"]].joint and (
        details.get("tier") == "T2" or "generator_seed" not in where or where.get("start_states", 0) is None
    ):
        return None  # a law over chained calls, or a call whose start states were not recorded
    return _chain(record, where)


def _chain(record: dict, where: dict) -> str:
    scenario, seed, chunk, rows, generator_seed, dtype, device, row = where_of(record, where, "generator")
    ragged = bool(record["adapter"].get("ragged"))
    states = where.get("start_states")
    start = "" if states is None else f", start_states=np.array({states})"
    show = f"print(tokens[{row}], batch.draft_tokens[{row}])" if row is not None else "print(tokens[:8])"
    return "\n".join(
        [
            "import numpy as np, torch" if states is not None else "import torch",
            "from specref.conformance.chain.form import call_inputs",
            "from specref.conformance.chain.scenarios import get",
            load(record, "specref.conformance:builtin_adapters"),
            f"batch = get({scenario!r}).given({dtype}).inputs(rows={rows}, seed={seed}, chunk={chunk!r}{start})",
            "# the arguments exactly as the harness built them: dtype cast, device, generator seeded per call",
            f"args, kwargs = call_inputs(batch, {generator_seed}, dtype={dtype}, device={device!r}, ragged={ragged})",
            "tokens = verify(*args, **kwargs)",
            show,
        ]
    )
