"""What the engine knows of a contract: the interfaces it reads, written down, and the defaults a contract may keep.

The engine (this package) runs every contract the same way: the plan, the sizing, the hang-safe caller, the probe
and main passes, reproducibility, Holm, the verdict, shards and merge. It never asks a subject what it is: the
contract is chosen once, above the engine (specref.conformance.contracts), and handed to `engine.run.run_contract`.
A contract is one package (chain/, tree/, pipeline/) whose `contract.py` holds a short bundle: a subclass of
`Contract` that declares what differs between contracts and keeps the defaults of the rest.

The engine reads three kinds of object a contract makes:
  Scenario   one input design: `name`, `description`, `vocab_size`, `rows_per_call`, `row_elements`, `joint`,
             `probe`; `gamma`, `starts` and its law arrays `target` and `draft` where it has them (a shard's plan
             fingerprint digests them; a joint scenario's calls start from `starts`)
  Batch      one call's inputs: `len(batch)` rows, `target_probs` and `draft_probs` (numpy, float64; None where
             the subject computes its own) that the CallForm casts to the adapter's dtype
  Tally      the counts of one scenario over calls: `add(batch, out, seen, where) -> [B] rows passing T0`, `rows`,
             `seconds`, the T0/T2/certain results, and `Counts` (engine/counts.py) for shards
  CallForm   how one call's arguments are built and its output read back (engine/callform.py)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:  # the protocols need no torch: `specref conform --list` and usage errors import this module
    from .callform import CallForm


class Scenario(Protocol):
    name: str
    description: str
    vocab_size: int
    rows_per_call: int
    row_elements: int
    joint: bool
    probe: bool


class Tally(Protocol):
    rows: int
    seconds: float

    def add(self, batch, out, seen, where: dict): ...

    def t0_results(self) -> list: ...

    def t0_kinds(self) -> list[str]: ...

    def certain_results(self, kinds) -> list: ...

    def t2_results(self, alphas: dict[str, float]) -> list: ...


class Contract:
    """One contract's bundle. Required (no default): `name`, `seed_key`, `form`, `wrap`, `catalogue`,
    `scenarios`, `plan`, `tally`, `inputs`. The rest have defaults that a contract overrides where it differs.

    name          "chain" | "tree" | "pipeline": recorded in report.json ("contract")
    seed_key      a call's generator seed is passes.derive_seed(seed_key, run seed, scenario, chunk)
    form          CallForm: how a call's arguments are built and its output read (in the worker)
    """

    name: str
    seed_key: str
    form: CallForm
    #: whether a run can be cut into shards (engine/shards.py) and merged
    shardable: bool = True
    #: None (calls.call_mode decides: a forked worker for CPU adapters) or the mode its calls must run in
    call_mode: str | None = None

    # --- required ---------------------------------------------------------------------------------------------
    def wrap(self, subject, name: str | None = None):
        """The adapter, with its declared capabilities."""
        raise NotImplementedError

    def catalogue(self) -> dict[str, Any]:
        """{name: scenario} of every scenario of the contract."""
        raise NotImplementedError

    def scenarios(self, adapter) -> list:
        """The scenarios the adapter's capabilities allow, as its dtype gives them."""
        raise NotImplementedError

    def plan(self, adapter, scenario):
        """plan.Plan: the tested, certain and skipped check kinds of a scenario, before any data."""
        raise NotImplementedError

    def tally(self, adapter, scenario, seed: int) -> Tally:
        raise NotImplementedError

    def inputs(self, adapter, scenario, rows: int, seed: int, chunk, start_states=None):
        """One call's batch."""
        raise NotImplementedError

    # --- defaults ---------------------------------------------------------------------------------------------
    def get(self, name: str):
        """One scenario of the catalogue by name."""
        return self.catalogue()[name]

    def tokens(self, out):
        """The emitted tokens [B, width] of a call's output as the form read it back."""
        return out

    def max_rows(self, scenario) -> int:
        """Rows past which a scenario's checks gain little (runs sized by time stop there)."""
        return 200_000

    def demands(self, adapter, scenario, checks, alphas: dict[str, float]) -> list | None:
        """What each tested check of `scenario` (checks: its plan.Plan) needs to detect a distance (engine/sizing.py
        Demand), from the scenario's own probabilities, or None: the contract does not size by distance (the run
        keeps the sizing by time of passes.py)."""
        return None

    def probe_rows_needed(self, power: float) -> int:
        """Rows of the statistical rare-edge probe scenario (scenario.probe) that reach `power`: a run sized by
        time stops the probe when it cannot reach even odds (passes.py). Only contracts with one override it."""
        return 0

    def run_checks(self, caller, plan, seed: int, stopped: str | None) -> tuple[list, list]:
        """(results, not run) of the run-level checks (run_checks.py): none by default."""
        return [], []

    def edge_probe(self, caller, seed: int, timeout=lambda: None):
        """The forced rare-edge probe (edges/probe.py), or None where the probe cannot reach the contract; timeout()
        -> a call's hang limit (None: the caller's own, hangs.py)."""
        return None

    def probe_summary(self, scenario, tally, adapter) -> dict:
        """report.json's "probe" record of the statistical rare-edge probe scenario (scenario.probe)."""
        return {}

    def describe(self, adapter, scenario, tally, failure) -> dict:
        """The contract's own keys of the report's scenario summary."""
        return {}

    def plot_series(self, tally) -> dict | None:
        """The observed and expected series of a scenario's plots (report/plots.py), or None: not plotted."""
        return None

    def rule_diagnosis(self, adapter, tallies: dict, alpha: float) -> dict:
        """Which other rule the counts fit, when only rule checks failed (chain/diagnosis.py); {}: not diagnosed."""
        return {}

    def lossy_measure(self, adapter, tallies: dict, alpha: float) -> dict:
        """For an adapter declaring lossy=True: its TV from the target law with intervals, and its acceptance
        against exact sampling, per scenario (chain/lossy.py); {}: not measured (the plug-in TV is reported)."""
        return {}

    def adapter_record(self, adapter) -> dict:
        """The contract's own keys of report.json's "adapter" record (beyond the ones every adapter has)."""
        return {}

    def adapter_from_record(self, record: dict):
        """The adapter as a report.json recorded it (merge never calls its verify)."""
        raise NotImplementedError(f"{self.name} runs cannot be merged")

    def snippet(self, record: dict, where: dict, details: dict) -> str | None:
        """Python that rebuilds the call a failure at `where` (a call or a row of report.json) came from, with the
        failed check's details (report/snippets.py), or None where no single call fits."""
        return None

    def draw(self, report, paths: dict) -> None:
        """Pictures of the contract's own next to report.md, beyond the laws' plots: none by default."""


__all__ = ["Contract", "Scenario", "Tally"]
