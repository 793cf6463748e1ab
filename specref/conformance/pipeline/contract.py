"""The whole pipeline's contract (engine/contract.Contract): prompts in, n-token continuations out, checked against the
target's exact continuation law after its logits processors (specref.hf).

    pipeline.generate(prompts [B, T] int64, n_new, seed: int) -> continuations [B, n_new] int64
    pipeline.law_array(prompt, n_new) -> [V] * n_new, the exact law        (specref.hf.pipelines.PipelineAdapter)

A scenario is one prompt (the pipeline's first suggested one: row-loop pipelines need every sample), its rows the
prompt repeated; each call gets an int seed derived like every contract's generator seeds. Checks: the call
(adapter), every token an id in [0, V) (t0_valid_ids), and a Pearson chi-square of the V^n continuations
(joint_law; an impossible continuation that shows up fails outright). Pipelines own their engines' seeding, so
they get no reproducibility check and no coupling; their runs are not sharded (merge would need the law, which only
the pipeline computes). The forced rare-edge probe cannot reach them either, and their reports say why (NOT_SHOWN):
the probe shows `u <= p/q` by giving every accept test a draft of target probability 0 and a forced u = 0, and a
pipeline's drafts come from its own models. Even where the engine's RNG takes a forced state (transformers-generate
copies a CPU generator's state into torch's global RNG), a forced u = 0 meets such a draft only by chance: there,
1 to 2 calls in 30 draft one (measured over 4 prompts). The verification kernel a pipeline uses is probed on its
own (PipelineAdapter.kernel: `specref conform transformers`, `batched`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from ...stats import CheckResult
from ...stats.record import CheckId
from ..chain.adapters import Adapter
from ..edges.probe import not_shown
from ..engine import registry
from ..engine.callform import CallForm, as_numpy
from ..engine.calls import AdapterFailure
from ..engine.contract import Contract
from ..engine.counts import Counts
from ..engine.plan import Plan
from ..engine.registry import PIPELINE, TEST
from ..engine.results import t0_result
from . import requests
from .kinds import DECLARED as _DECLARED  # noqa: F401 -- the pipeline forms of its check kinds

#: Why the forced rare-edge probe cannot reach a pipeline (module docstring).
NOT_SHOWN = ("a whole pipeline drafts from its own models, so the probe cannot give an accept test a draft of target "
             "probability 0 on purpose, and a forced u = 0 would show the edge only by chance")  # fmt: skip
#: Tokens of each continuation.
N_NEW = 3
#: Rows (continuations) past which the law check gains little, and rows per call.
MAX_ROWS, ROWS_PER_CALL = 40_000, 8192


@dataclass
class PipelineRun(Adapter):
    """A pipeline as the harness runs it: verify is its generate; `pipeline` gives the prompts and the exact law."""

    kind: str = PIPELINE
    pipeline: object = None


@dataclass
class PromptBatch:
    prompts: np.ndarray  # [B, T] int64
    seeds: list | None = field(default=None)  # request calls (requests.py): per-row seeds; None here is unseeded
    request: bool = False  # a request call: `seeds` replaces the call's generator seed
    target_probs = None  # a pipeline computes its own probabilities
    draft_probs = None

    def __len__(self) -> int:  # the rows B a call carries (the engine's Batch)
        return len(self.prompts)


@dataclass
class PromptScenario:
    name: str
    prompt: tuple[int, ...]
    law: np.ndarray  # [V] * N_NEW: the target's exact law of the continuations
    rows_per_call: int = ROWS_PER_CALL
    joint, probe, identical_rows = False, False, False
    starts = np.zeros(1, dtype=np.int64)

    @property
    def description(self) -> str:
        return f"continuations of prompt {list(self.prompt)}"

    @property
    def vocab_size(self) -> int:
        return self.law.shape[0]

    @property
    def row_elements(self) -> int:
        return N_NEW * self.vocab_size

    def given(self, dtype) -> PromptScenario:
        return self

    def inputs(self, rows: int, seed: int, chunk, start_states=None) -> PromptBatch:
        return PromptBatch(np.tile(np.asarray(self.prompt, dtype=np.int64), (rows, 1)))


@dataclass
class PipelineTally(Counts):
    CONTRACT = PIPELINE

    scenario: PromptScenario
    rows: int = 0
    seconds: float = 0.0
    violations: dict = field(default_factory=lambda: {"t0_valid_ids": 0})
    examples: dict = field(default_factory=dict)

    def __post_init__(self):
        self.continuations = np.zeros(self.scenario.vocab_size**N_NEW, dtype=np.int64)  # [V^n], first token major

    def add(self, batch: PromptBatch, out: np.ndarray, seen, where: dict) -> np.ndarray:
        self.rows += len(out)
        v = self.scenario.vocab_size
        good = ((out >= 0) & (out < v)).all(1)
        if not good.all():
            self.violations["t0_valid_ids"] += int((~good).sum())
            row = int(np.flatnonzero(~good)[0])
            self.examples.setdefault("t0_valid_ids", {**where, "row": row, "output": out[row].tolist()})
        np.add.at(self.continuations, np.ravel_multi_index(out[good].T, (v,) * N_NEW), 1)
        return good

    def t0_kinds(self) -> tuple[str, ...]:
        return ("t0_valid_ids",)

    def t0_results(self) -> list[CheckResult]:
        return [t0_result("t0_valid_ids", self.violations["t0_valid_ids"], self.rows,
                          {"example": self.examples.get("t0_valid_ids")})]  # fmt: skip

    def certain_results(self, kinds: list[str]) -> list[CheckResult]:
        return []

    def t2_results(self, alphas: dict[str, float]) -> list[CheckResult]:
        name = self.scenario.name
        forms = {kind: registry.get(kind).forms[PIPELINE] for kind in alphas}  # a request kind: run_checks computes it
        return [forms[kind].evaluate(self, alpha, "exact", str(CheckId(kind, name)))
                for kind, alpha in alphas.items() if forms[kind].evaluate is not None]  # fmt: skip


# --- the call ------------------------------------------------------------------------------------------------------


def _fields(batch: PromptBatch, declared: dict) -> dict:
    return {"tokens": batch.prompts, **({"request_seeds": batch.seeds} if batch.request else {})}


def _arguments(job: dict, target, draft, generator) -> tuple[tuple, dict]:
    seed = job["request_seeds"] if "request_seeds" in job else job["generator_seed"]
    return (torch.from_numpy(job["tokens"].copy()), N_NEW, seed), {}


def _read(out, job: dict) -> np.ndarray:
    rows = len(job["tokens"])
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (rows, N_NEW):
        raise AdapterFailure("malformed", f"generate returned {type(out).__name__} of shape "
                             f"{tuple(getattr(out, 'shape', ()))}, expected [{rows}, {N_NEW}]")  # fmt: skip
    return as_numpy(out, "generate returned").astype(np.int64)


#: The pipeline's call: generate(prompts [B, T], n_new, seed) -> [B, n_new].
FORM = CallForm(_fields, _arguments, _read)


class PipelineContract(Contract):
    name = PIPELINE
    seed_key = "pipeline"
    form = FORM
    shardable = False
    call_mode = "thread"  # engines (vLLM, llama.cpp) hold threads and processes a fork would not carry

    def wrap(self, subject, name: str | None = None) -> PipelineRun:
        if isinstance(subject, PipelineRun):
            return subject
        return PipelineRun(name or subject.name, verify=subject.generate, notes=subject.description,
                           pipeline=subject)  # fmt: skip

    def catalogue(self) -> dict:
        return {}  # a pipeline's scenarios are its own prompts

    def get(self, name: str):
        raise ValueError(f"scenario={name!r}: a pipeline's scenarios are its prompts; none can be named")

    def scenarios(self, adapter: PipelineRun) -> list[PromptScenario]:
        pipeline = adapter.pipeline
        prompts = list(pipeline.suggested_prompts[:1]) or [(0,)]
        return [PromptScenario(f"prompt{i}", tuple(p), pipeline.law_array(p, N_NEW)) for i, p in enumerate(prompts)]

    def plan(self, adapter: PipelineRun, scenario: PromptScenario) -> Plan:
        tested = [k.name for k in registry.for_contract(PIPELINE, "T2") if k.forms[PIPELINE].evaluate is not None
                  and k.forms[PIPELINE].plan(scenario) == TEST]  # fmt: skip
        if scenario.name != requests.ON:
            return Plan(tested=tested)
        request_tested, _, skipped = requests.plan(adapter.pipeline)  # the request-level checks: first prompt only
        return Plan(tested=tested + request_tested, skipped=skipped)

    def run_checks(self, caller, plan, seed: int, stopped: str | None) -> tuple[list, list]:
        return requests.run_checks(caller, plan, seed, stopped, PromptBatch)

    def tally(self, adapter: PipelineRun, scenario: PromptScenario, seed: int) -> PipelineTally:
        return PipelineTally(scenario)

    def inputs(self, adapter, scenario: PromptScenario, rows: int, seed: int, chunk, start_states=None):
        return scenario.inputs(rows, seed, chunk)

    def max_rows(self, scenario: PromptScenario) -> int:
        return MAX_ROWS

    def edge_probe(self, caller, seed: int, timeout=None):
        kernel = getattr(caller.adapter.pipeline, "kernel", "")
        return not_shown(NOT_SHOWN + (f"; its verification kernel is probed on its own: specref conform {kernel}"
                                      if kernel else ""))  # fmt: skip

    def describe(self, adapter, scenario: PromptScenario, tally: PipelineTally, failure) -> dict:
        return {"gamma": None, "prompt": list(scenario.prompt)}

    def adapter_from_record(self, record: dict):
        raise ValueError("pipeline runs are not sharded, so they are never merged")


CONTRACT = PipelineContract()
#: The name earlier releases exported.
PIPELINE_CONTRACT = CONTRACT

__all__ = ["CONTRACT", "N_NEW", "NOT_SHOWN", "PIPELINE_CONTRACT", "PipelineContract", "PipelineRun"]
