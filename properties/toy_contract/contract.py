"""The toy sampler contract's bundle, its scenarios, its tally and its check kinds (see __init__.py)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np
import torch

from specref.conformance.chain.adapters import Adapter
from specref.conformance.engine import registry
from specref.conformance.engine.callform import CallForm
from specref.conformance.engine.calls import AdapterFailure
from specref.conformance.engine.contract import Contract
from specref.conformance.engine.counts import Counts
from specref.conformance.engine.plan import Plan
from specref.conformance.engine.precision import as_given
from specref.conformance.engine.results import t0_result
from specref.stats import chisquare_gof
from specref.stats.record import CheckId

NAME, KIND = "toy", "toy-sampler"


def _law(tally, alpha, rule, name):
    return chisquare_gof(tally.sampled, tally.scenario.probs, alpha=alpha, name=name)


if "toy_law" not in registry.kinds():  # declared once per process
    registry.declare(registry.CheckKind("toy_law", registry.LAW, "T2", "the sampled tokens follow the given law",
                                        statistic="Pearson X^2", bins="token"))  # fmt: skip
    registry.add_form("toy_law", NAME, registry.Form(lambda s: registry.TEST, _law, ("sampled",)))
    registry.add_form("t0_valid_ids", NAME, registry.Form(description="every token is an id in [0, V)"))


@dataclass
class Sampler(Adapter):
    kind: str = KIND


@dataclass
class Batch:
    target_probs: np.ndarray  # [B, V]
    draft_probs = None

    def __len__(self) -> int:
        return len(self.target_probs)


@dataclass(frozen=True)
class Scenario:
    name: str
    probs: np.ndarray  # [V]
    description: str = "a fixed law"
    rows_per_call: int = 1024
    joint: bool = False
    probe: bool = False

    @property
    def target(self) -> np.ndarray:  # the law it is given: a shard's plan fingerprint digests it
        return self.probs

    @property
    def vocab_size(self) -> int:
        return len(self.probs)

    @property
    def row_elements(self) -> int:
        return self.vocab_size

    def given(self, dtype: torch.dtype) -> Scenario:
        """As a `dtype` sampler is given it: the law rounded to dtype, summing to exactly 1 (engine/precision.py)."""
        return dataclasses.replace(self, probs=as_given(self.probs[None, :], dtype)[0])

    def inputs(self, rows: int) -> Batch:
        return Batch(np.broadcast_to(self.probs, (rows, self.vocab_size)).copy())


SCENARIOS = {
    "toy_dense": Scenario("toy_dense", np.array([0.1, 0.2, 0.3, 0.4])),
    "toy_sparse": Scenario("toy_sparse", np.array([0.5, 0.0, 0.25, 0.25, 0.0, 0.0])),
}


@dataclass
class Tally(Counts):
    CONTRACT = NAME
    scenario: Scenario = None
    rows: int = 0
    seconds: float = 0.0
    violations: dict = field(default_factory=lambda: {"t0_valid_ids": 0})
    examples: dict = field(default_factory=dict)

    def __post_init__(self):
        self.sampled = np.zeros(self.scenario.vocab_size, dtype=np.int64)

    def add(self, batch, out, seen, where):
        self.rows += len(out)
        good = (out[:, 0] >= 0) & (out[:, 0] < self.scenario.vocab_size)
        self.violations["t0_valid_ids"] += int((~good).sum())
        np.add.at(self.sampled, out[good, 0], 1)
        return good

    def t0_kinds(self):
        return ("t0_valid_ids",)

    def t0_results(self):
        return [t0_result("t0_valid_ids", self.violations["t0_valid_ids"], self.rows)]

    def certain_results(self, kinds):
        return []

    def t2_results(self, alphas):
        return [registry.get(kind).forms[NAME].evaluate(self, alpha, "exact", str(CheckId(kind, self.scenario.name)))
                for kind, alpha in alphas.items()]  # fmt: skip


def _fields(batch, declared):
    return {"rows": len(batch.target_probs)}


def _arguments(job, target, draft, generator):
    return (target, generator), {}


def _read(out, job):
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (job["rows"],) or out.dtype != torch.int64:
        raise AdapterFailure("malformed", f"returned {out!r:.60}, expected [B={job['rows']}] int64")
    return out.numpy().reshape(-1, 1).copy()


class ToyContract(Contract):
    name = NAME
    seed_key = "toy-generator"
    form = CallForm(_fields, _arguments, _read)

    def wrap(self, subject, name=None):
        return subject if isinstance(subject, Sampler) else Sampler(name or subject.__name__, subject)

    def catalogue(self):
        return SCENARIOS

    def scenarios(self, adapter):
        return [s.given(adapter.dtype) for s in SCENARIOS.values()]

    def plan(self, adapter, scenario):
        return Plan(tested=["toy_law"])

    def tally(self, adapter, scenario, seed):
        return Tally(scenario=scenario)

    def inputs(self, adapter, scenario, rows, seed, chunk, start_states=None):
        return scenario.inputs(rows)

    def adapter_from_record(self, record):
        a = record["adapter"]
        names = {f.name for f in dataclasses.fields(Sampler)} - {"name", "verify", "dtype", "uniform_dtype"}
        return Sampler(record["impl"], verify=None, **{k: v for k, v in a.items() if k in names})


CONTRACT = ToyContract()
