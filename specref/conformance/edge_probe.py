"""The forced rare-edge probe from the outside: its batches as snippets rebuild them, and the probe alone on
built-ins (`python -m specref.conformance.edge_probe NAME...`; `.ci/gpu-check` runs it on the CUDA engines).
The probe itself is edges/probe.py; its rows are chain/probe.py's (and the tree contract's as one-node trees).
"""

from __future__ import annotations

import json
import sys

import torch

from .chain.probe import probe_batch as chain_probe_batch
from .contracts import contract
from .edges.probe import ROWS
from .engine.calls import Caller
from .tree.scenarios import from_chain


def probe_batch(name: str, dtype: torch.dtype, rows: int = ROWS, seed: int = 0, *, tree: bool = False):
    """The edge probe's batch `name` ('accept' or 'bonus') as a `dtype` verifier is given it; tree=True: the same
    rows as one-node trees (tree/scenarios.TreeBatch, N = 1: the single child is the chain's draft)."""
    batch = chain_probe_batch(name, dtype, rows, seed)
    return from_chain(batch) if tree else batch


def main(argv: list[str] | None = None) -> int:
    """The edge probe alone on built-in adapters, chain or tree; prints each one's findings; exit 0 (findings are
    reports, not failures), 2 for an unknown name."""
    from .chain.adapters import builtin_adapters
    from .tree.adapters import builtin_tree_adapters

    known = {**builtin_adapters(), **builtin_tree_adapters()}
    for name in sys.argv[1:] if argv is None else argv:
        if name not in known:
            print(f"edge probe: unknown built-in {name!r}; known: {', '.join(known)}", file=sys.stderr)
            return 2
        adapter = known[name]()
        under = contract(adapter)
        with Caller(adapter, under) as caller:
            probe = under.edge_probe(caller, 0, timeout=lambda: 120.0)
        verdicts = {r.name: r.status for r in probe.results}
        print(json.dumps({"impl": name, "checks": verdicts, **probe.summary}, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
