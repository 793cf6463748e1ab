"""The run-level T0 checks every contract runs: reproducibility (same generator seed, same tokens), and the
contract's coupling with specref's reference engine where it has one (chain/coupling.py, tree/contract.py)."""

from __future__ import annotations

from ...stats import CheckResult
from .calls import AdapterFailure, Caller
from .passes import derive_seed, record
from .results import failure_details, not_run, t0_result


def run_checks(caller: Caller, repro, coupled: bool, coupling, seed: int,
               stopped: str | None) -> tuple[list, list]:  # fmt: skip
    """(results, not run): reproducibility on scenario `repro`, and coupling(caller, seed) where `coupled`; both not
    run after a hang. Every contract's run-level checks (engine/contract.Contract.run_checks) are these."""
    if stopped:
        return [], [not_run(f"{name}[run]", stopped) for name in ["reproducibility"] + ["coupling"] * coupled]
    results = [reproducibility(caller, repro, seed)]
    if coupled:
        results.append(coupling(caller, seed))
    return results, []


def reproducibility(caller: Caller, s, seed: int, rows: int = 512) -> CheckResult:
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
        return t0_result("reproducibility", 1, 0, failure_details(failure))
    first, again, other = outs
    differs = int((first != again).any(1).sum())
    same_other = bool((first == other).all())
    return t0_result(
        "reproducibility", differs + int(same_other), rows,
        {"rows_differing_under_same_seed": differs, "identical_under_other_seed": same_other},
    )  # fmt: skip


__all__ = ["failure_details", "not_run", "reproducibility", "run_checks"]
