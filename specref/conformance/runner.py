"""`run(verify)`: check one implementation under the contract it declares, with stated error rates.

    report = specref.conformance.run(my_verify, seed=0, budget_seconds=300)
    assert report.passed, report.summary()

The contract is chosen here, once (contracts.py): a chain kernel (a verify function, an Adapter, or an object with
`verify`), a tree verifier (a TreeAdapter, or an object declaring kind='tree'), a whole pipeline (kind='pipeline').
The run itself is the engine's (engine/run.py), which knows no contract but the one it is handed.
"""

from __future__ import annotations

from collections.abc import Callable

from .contracts import contract as contract_for
from .engine.report import RESOLUTION_FLOOR, Report
from .engine.run import DEFAULT_BUDGET, MIN_CALL_TIMEOUT, run_contract


def run(
    verify,
    *,
    seed: int = 0,
    budget_seconds: float | None = None,
    alpha: float = 1e-3,
    name: str | None = None,
    scenarios: list | None = None,
    rows: int | dict[str, int] | None = None,
    progress: Callable[[str, float], None] | None = None,
    shard: tuple[int, int] | str | None = None,
    started: float | None = None,
    tv: float | None = None,
    resolution: float = RESOLUTION_FLOOR,
) -> Report:
    """Check one implementation under its contract.

    scenarios: names from the contract's catalogue or scenario objects (default: all the adapter's capabilities
    allow). budget_seconds: the run's time budget; default DEFAULT_BUDGET (300 s), or none at all when `rows` is
    given. rows: a fixed number of rows per scenario (or a dict scenario name -> rows) instead of sizing by time
    (reproducible N, as CI tests want). Every scenario gets its rows unless budget_seconds is also given; then the
    budget bounds the run, and a scenario it cut short is named in the report (Report.cut_short).
    started: the time.perf_counter() the budget counts from (default: now; the CLI gives its process's start).
    shard: (K, N) or "K/N": run only the K-th of N disjoint parts of the run (fixed rows needed) and return a
    ShardReport whose to_dict()["shard"] holds the counts; `shards.merge` sums N of them into the run's report.
    tv: size every scenario so that each check detects this distance at power 0.999 (the same N on every machine);
    resolution: law checks detecting no less than this are "uninformative at this N" (engine/run.run_contract).
    """
    return run_contract(contract_for(verify), verify, seed=seed, budget_seconds=budget_seconds, alpha=alpha,
                        name=name, scenarios=scenarios, rows=rows, progress=progress, shard=shard,
                        started=started, tv=tv, resolution=resolution)  # fmt: skip


__all__ = ["DEFAULT_BUDGET", "MIN_CALL_TIMEOUT", "Report", "run"]
