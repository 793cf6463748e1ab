"""What every contract's reproduce snippet starts with: code that loads the implementation as the command line named
it (`batched`, `pkg.mod:attr`, `file.py:attr`, a built-in of any contract), and a call's provenance as report.json
recorded it. The snippets themselves are each contract's (chain/snippet.py, tree/snippet.py); report/ renders them.
"""

from __future__ import annotations

import os

from .passes import derive_seed


def load(record: dict, builtins: str) -> str:
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


def where_of(record: dict, where: dict, stream: str) -> tuple:
    scenario, seed, chunk, rows = where["scenario"], where["seed"], where["chunk"], where["rows"]
    generator_seed = where.get("generator_seed", derive_seed(stream, seed, scenario, chunk))
    dtype = where.get("dtype", record["adapter"]["dtype"])
    device = where.get("device", record["adapter"]["device"])
    row = where.get("row")
    return scenario, seed, chunk, rows, generator_seed, dtype, device, row


__all__ = ["load", "where_of"]
