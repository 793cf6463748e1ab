"""The contracts a subject is checked under, and which one it is, decided in this one place.

    contract_of(subject)      -> "chain" | "tree" | "pipeline"
    contract(name or subject) -> its Contract: what `run` needs to check a subject of that contract
    scenario_names(adapter)   -> (the scenarios its capabilities allow, every scenario of its contract)

One run (runner.py) serves every contract: the sizing, the probe, the passes, the hang-safe caller,
reproducibility, coupling, Holm, the rule diagnosis, shards and merge are written once. A Contract says only what
differs: how to wrap an adapter, which scenarios apply, how a call's inputs are built and its output read back
(`form`, callform.CallForm), what a scenario's tally counts and tests, its run-level checks and its rare-edge
probe. The chain kernel's contract is contract_chain.py; the tree verifier's tree/contract.py; the whole
pipeline's pipeline.py. This module imports neither (the CLI's `--list` stays free of torch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

CHAIN, TREE, PIPELINE = "chain", "tree", "pipeline"


def contract_of(subject) -> str:
    """A tree adapter (TreeAdapter, or any object declaring kind='tree'), a whole pipeline (kind='pipeline'), else
    a chain kernel (a verify function, an Adapter, an object with verify)."""
    kind = getattr(subject, "kind", None)
    if kind == TREE:
        return TREE
    if kind == PIPELINE:
        return PIPELINE
    return CHAIN


class Contract(Protocol):
    """What a run needs to know about one contract. The chain kernel's is contract_chain.py (read it first), the
    tree verifier's tree/contract.py, the whole pipeline's pipeline.py.

    name          "chain" | "tree" | "pipeline"
    seed_key      a call's generator seed is passes.derive_seed(seed_key, run seed, scenario, chunk)
    form          callform.CallForm: how a call's arguments are built and its output read (in the worker)
    shardable     whether a run can be cut into shards (shards.py) and merged
    call_mode     None (calls.call_mode decides) or the mode its calls must run in ("thread")
    get(name)                                 -> one scenario of the catalogue
    wrap(subject, name)                       -> the adapter, with its declared capabilities
    catalogue()                               -> {name: scenario} of every scenario of the contract
    scenarios(adapter)                        -> the scenarios its capabilities allow, as its dtype gives them
    plan(adapter, scenario)                   -> plan.Plan: tested, certain and skipped check kinds (before data)
    tally(adapter, scenario, seed)            -> the scenario's tally: add(batch, out, seen, where) -> [B] rows
                                                 passing T0; t0_results, t2_results, certain_results; counts()
    inputs(adapter, scenario, rows, seed, chunk, start_states) -> one call's batch
    tokens(out)                               -> the emitted tokens [B, width] of a call's output
    max_rows(scenario)                        -> rows past which a scenario's checks gain little (sized by time)
    run_checks(caller, plan, seed, stopped)   -> (results, not run): reproducibility, coupling (run_checks.py)
    edge_probe(caller, seed)                  -> edge_probe.EdgeProbe or None (the forced rare-edge probe)
    describe(adapter, scenario, tally, failure) -> the contract's own keys of the report's scenario summary
    plots(tally)                              -> whether the report plots the scenario's laws
    rule_diagnosis(adapter, tallies, alpha)   -> which other rule the counts fit (diagnosis.py)
    draw(report, paths)                       -> its own pictures next to report.md (beyond the laws' plots)
    adapter_from_record(record)               -> the adapter as a report.json recorded it (merge never calls it)
    """

    name: str
    seed_key: str
    shardable: bool
    call_mode: str | None


@dataclass(frozen=True)
class _Contracts:
    """The contracts by name, built on first use (the tree's and the pipeline's import their own modules)."""

    def __getitem__(self, name: str) -> Contract:
        if name == CHAIN:
            from .contract_chain import CHAIN_CONTRACT

            return CHAIN_CONTRACT
        if name == TREE:
            from .tree.contract import TREE_CONTRACT

            return TREE_CONTRACT
        if name == PIPELINE:
            from .pipeline import PIPELINE_CONTRACT

            return PIPELINE_CONTRACT
        raise ValueError(f"contract={name!r} must be one of {(CHAIN, TREE, PIPELINE)}")


CONTRACTS = _Contracts()


def contract(subject) -> Contract:
    """The Contract of a subject (any object `contract_of` reads) or of a contract's name."""
    return CONTRACTS[subject if isinstance(subject, str) else contract_of(subject)]


def scenario_names(adapter) -> tuple[list[str], list[str]]:
    """(the scenario names the adapter's contract and capabilities allow, every scenario name of its contract)."""
    c = contract(adapter)
    return [s.name for s in c.scenarios(adapter)], list(c.catalogue())


__all__ = ["CHAIN", "CONTRACTS", "PIPELINE", "TREE", "Contract", "contract", "contract_of", "scenario_names"]
