"""The sampling contract's coupling with the reference sampling verifier: with injected uniforms (specref.randomness)
and float64 logits, the tokens must equal specref.reference.sampling's, token for token (adapters that declare
`uniforms` in specref's convention and a chain with a reference engine: adapters.REFERENCES)."""

from __future__ import annotations

import numpy as np
import torch

from ...stats import CheckResult
from ..engine.calls import AdapterFailure, Caller
from ..engine.passes import derive_seed
from ..engine.results import failure_details, t0_result
from .adapters import REFERENCES
from .scenarios import SCENARIOS

#: The scenarios coupled: every parameter, penalties over the drafts, greedy rows and -inf masks among them.
COUPLED = ("mixed_params_g3", "masked_logits_g3", "penalties_drafts_g2", "top_k_top_p_g3", "point_mass_g3")
ROWS = 256


def sampling_coupling(caller: Caller, seed: int) -> CheckResult:
    adapter = caller.adapter
    reference = Caller(REFERENCES[adapter.chain](), caller.contract, mode="inline")
    mismatches, rows, example = 0, 0, None
    for name in COUPLED:
        s = SCENARIOS[name].supported(adapter.supports)
        if s is None or (s.point_mass and not adapter.point_mass_drafts):
            continue
        s = s.bound(adapter.target_law(), adapter.law_key, torch.float64)
        batch = s.inputs(ROWS, seed, "coupling")
        uniforms = np.random.Generator(np.random.PCG64(derive_seed("uniforms", seed, name))).random((ROWS, s.gamma + 1))
        try:
            theirs = caller(batch, 0, uniforms=uniforms, dtype=torch.float64)[0][0]
        except AdapterFailure as failure:
            return t0_result("coupling", 1, rows, failure_details(failure))
        ours = reference(batch, 0, timeout=600.0, uniforms=uniforms)[0][0]
        bad = np.flatnonzero((theirs != ours).any(1))
        mismatches += bad.size
        rows += ROWS
        if bad.size and example is None:
            example = {"scenario": name, "row": int(bad[0]), "theirs": theirs[bad[0]].tolist(),
                       "reference": ours[bad[0]].tolist(), "uniforms": uniforms[bad[0]].tolist()}  # fmt: skip
    return t0_result("coupling", mismatches, rows, {"example": example})


__all__ = ["COUPLED", "sampling_coupling"]
