"""The chain kernel's coupling with the reference engine: with injected uniforms (specref.randomness), float64
rows, the tokens must equal specref.reference's, token for token (adapters that declare `uniforms` in specref's
convention and a rule with a reference engine: exact, and block against specref.reference.block)."""

from __future__ import annotations

import numpy as np
import torch

from ...stats import CheckResult
from ..engine.calls import AdapterFailure, Caller
from ..engine.passes import derive_seed
from ..engine.results import failure_details, t0_result
from .adapters import REFERENCES
from .scenarios import SCENARIOS


def chain_coupling(caller: Caller, seed: int) -> CheckResult:
    """Injected uniforms, float64 inputs: tokens must equal the declared rule's reference engine's, token for token."""
    reference = Caller(
        REFERENCES[caller.adapter.rule](), caller.contract, mode="inline"
    )  # the chain contract, as the caller under test
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
            return t0_result("coupling", 1, rows, failure_details(failure))
        ours = reference(batch, 0, timeout=600.0, uniforms=uniforms)[0]
        bad = np.flatnonzero((theirs != ours).any(1))
        mismatches += bad.size
        rows += 256
        if bad.size and example is None:
            example = {"scenario": name, "row": int(bad[0]), "theirs": theirs[bad[0]].tolist(),
                       "reference": ours[bad[0]].tolist(), "uniforms": uniforms[bad[0]].tolist()}  # fmt: skip
    return t0_result("coupling", mismatches, rows, {"example": example})
