"""The run-level T0 checks: reproducibility (same generator seed, same tokens: every contract) and a chain kernel's
token-for-token coupling with the reference engine (adapters that accept injected uniforms and declare the exact
rule; the tree contract's coupling is in tree/contract.py)."""

from __future__ import annotations

import numpy as np
import torch

from ..stats import CheckResult
from . import checks
from .calls import AdapterFailure, Caller
from .passes import derive_seed, record
from .scenarios import SCENARIOS, Scenario


def run_checks(caller: Caller, repro: Scenario, coupled: bool, coupling, seed: int,
               stopped: str | None) -> tuple[list, list]:  # fmt: skip
    """(results, not run): reproducibility on scenario `repro`, and coupling(caller, seed) where `coupled`; both not
    run after a hang. Every contract's run-level checks (contracts.Contract.run_checks) are these."""
    if stopped:
        return [], [not_run(f"{name}[run]", stopped) for name in ["reproducibility"] + ["coupling"] * coupled]
    results = [reproducibility(caller, repro, seed)]
    if coupled:
        results.append(coupling(caller, seed))
    return results, []


def not_run(name: str, why: str | None) -> CheckResult:
    """A planned check that could not be computed: a failure with its reason, never a pass (no p-value, no alpha)."""
    why = why or "not reached"
    return CheckResult(name, float("nan"), 0, float("nan"), 0, 0.0, float("nan"), False, 0.0,
                       {"tier": "not run", "error": f"not run: {why}"})  # fmt: skip


def failure_details(failure: AdapterFailure) -> dict:
    return {"error": str(failure), "kind": failure.kind, "raised_at": failure.location, "call": failure.call}


def reproducibility(caller: Caller, s: Scenario, seed: int, rows: int = 512) -> CheckResult:
    """Same generator seed twice: identical tokens. A different seed: different tokens (chance ~ 0 at 512 rows)."""
    contract = caller.contract
    batch = contract.inputs(caller.adapter, s, rows, seed, "repro")
    log: list = []
    try:
        outs = []
        for generator_seed in (derive_seed("repro", seed),) * 2 + (derive_seed("repro", seed) + 1,):
            where = record(log, caller.adapter, s, rows, seed, "repro", generator_seed)
            outs.append(contract.tokens(caller(batch, generator_seed, where=where)[0]))
    except AdapterFailure as failure:
        return checks.t0_result("reproducibility", 1, 0, failure_details(failure))
    first, again, other = outs
    differs = int((first != again).any(1).sum())
    same_other = bool((first == other).all())
    return checks.t0_result(
        "reproducibility", differs + int(same_other), rows,
        {"rows_differing_under_same_seed": differs, "identical_under_other_seed": same_other},
    )  # fmt: skip


def chain_coupling(caller: Caller, seed: int) -> CheckResult:
    """Injected uniforms, float64 inputs: tokens must equal specref.reference's, token for token."""
    from .adapters import reference_adapter

    reference = Caller(reference_adapter(), mode="inline")
    mismatches, rows, example = 0, 0, None
    for name in ("cf_dense_g4", "cf_zero_support_g3", "cf_near_equal_g4", "markov_g5", "ragged_g6"):
        s = SCENARIOS[name].given(torch.float64)
        if s.ragged and not caller.adapter.ragged:
            continue
        batch = s.inputs(256, seed, "coupling")
        uniforms = np.random.Generator(np.random.PCG64(derive_seed("uniforms", seed, name))).random((256, s.gamma + 1))
        try:
            theirs = caller(batch, 0, uniforms=uniforms, dtype=torch.float64)[0]
        except AdapterFailure as failure:
            return checks.t0_result("coupling", 1, rows, failure_details(failure))
        ours = reference(batch, 0, timeout=600.0, uniforms=uniforms)[0]
        bad = np.flatnonzero((theirs != ours).any(1))
        mismatches += bad.size
        rows += 256
        if bad.size and example is None:
            example = {"scenario": name, "row": int(bad[0]), "theirs": theirs[bad[0]].tolist(),
                       "reference": ours[bad[0]].tolist(), "uniforms": uniforms[bad[0]].tolist()}  # fmt: skip
    return checks.t0_result("coupling", mismatches, rows, {"example": example})
