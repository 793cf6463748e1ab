"""The tree contract's reproduce snippet: Python that rebuilds the call a failure came from (its scenario, chunk,
rows, dtype, device and drafting scheme), for report.md. The joint scenarios feed each call the states the last one
reached, which are not recorded: they get none."""

from __future__ import annotations

from ..engine.snippets import load, where_of
from .scenarios import SCENARIOS


def snippet(record: dict, where: dict, details: dict) -> str | None:
    scenario = SCENARIOS.get(where.get("scenario"))
    if scenario is None or scenario.joint:
        return None
    return _tree(record, where)


def _tree(record: dict, where: dict) -> str:
    scenario, seed, chunk, rows, generator_seed, dtype, device, row = where_of(record, where, "tree-generator")
    nodes = bool(record["adapter"].get("nodes"))
    pick = f"[{row}]" if row is not None else "[:8]"
    show = f"print(out{pick}, batch.draft_tokens{pick}, batch.parents{pick})"
    if nodes:
        show = f"tokens, nodes = out\nprint(tokens{pick}, nodes{pick}, batch.draft_tokens{pick}, batch.parents{pick})"
    return "\n".join(
        [
            "import torch",
            "from specref.conformance.tree.contract import tree_call_inputs",
            "from specref.conformance.tree.scenarios import get",
            load(record, "specref.conformance.tree:builtin_tree_adapters"),
            f"batch = get({scenario!r}).given({dtype}).inputs(rows={rows}, seed={seed}, chunk={chunk!r}, "
            f"scheme={record['adapter']['scheme']!r})",
            "# the arguments exactly as the harness built them: dtype cast, device, generator seeded per call",
            f"args, kwargs = tree_call_inputs(batch, {generator_seed}, dtype={dtype}, device={device!r}, "
            f"nodes={nodes})",
            "out = verify(*args, **kwargs)",
            show,
        ]
    )
