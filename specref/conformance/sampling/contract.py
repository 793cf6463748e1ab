"""The sampling contract (engine/contract.Contract): what engines really take -- raw target logits, the draft's
probabilities, the drafts and per-row sampling parameters with each row's history -- and the law they must keep,
their own non-speculative sampler's at every position: the processed target law.

    verify(target_logits [B, g+1, V], draft_probs [B, g, V] | None, draft_tokens [B, g], params, histories,
           generator, [uniforms=]) -> tokens [B, g+1] int64 | (tokens, logprobs [B, g+1])

The law comes from the adapter (adapters.py): a reference chain it declares (specref.reference.processors) or its
engine's own sampler (`law`). Bound to it, each scenario is a chain problem per row (scenarios.py): the processed
target rows and the draft rows, on which the chain's law checks run unchanged (kinds.py), beside the contract's own:
greedy rows at the processed argmax, logprobs of the declared law, penalties that count this step's drafts.
Run-level checks: reproducibility, and coupling with the reference sampling verifier where the adapter takes
injected uniforms (coupling.py). The forced rare-edge probe is the chain contract's (the kernel under the
processors); sampling runs are not sharded.
"""

from __future__ import annotations

from ..chain import tau
from ..edges.probe import not_shown
from ..engine.contract import Contract
from ..engine.plan import Plan, plan_of
from ..engine.run_checks import run_checks
from .adapters import REFERENCES, SamplingAdapter, as_sampling_adapter
from .coupling import sampling_coupling
from .form import FORM
from .kinds import DECLARED as _DECLARED  # noqa: F401 -- the sampling forms of its check kinds
from .scenarios import SCENARIOS, Scenario, get
from .tally import SAMPLING, SamplingTally

NOT_SHOWN = ("the sampling contract hands the verifier logits, so the probe cannot force an accept test's ratio to "
             "0; the kernel under the processors is probed under the chain contract")  # fmt: skip
MAX_ROWS = {"default": 200_000, "large_v32768_g2": 20_000}
REPRO = "mixed_params_g3"


class SamplingContract(Contract):
    name = SAMPLING
    seed_key = "sampling"
    form = FORM
    shardable = False

    def wrap(self, subject, name: str | None = None) -> SamplingAdapter:
        return as_sampling_adapter(subject, name)

    def catalogue(self) -> dict[str, Scenario]:
        return SCENARIOS

    def get(self, name: str) -> Scenario:
        return get(name)

    def scenarios(self, adapter: SamplingAdapter) -> list[Scenario]:
        """The scenarios its declarations allow (requests setting a parameter it does not support are left out;
        point-mass scenarios need point_mass_drafts), bound to its law in its dtype."""
        out = []
        for s in SCENARIOS.values():
            kept = s.supported(adapter.supports)
            if kept is None or (kept.point_mass and not adapter.point_mass_drafts):
                continue
            out.append(self.bind(adapter, kept))
        return out

    @staticmethod
    def bind(adapter: SamplingAdapter, scenario: Scenario) -> Scenario:
        """The scenario bound to the adapter's law in its dtype, with only the requests it supports (a scenario named
        by --scenarios arrives unbound)."""
        if scenario.chain is not None:
            return scenario
        kept = scenario.supported(adapter.supports) or scenario
        return kept.bound(adapter.target_law(), adapter.law_key, adapter.dtype)

    def plan(self, adapter: SamplingAdapter, scenario: Scenario) -> Plan:
        return plan_of(SAMPLING, self.bind(adapter, scenario), adapter.rule)

    def tally(self, adapter: SamplingAdapter, scenario: Scenario, seed: int) -> SamplingTally:
        scenario = self.bind(adapter, scenario)
        return SamplingTally(scenario.chain, seed=seed, rule=adapter.rule, sampling=scenario, logprobs=adapter.logprobs)

    def inputs(self, adapter, scenario: Scenario, rows: int, seed: int, chunk, start_states=None):
        return self.bind(adapter, scenario).inputs(rows, seed, chunk)

    def tokens(self, out):
        return out[0]

    def max_rows(self, scenario: Scenario) -> int:
        return MAX_ROWS.get(scenario.name, MAX_ROWS["default"])

    def run_checks(self, caller, plan, seed: int, stopped: str | None) -> tuple[list, list]:
        adapter = caller.adapter
        coupled = adapter.uniforms and adapter.coupled and adapter.law is None and adapter.chain in REFERENCES
        repro = self.bind(adapter, get(REPRO)) if get(REPRO).supported(adapter.supports) else self.scenarios(adapter)[0]
        return run_checks(caller, repro, coupled, sampling_coupling, seed, stopped)

    def edge_probe(self, caller, seed: int, timeout=None):
        return not_shown(NOT_SHOWN)

    def describe(self, adapter, scenario: Scenario, tally, failure) -> dict:
        record = {"gamma": scenario.gamma, "requests": [repr(c.params) for c in scenario.components],
                  "law": adapter.law_key}  # fmt: skip
        derived = tau.estimate(tally.scenario, tally, adapter.rule)  # the chain's kinds on the processed laws
        return {**record, "tau": derived} if derived else record

    def adapter_record(self, adapter: SamplingAdapter) -> dict:
        return {"chain": adapter.chain, "law": None if adapter.law is None else adapter.law_key,
                "logprobs": adapter.logprobs, "point_mass_drafts": adapter.point_mass_drafts,
                "supports": sorted(adapter.supports)}  # fmt: skip

    def adapter_from_record(self, record: dict):
        raise ValueError("sampling runs are not sharded, so they are never merged")


CONTRACT = SamplingContract()


__all__ = ["CONTRACT", "NOT_SHOWN", "SamplingContract"]
