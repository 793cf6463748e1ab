"""The chain kernel's contract: the verify contract of one drafted chain per row (engine/contract.Contract).

    verify(target_probs [B, g+1, V], draft_probs [B, g, V], draft_tokens [B, g], generator, **capabilities)
        -> tokens [B, g+1] int64, -1 padded

Scenarios: scenarios.py (the rows, as the adapter's dtype gives them). Checks: the chain kinds (kinds.py), counted
by tally.Tally and planned by plan.plan_for. Run-level checks: reproducibility (engine/run_checks.py) and coupling
with the reference engine when the adapter accepts injected uniforms (coupling.py). Rare edges: the forced probe
(edges/probe.py) on probe.py's rows, and the statistical probe scenario (scenarios.PROBE).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from ..edges.probe import edge_probe
from ..engine.check_words import detection_words
from ..engine.contract import Contract
from ..engine.plan import Plan
from ..engine.registry import CHAIN
from ..engine.run_checks import run_checks
from . import laws, snippet, tau
from .adapters import REFERENCES, Adapter, as_adapter
from .coupling import chain_coupling
from .demand import demands
from .diagnosis import rule_diagnosis
from .form import CHAIN as FORM
from .kinds import DECLARED as _DECLARED  # noqa: F401 -- the chain's check kinds
from .laws import check_rule
from .lossy import lossy_measure
from .plan import plan_for, scenarios_for
from .probe import DESIGN
from .scenarios import (
    SCENARIOS,
    Scenario,
    get,
    probe_detection,
    probe_event_probability,
    probe_event_words,
    probe_rows_needed,  # fmt: skip
)
from .tally import Tally

#: Rows past which a scenario's checks gain little (TV detectable ~0.005 on small vocabularies).
MAX_ROWS = {"default": 400_000, "large_v8193_g2": 200_000, "large_v151936_g1": 20_000}
#: Scenarios with larger vocabularies are not plotted.
PLOT_MAX_VOCAB = 64


class ChainContract(Contract):
    name = CHAIN
    seed_key = "generator"
    form = FORM

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

    def max_rows(self, scenario: Scenario) -> int:
        return probe_rows_needed() if scenario.probe else MAX_ROWS.get(scenario.name, MAX_ROWS["default"])

    def probe_rows_needed(self, power: float) -> int:
        return probe_rows_needed(power)

    def demands(self, adapter: Adapter, scenario: Scenario, checks, alphas: dict[str, float]) -> list:
        return demands(scenario, adapter.rule, checks.tested, alphas)

    def run_checks(self, caller, plan, seed: int, stopped: str | None) -> tuple[list, list]:
        adapter = caller.adapter
        # the rules with a reference engine in specref's uniforms convention (adapters.REFERENCES)
        coupled = adapter.uniforms and adapter.coupled and adapter.rule in REFERENCES
        return run_checks(caller, SCENARIOS["cf_dense_g4"].given(adapter.dtype), coupled, chain_coupling, seed,
                          stopped)  # fmt: skip

    def edge_probe(self, caller, seed: int, timeout=lambda: None):
        return edge_probe(caller, seed, timeout, DESIGN)  # None: the hang limit of the call (hangs.py)

    def probe_summary(self, scenario: Scenario, tally: Tally, adapter: Adapter) -> dict:
        return probe_summary(scenario, tally, adapter)

    def describe(self, adapter: Adapter, scenario: Scenario, tally: Tally, failure) -> dict:
        record = {"features": scenario.features, "gamma": scenario.gamma}
        derived = tau.estimate(scenario, tally, adapter.rule)
        return {**record, "tau": derived} if derived else record

    def plot_series(self, tally: Tally) -> dict | None:
        # identical rows share one fixed draft, so their token laws are not p: nothing to plot against p
        if tally.scenario.vocab_size > PLOT_MAX_VOCAB or tally.scenario.identical_rows:
            return None
        return plot_series(tally)

    def tokens(self, out):
        return out[0] if isinstance(out, tuple) else out  # an adaptive verifier's (tokens, used): form.py

    def rule_diagnosis(self, adapter: Adapter, tallies: dict, alpha: float) -> dict:
        return rule_diagnosis(tallies, adapter.rule, alpha)

    def lossy_measure(self, adapter: Adapter, tallies: dict, alpha: float) -> dict:
        return lossy_measure(tallies, alpha)

    def adapter_from_record(self, record: dict) -> Adapter:
        return adapter_from_record(Adapter, record)

    def snippet(self, record: dict, where: dict, details: dict) -> str | None:
        return snippet.snippet(record, where, details)


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


def probe_summary(s: Scenario, tally: Tally, adapter: Adapter) -> dict:
    """The statistical probe's tests and detection probability, at the event probability of the adapter's device and
    uniform dtype (scenarios.probe_event_probability): None where none is stated (float64: 2^-53, never in practice)."""
    tests = tally.rows  # one accept test with p/q = 0 and one correction draw per row
    dtype = getattr(adapter, "uniform_dtype", None)
    event = probe_event_probability(adapter.device, dtype or torch.float32)
    detection = None if event is None else probe_detection(tests, event)
    summary = {
        "scenario": s.name,
        "accept_tests_with_ratio_0": tests,
        "event_probability": event,
        "detection_probability": detection,
        "event": probe_event_words(adapter.device, dtype),
        "catches": "a non-strict accept test u <= p/q on fp32 uniforms (it accepts a draft of target probability 0), "
        "and an inverse-CDF correction that returns token 0 at u = 0",
        "target_rows": None if event is None else probe_rows_needed(event=event),
    }
    summary["detection_words"] = detection_words(summary)
    return summary


def plot_series(tally) -> dict:
    sc = tally.scenario
    series: dict = {}
    first = tally.first.sum(0)
    if first.sum():
        series["first"] = {"observed": first.tolist(), "expected": (sc.target.T @ tally.first.sum(1)).tolist()}
    length = tally.length[:, sc.gamma, :]
    if length.sum():
        expected = sum(length[s].sum() * laws.length_law(sc, s, sc.gamma, tally.rule) for s in range(length.shape[0]))
        series["length"] = {"observed": length.sum(0).tolist(), "expected": np.asarray(expected).tolist()}
    if sc.context_free and tally.reached.sum() and tally.rule in laws.MEMORYLESS:  # one Z at every position
        series["reject"] = {
            "rejected": tally.rejected.tolist(),
            "reached": tally.reached.tolist(),
            "z": float(laws.rejection_mass(sc, tally.rule)[0]),
        }
    return series


CONTRACT = ChainContract()
#: The name earlier releases exported.
CHAIN_CONTRACT = CONTRACT

__all__ = ["CHAIN_CONTRACT", "CONTRACT", "ChainContract", "adapter_from_record"]
