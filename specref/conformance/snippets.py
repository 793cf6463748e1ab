"""Reproduce snippets: Python that rebuilds the very call a failure came from, for report.md.

A snippet loads the implementation as the command line named it (`batched`, `pkg.mod:attr`, `file.py:attr`, a
tree built-in), rebuilds the batch the harness sent (its scenario, chunk, rows, dtype, device and, for trees, the
drafting scheme) and calls it with the harness's generator seed. Laws over chained calls (the joint scenarios) are
not one call, so they get none unless the call's start states were recorded.
"""

from __future__ import annotations

import os


def snippet(record: dict, where: dict, details: dict) -> str | None:
    """The snippet for a failure at `where` (a call or a row of report.json), or None where no single call fits."""
    kind = record["adapter"].get("kind")
    if kind == "tree":
        from .tree.scenarios import SCENARIOS as TREE_SCENARIOS

        scenario = TREE_SCENARIOS.get(where.get("scenario"))
        if scenario is None or scenario.joint:
            return None  # the joint loop feeds each call the states the last one reached; they are not recorded
        return _tree(record, where)
    from .scenarios import SCENARIOS

    if kind != "kernel" or where.get("scenario") not in SCENARIOS:  # the catalogue's: `get(name)` rebuilds them
        return None
    if SCENARIOS[where["scenario"]].joint and (
        details.get("tier") == "T2" or "generator_seed" not in where or where.get("start_states", 0) is None
    ):
        return None  # a law over chained calls, or a call whose start states were not recorded
    return _chain(record, where)


def absolute_spec(spec: str) -> str:
    """`file.py:attr` with the file's absolute path (other specs as they are): what a report records, so that its
    snippets run from any folder."""
    module, sep, attr = spec.rpartition(":")
    return f"{os.path.abspath(module)}:{attr}" if sep and module.endswith(".py") else spec


def _load(record: dict, builtins: str) -> str:
    """Code that binds `verify` to the implementation named by the record's spec (`builtins`: module:function)."""
    spec = record.get("spec") or record["impl"]
    if ":" not in spec:
        module, function = builtins.split(":")
        return f"from {module} import {function}\nverify = {function}()[{spec!r}]().verify"
    module, attr = spec.rsplit(":", 1)
    if module.endswith(".py"):
        module = os.path.abspath(module)  # the snippet runs from any folder (absolute_spec records it so)
        folder = os.path.dirname(module)  # its sibling modules importable, as under the CLI
        load = (f"import runpy, sys\nsys.path.insert(0, {folder!r})\n"
                f"verify = runpy.run_path({module!r})[{attr.split('.')[0]!r}]"
                + "".join(f".{part}" for part in attr.split(".")[1:]))  # fmt: skip
    else:
        load = f"from {module} import {attr.split('.')[0]} as verify" + (
            "" if "." not in attr else f"\nverify = verify.{attr.split('.', 1)[1]}"
        )
    return load + "\nverify = getattr(verify, 'verify', verify)"


def _where(record: dict, where: dict, stream: str) -> tuple:
    from .runner import derive_seed  # the runner's stable per-call generator seed

    scenario, seed, chunk, rows = where["scenario"], where["seed"], where["chunk"], where["rows"]
    generator_seed = where.get("generator_seed", derive_seed(stream, seed, scenario, chunk))
    dtype = where.get("dtype", record["adapter"]["dtype"])
    device = where.get("device", record["adapter"]["device"])
    row = where.get("row")
    return scenario, seed, chunk, rows, generator_seed, dtype, device, row


def _chain(record: dict, where: dict) -> str:
    scenario, seed, chunk, rows, generator_seed, dtype, device, row = _where(record, where, "generator")
    ragged = bool(record["adapter"].get("ragged"))
    states = where.get("start_states")
    start = "" if states is None else f", start_states=np.array({states})"
    show = f"print(tokens[{row}], batch.draft_tokens[{row}])" if row is not None else "print(tokens[:8])"
    return "\n".join(
        [
            "import numpy as np, torch" if states is not None else "import torch",
            "from specref.conformance.callform import call_inputs",
            "from specref.conformance.scenarios import get",
            _load(record, "specref.conformance:builtin_adapters"),
            f"batch = get({scenario!r}).given({dtype}).inputs(rows={rows}, seed={seed}, chunk={chunk!r}{start})",
            "# the arguments exactly as the harness built them: dtype cast, device, generator seeded per call",
            f"args, kwargs = call_inputs(batch, {generator_seed}, dtype={dtype}, device={device!r}, ragged={ragged})",
            "tokens = verify(*args, **kwargs)",
            show,
        ]
    )


def _tree(record: dict, where: dict) -> str:
    scenario, seed, chunk, rows, generator_seed, dtype, device, row = _where(record, where, "tree-generator")
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
            _load(record, "specref.conformance.tree:builtin_tree_adapters"),
            f"batch = get({scenario!r}).given({dtype}).inputs(rows={rows}, seed={seed}, chunk={chunk!r}, "
            f"scheme={record['adapter']['scheme']!r})",
            "# the arguments exactly as the harness built them: dtype cast, device, generator seeded per call",
            f"args, kwargs = tree_call_inputs(batch, {generator_seed}, dtype={dtype}, device={device!r}, "
            f"nodes={nodes})",
            "out = verify(*args, **kwargs)",
            show,
        ]
    )
