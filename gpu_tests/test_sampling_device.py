"""The batched sampling verifier on the device (specref.batched.sampling): coupled token for token with the reference
sampling verifier on every scenario of the sampling contract, through injected uniforms, in float64; float32 logits
give the reference's supports on every state."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specref.batched.sampling import processed_probs, verify_sampling
from specref.conformance.engine.callform import call_inputs
from specref.conformance.sampling.adapters import reference_sampling_verify
from specref.conformance.sampling.form import FORM
from specref.conformance.sampling.scenarios import SCENARIOS
from specref.reference.sampling import chain_law

pytestmark = pytest.mark.exact


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_batched_sampling_is_coupled_with_the_reference_on_the_device(device, name):
    s = SCENARIOS[name].bound(chain_law("vllm"), "vllm", torch.float64)
    rows = 64 if name.startswith("large") else 512
    batch = s.inputs(rows, 0, "device")
    uniforms = np.random.default_rng(2).random((rows, s.gamma + 1))
    args, kwargs = call_inputs(batch, 0, form=FORM, dtype=torch.float64, device=str(device), uniforms=uniforms)
    ours = verify_sampling(*args, **kwargs)
    cpu_args, cpu_kwargs = call_inputs(batch, 0, form=FORM, dtype=torch.float64, uniforms=uniforms)
    reference = reference_sampling_verify(*cpu_args, **cpu_kwargs)
    assert ours.device.type == torch.device(device).type and torch.equal(ours.cpu(), reference)


@pytest.mark.parametrize("name", [n for n in SCENARIOS if not n.startswith("large")])
def test_float32_logits_keep_the_reference_supports_on_the_device(device, name):
    s = SCENARIOS[name].bound(chain_law("vllm"), "vllm", torch.float32)
    for state, (c, path) in enumerate(zip(s.component_of, s.paths)):
        comp = s.components[c]
        logits = torch.from_numpy(np.broadcast_to(s.logits[state], (1, len(path) + 1, s.vocab_size)).copy())
        drafts = torch.tensor([list(path)], dtype=torch.int64).reshape(1, len(path)).to(device)
        ours = processed_probs(logits.float().to(device), drafts, [comp.params], [comp.history])[0, -1]
        assert ((ours.cpu().double().numpy() > 0) == (s.target[state] > 0)).all(), (name, state)
