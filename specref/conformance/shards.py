"""Shards: one run split into N disjoint parts, run anywhere, merged exactly (engine/shards.py does the work).

    specref conform IMPL --rows 100000 --shard 0/3 --report out/shard-0     # ... 1/3, 2/3, on any scheduler
    specref merge out/shard-0 out/shard-1 out/shard-2 --out out/merged

merge() reads each shard's report.json and rebuilds the run's checks under the contract the shards name.
"""

from __future__ import annotations

from ..errors import MergeError
from .contracts import contract
from .engine.report import Report
from .engine.shards import PARTIAL, Shard, ShardReport, check_shards, fixed_rows, load
from .engine.shards import merge_records as _merge_records


def merge_records(records: list[tuple[str, dict]]) -> tuple[Report, str | None]:
    """(the merged Report, the IMPL spec the shards were run with) from (label, report.json record) pairs."""
    return _merge_records(records, contract)


def merge(folders: list[str]) -> tuple[Report, str | None]:
    """(the merged Report, the IMPL spec the shards were run with) from shard folders."""
    return merge_records(load(folders))


__all__ = ["PARTIAL", "MergeError", "Shard", "ShardReport", "check_shards", "fixed_rows", "load", "merge",
           "merge_records"]  # fmt: skip
