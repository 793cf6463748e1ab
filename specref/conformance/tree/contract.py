"""The tree verifier's contract (engine/contract.Contract): the harness drafts every tree itself, by the adapter's
declared scheme, and checks the walk against exact laws (checks.py).

    verify(target_probs [B, N+1, V], draft_probs [B, N, V], draft_tokens [B, N], parents [B, N], generator,
           **capabilities) -> tokens [B, <= N+1] int64 (-1 padded), or (tokens, nodes [B, <= N]) with `nodes`

A call's output is read back as (tokens [B, N+1], nodes [B, N] or None), each padded with -1. Run-level checks
(run_checks.py): reproducibility on the run's first scenario, and token-for-token coupling with
specref.reference.tree (adapters declaring `uniforms` in its convention, `coupled`; lossless rules); the forced
rare-edge probe (edges/probe.py) on one-node trees.
"""

from __future__ import annotations

import numpy as np
import torch

from ...reference.tree import uniforms_rng, verify_tree
from ...stats import CheckResult
from ..chain.contract import adapter_from_record
from ..chain.probe import DESIGN as CHAIN_DESIGN
from ..edges.probe import edge_probe
from ..engine.callform import CallForm, as_numpy, call_inputs
from ..engine.calls import AdapterFailure
from ..engine.contract import Contract
from ..engine.passes import derive_seed
from ..engine.plan import Plan
from ..engine.registry import TREE
from ..engine.results import failure_details, t0_result
from ..engine.run_checks import run_checks
from . import snippet
from .adapters import TreeAdapter, as_tree_adapter
from .checks import TreeTally
from .diagnosis import tree_rule_diagnosis
from .kinds import DECLARED as _DECLARED  # noqa: F401 -- the tree's check kinds
from .lossy import tree_lossy_measure
from .picture import add_to_report, series_for
from .scenarios import SCENARIOS, TreeBatch, TreeScenario, from_chain, get

#: Rows past which a tree scenario's checks gain little.
MAX_ROWS = 200_000
#: Scenarios of the coupling check (each drafted by the adapter's scheme; chain adapters get the chain ones).
COUPLING_SCENARIOS = ("tree_chain_markov", "tree_star_cf", "tree_duplicates_cf", "tree_eagle_markov",
                      "tree_ragged_markov")  # fmt: skip
COUPLING_ROWS = 128


# --- the call ------------------------------------------------------------------------------------------------------


def _fields(batch: TreeBatch, declared: dict) -> dict:
    return {"tokens": batch.draft_tokens, "parents": batch.parents, "nodes": bool(declared.get("nodes"))}


def _arguments(job: dict, target, draft, generator) -> tuple[tuple, dict]:
    device = job["device"]
    tokens, parents = (torch.from_numpy(job[k].copy()).to(device) for k in ("tokens", "parents"))
    return (target, draft, tokens, parents, generator), ({"return_nodes": True} if job["nodes"] else {})


def _read(out, job: dict) -> tuple[np.ndarray, np.ndarray | None]:
    """(tokens [B, N+1], nodes [B, N] or None), -1 padded; a malformed output raises AdapterFailure."""
    rows, n = job["tokens"].shape
    tokens, nodes = out if job["nodes"] else (out, None)
    padded = []
    for what, value, most in (("tokens", tokens, n + 1), ("nodes", nodes, n)):
        if value is None:
            padded.append(None)
            continue
        if not isinstance(value, torch.Tensor) or value.dim() != 2 or value.shape[0] != rows:
            raise AdapterFailure("malformed", f"{what}: returned {type(value).__name__} of shape "
                                 f"{tuple(getattr(value, 'shape', ()))}, expected [B={rows}, <= {most}]")  # fmt: skip
        if value.dtype != torch.int64:
            raise AdapterFailure("malformed", f"{what}: returned dtype {value.dtype}, expected torch.int64")
        if value.shape[1] > most or (what == "tokens" and value.shape[1] < 1):
            raise AdapterFailure("malformed", f"{what}: returned {value.shape[1]} columns, expected 1..{most}")
        full = np.full((rows, most), -1, dtype=np.int64)
        full[:, : value.shape[1]] = as_numpy(value, f"{what}: returned")
        padded.append(full)
    return padded[0], padded[1]


#: The tree call: verify(target, draft, draft_tokens, parents, generator, [return_nodes=], [uniforms=]).
FORM = CallForm(_fields, _arguments, _read, declares=("nodes",))


def tree_call_inputs(batch: TreeBatch, generator_seed: int, *, dtype: torch.dtype = torch.float32,
                     device: str = "cpu", nodes: bool = False, uniforms: np.ndarray | None = None,
                     generator_state: torch.Tensor | None = None) -> tuple[tuple, dict]:  # fmt: skip
    """(args, kwargs) of the tree contract exactly as the harness passes them for this batch (reproduce snippets
    call this): (target_probs, draft_probs, draft_tokens, parents, generator), return_nodes=True where declared;
    uniforms [B, N+1] where given; generator_state: a forced CPU state (specref.forced) the generator starts in."""
    return call_inputs(batch, generator_seed, dtype=dtype, device=device, form=FORM, nodes=nodes, uniforms=uniforms,
                       generator_state=generator_state)  # fmt: skip


# --- the contract ---------------------------------------------------------------------------------------------------


class TreeDesign:
    """The forced probe's design for trees (edges/probe.ProbeDesign): the chain's rows (chain/probe.py) as one-node
    trees (N = 1: the single child is the chain's draft, parents 0), whose tokens [B, N+1] = [B, 2] are the chain's
    g = 1 layout. Injected uniforms [B, N+1] follow specref.reference.tree's convention: u_0 the accept test, u_N
    the final draw, except that sample_match draws the root's token (its correction) with u_0."""

    def batch(self, name: str, dtype: torch.dtype, rows: int, seed: int):
        batch, _ = CHAIN_DESIGN.batch(name, dtype, rows, seed)
        return batch, from_chain(batch)

    def classify(self, batch_name: str, batch, out: np.ndarray, target_seen: np.ndarray) -> dict[int, str]:
        return CHAIN_DESIGN.classify(batch_name, batch, out, target_seen)

    def correction_column(self, adapter) -> int:
        return 0 if getattr(adapter, "rule", None) == "sample_match" else 1


DESIGN = TreeDesign()


class TreeContract(Contract):
    name = TREE
    seed_key = "tree-generator"
    form = FORM

    def wrap(self, subject, name: str | None = None) -> TreeAdapter:
        return as_tree_adapter(subject, name)

    def catalogue(self) -> dict[str, TreeScenario]:
        return SCENARIOS

    def get(self, name: str) -> TreeScenario:
        return get(name)

    def scenarios(self, adapter: TreeAdapter) -> list[TreeScenario]:
        return [s.given(adapter.dtype) for s in SCENARIOS.values() if s.chains_only or not adapter.chains_only]

    def plan(self, adapter: TreeAdapter, scenario: TreeScenario) -> Plan:
        tested, skipped = self.tally(adapter, scenario, 0).planned()  # the exact laws alone: before any data
        return Plan(tested=tested, skipped=skipped)

    def tally(self, adapter: TreeAdapter, scenario: TreeScenario, seed: int) -> TreeTally:
        return TreeTally(scenario, adapter.scheme, adapter.rule, adapter.nodes)

    def inputs(self, adapter: TreeAdapter, scenario: TreeScenario, rows: int, seed: int, chunk, start_states=None):
        return scenario.inputs(rows, seed, chunk, adapter.scheme, start_states)

    def tokens(self, out) -> np.ndarray:
        return out[0]

    def max_rows(self, scenario: TreeScenario) -> int:
        return MAX_ROWS

    def run_checks(self, caller, plan, seed: int, stopped: str | None) -> tuple[list, list]:
        adapter = caller.adapter  # the reference engine runs every tree rule, so any rule's uniforms can be coupled
        coupled = adapter.uniforms and adapter.coupled and not adapter.lossy
        repro = plan.scenarios[0] if plan.scenarios else get("tree_star_cf").given(caller.adapter.dtype)
        return run_checks(caller, repro, coupled, coupling, seed, stopped)

    def edge_probe(self, caller, seed: int, timeout=lambda: None):
        """The forced rare-edge probe (edges/probe.py) on its rows as one-node trees (tokens [B, 2], the chain's g = 1
        layout): `u <= p/q` at a float32 u = 0 (SGLang's `coin <= prob_acc`), a left-side inverse CDF."""
        return edge_probe(caller, seed, timeout, DESIGN)  # None: the hang limit of the call (hangs.py)

    def describe(self, adapter: TreeAdapter, scenario: TreeScenario, tally: TreeTally, failure) -> dict:
        out = {"scheme": adapter.scheme, "rule": adapter.rule, "shapes": [repr(shape) for shape in scenario.shapes],
               "gamma": scenario.depth}  # the deepest node: the most drafts one cycle can accept  # fmt: skip
        picture = series_for(tally, adapter.scheme, adapter.rule) if failure is None else None
        if picture is not None:
            out["node_acceptance"] = picture
        return out

    def adapter_record(self, adapter: TreeAdapter) -> dict:
        return {"scheme": adapter.scheme, "nodes": adapter.nodes, "chains_only": adapter.chains_only}

    def snippet(self, record: dict, where: dict, details: dict) -> str | None:
        return snippet.snippet(record, where, details)

    def rule_diagnosis(self, adapter: TreeAdapter, tallies: dict, alpha: float) -> dict:
        return tree_rule_diagnosis(tallies, adapter.rule, adapter.scheme, alpha)

    def lossy_measure(self, adapter: TreeAdapter, tallies: dict, alpha: float) -> dict:
        return tree_lossy_measure(tallies, adapter.rule, alpha)

    def draw(self, report, paths: dict) -> None:
        """The acceptance per node, observed and exact, next to report.md (picture.py)."""
        add_to_report(report, paths)

    def adapter_from_record(self, record: dict) -> TreeAdapter:
        return adapter_from_record(TreeAdapter, record)


CONTRACT = TreeContract()
#: The name earlier releases exported.
TREE_CONTRACT = CONTRACT


# --- run-level checks -----------------------------------------------------------------------------------------------


def coupling(caller, seed: int) -> CheckResult:
    """Injected uniforms [B, N+1], float64 rows: tokens equal specref.reference.tree's, token for token."""
    adapter = caller.adapter
    mismatches, rows, example = 0, 0, None
    for name in COUPLING_SCENARIOS:
        s = get(name).given(torch.float64)
        if adapter.chains_only and not s.chains_only:
            continue
        batch = s.inputs(COUPLING_ROWS, seed, "coupling", adapter.scheme)
        n = s.num_nodes
        uniforms = np.random.Generator(np.random.PCG64(derive_seed("tree-uniforms", seed, name))).random(
            (COUPLING_ROWS, n + 1))  # fmt: skip
        try:
            theirs = caller(batch, 0, uniforms=uniforms, dtype=torch.float64)[0][0]
        except AdapterFailure as failure:
            return t0_result("coupling", 1, rows, failure_details(failure))
        for b in range(COUPLING_ROWS):
            ours = verify_tree(batch.target_probs[b].tolist(), batch.draft_probs[b].tolist(),
                               batch.draft_tokens[b].tolist(), batch.parents[b].tolist(),
                               uniforms_rng(adapter.rule, uniforms[b].tolist()), rule=adapter.rule,
                               validate=False)  # fmt: skip
            expected = ours + [-1] * (n + 1 - len(ours))
            if theirs[b].tolist() != expected:
                mismatches += 1
                if example is None:
                    example = {"scenario": name, "row": b, "theirs": theirs[b].tolist(), "reference": expected}
        rows += COUPLING_ROWS
    return t0_result("coupling", mismatches, rows, {"example": example})


__all__ = ["CONTRACT", "DESIGN", "FORM", "TREE_CONTRACT", "TreeContract", "tree_call_inputs"]
