"""The chain kernel's contract (contracts.Contract): the verify contract of one drafted chain per row.

    verify(target_probs [B, g+1, V], draft_probs [B, g, V], draft_tokens [B, g], generator, **capabilities)
        -> tokens [B, g+1] int64, -1 padded

Scenarios: scenarios.py (the rows, as the adapter's dtype gives them). Checks: the chain kinds (kinds.py), counted
by checks.Tally and planned by plan.plan_for. Run-level checks: run_checks.py (reproducibility; coupling with the
reference engine when the adapter accepts injected uniforms). Rare edges: the forced probe (edge_probe.py).
"""

from __future__ import annotations

import dataclasses

import torch

from . import callform
from .adapters import Adapter, as_adapter
from .checks import Tally
from .contracts import CHAIN
from .diagnosis import rule_diagnosis
from .edge_probe import edge_probe
from .laws import check_rule
from .passes import MAX_ROWS
from .plan import Plan, plan_for
from .report import PLOT_MAX_VOCAB
from .run_checks import chain_coupling, run_checks
from .run_plan import scenarios_for
from .scenarios import SCENARIOS, Scenario, get, probe_rows_needed


class ChainContract:
    name = CHAIN
    seed_key = "generator"
    form = callform.CHAIN
    shardable = True
    call_mode = None  # calls.call_mode decides: a forked worker for CPU adapters

    def wrap(self, subject, name: str | None = None) -> Adapter:
        adapter = as_adapter(subject, name)
        check_rule(adapter.rule)
        return adapter

    def catalogue(self) -> dict[str, Scenario]:
        return SCENARIOS

    def get(self, name: str) -> Scenario:
        return get(name)

    def scenarios(self, adapter: Adapter) -> list[Scenario]:
        return scenarios_for(adapter)

    def plan(self, adapter: Adapter, scenario: Scenario) -> Plan:
        return plan_for(scenario, adapter.rule)

    def tally(self, adapter: Adapter, scenario: Scenario, seed: int) -> Tally:
        return Tally(scenario, seed=seed, rule=adapter.rule)

    def inputs(self, adapter: Adapter, scenario: Scenario, rows: int, seed: int, chunk, start_states=None):
        return scenario.inputs(rows, seed, chunk, start_states=start_states)

    def tokens(self, out):
        return out

    def max_rows(self, scenario: Scenario) -> int:
        return probe_rows_needed() if scenario.probe else MAX_ROWS.get(scenario.name, MAX_ROWS["default"])

    def run_checks(self, caller, plan, seed: int, stopped: str | None) -> tuple[list, list]:
        adapter = caller.adapter
        # the reference engine implements the exact rule, in specref's uniforms convention
        coupled = adapter.uniforms and adapter.coupled and adapter.rule == "exact"
        return run_checks(caller, SCENARIOS["cf_dense_g4"].given(adapter.dtype), coupled, chain_coupling, seed,
                          stopped)  # fmt: skip

    def edge_probe(self, caller, seed: int):
        return edge_probe(caller, seed, lambda: None)  # None: the hang limit of the call (hangs.py)

    def describe(self, adapter: Adapter, scenario: Scenario, tally: Tally, failure) -> dict:
        return {"features": scenario.features, "gamma": scenario.gamma}

    def plots(self, tally: Tally) -> bool:
        # identical rows share one fixed draft, so their token laws are not p: nothing to plot against p
        return tally.scenario.vocab_size <= PLOT_MAX_VOCAB and not tally.scenario.identical_rows

    def rule_diagnosis(self, adapter: Adapter, tallies: dict, alpha: float) -> dict:
        return rule_diagnosis(tallies, adapter.rule, alpha)

    def draw(self, report, paths: dict) -> None:
        """Pictures beyond the laws' plots (render.py draws those): none for chains."""

    def adapter_from_record(self, record: dict) -> Adapter:
        return adapter_from_record(Adapter, record)


def adapter_from_record(cls, record: dict):
    """An adapter of class `cls` declared as a report.json recorded it; its verify is never called (merge)."""
    a = record["adapter"]
    names = {f.name for f in dataclasses.fields(cls)} - {"name", "verify", "dtype", "uniform_dtype"}
    uniform_dtype = a.get("uniform_dtype")
    return cls(record["impl"], verify=_never_called, dtype=getattr(torch, a["dtype"].removeprefix("torch.")),
               uniform_dtype=getattr(torch, uniform_dtype.removeprefix("torch.")) if uniform_dtype else None,
               **{k: v for k, v in a.items() if k in names})  # fmt: skip


def _never_called(*args, **kwargs):
    raise RuntimeError("a merged report never calls the implementation")


CHAIN_CONTRACT = ChainContract()
