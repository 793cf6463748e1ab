"""The sampling-path peers that run here without their engine's venv: transformers' assisted generation with its
processors (peers/transformers_assisted.py). Its exact law is transformers' own law at every prefix: it sums to 1,
its first-token marginal is transformers_sampling_law.law at the prompt, and each later conditional counts the
tokens before it in the repetition penalty (the history holds them). vLLM's and llama.cpp's sampling adapters run
in their own venvs (reports/peers.md); their laws are held by properties/test_processor_fixtures_exact.py."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.exact
pytest.importorskip("transformers")


def test_assisted_sampling_exact_law_is_transformers_law_at_every_prefix():
    from specref.conformance.peers import transformers_assisted as ta
    from specref.conformance.peers.transformers_sampling_law import law
    from specref.hf import forward
    from specref.hf.tiny import tiny_pair
    from specref.reference.processors import History

    target, _ = tiny_pair()
    prompt = (1, 2, 3)
    joint = ta.exact_law(target, ta.PARAMS)(prompt, 2)
    assert abs(sum(joint.values()) - 1) < 1e-9
    with torch.no_grad():
        logits = forward.logits(target, torch.tensor([list(prompt)]))[0, -1].double().numpy()
    first = np.zeros(target.config.vocab_size)
    for (x1, _), p in joint.items():
        first[x1] += p
    np.testing.assert_allclose(
        first, law(logits, ta.PARAMS, History(prompt)), atol=1e-6
    )  # the forward pass batched or alone: float32 rounding
    checked = 0
    for x1 in (t for t in range(len(first)) if t not in prompt and first[t] > 0):  # new to the history
        with torch.no_grad():
            after = forward.logits(target, torch.tensor([[*prompt, x1]]))[0, -1].double().numpy()
        second = np.array([joint.get((x1, x2), 0.0) for x2 in range(len(first))]) / first[x1]
        np.testing.assert_allclose(second, law(after, ta.PARAMS, History(prompt, (x1,))), atol=1e-6)
        if second[x1] > 0:  # x1 itself can follow: the penalty on it is what the history changes
            assert not np.allclose(second, law(after, ta.PARAMS, History(prompt)), atol=1e-6)
            checked += 1
    assert checked
