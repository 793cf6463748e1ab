"""The tree verifier's contract (contracts.Contract): the harness drafts every tree itself, by the adapter's
declared scheme, and checks the walk against exact laws (checks.py).

    verify(target_probs [B, N+1, V], draft_probs [B, N, V], draft_tokens [B, N], parents [B, N], generator,
           **capabilities) -> tokens [B, <= N+1] int64 (-1 padded), or (tokens, nodes [B, <= N]) with `nodes`

A call's output is read back as (tokens [B, N+1], nodes [B, N] or None), each padded with -1. Run-level checks
(run_checks.py): reproducibility on the run's first scenario, and token-for-token coupling with
specref.reference.tree (adapters declaring `uniforms` in its convention, `coupled`; lossless rules); the forced
rare-edge probe (edge_probe.py) on one-node trees.
"""

from __future__ import annotations

import numpy as np
import torch

from ...reference.tree import uniforms_rng, verify_tree
from ...stats import CheckResult
from ..callform import CallForm, call_inputs
from ..calls import AdapterFailure
from ..checks import t0_result
from ..contract_chain import adapter_from_record
from ..contracts import TREE
from ..diagnosis import tree_rule_diagnosis
from ..edge_probe import edge_probe
from ..passes import derive_seed
from ..plan import Plan
from ..run_checks import failure_details, run_checks
from .adapters import TreeAdapter, as_tree_adapter
from .checks import TreeTally
from .picture import add_to_report, series_for
from .scenarios import SCENARIOS, TreeBatch, TreeScenario, get

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
        full[:, : value.shape[1]] = value.detach().cpu().numpy()
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


class TreeContract:
    name = TREE
    seed_key = "tree-generator"
    form = FORM
    shardable = True
    call_mode = None  # calls.call_mode decides: a forked worker for CPU adapters

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

    def edge_probe(self, caller, seed: int):
        """The forced rare-edge probe (edge_probe.py) on its rows as one-node trees (tokens [B, 2], the chain's g = 1
        layout): `u <= p/q` at a float32 u = 0 (SGLang's `coin <= prob_acc`), a left-side inverse CDF."""
        return edge_probe(caller, seed, lambda: None)  # None: the hang limit of the call (hangs.py)

    def describe(self, adapter: TreeAdapter, scenario: TreeScenario, tally: TreeTally, failure) -> dict:
        out = {"scheme": adapter.scheme, "rule": adapter.rule, "shapes": [repr(shape) for shape in scenario.shapes],
               "gamma": scenario.depth}  # the deepest node: the most drafts one cycle can accept  # fmt: skip
        picture = series_for(tally, adapter.scheme, adapter.rule) if failure is None else None
        if picture is not None:
            out["node_acceptance"] = picture
        return out

    def plots(self, tally: TreeTally) -> bool:
        return False  # trees draw their own picture (picture.py)

    def rule_diagnosis(self, adapter: TreeAdapter, tallies: dict, alpha: float) -> dict:
        return tree_rule_diagnosis(tallies, adapter.rule, adapter.scheme, alpha)

    def draw(self, report, paths: dict) -> None:
        """The acceptance per node, observed and exact, next to report.md (picture.py)."""
        add_to_report(report, paths)

    def adapter_from_record(self, record: dict) -> TreeAdapter:
        return adapter_from_record(TreeAdapter, record)


TREE_CONTRACT = TreeContract()


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


__all__ = ["FORM", "TREE_CONTRACT", "TreeContract", "tree_call_inputs"]
