"""Deterministic tests of the built-in chain adapters: each converts its engine's output to the verify contract
(specref.conformance.adapters), the reference adapter is the reference engine row by row, and the transformers
adapter meets the contract on forced cases."""

from __future__ import annotations

import pytest
import torch

from specref import reference
from specref.conformance.chain.adapters import (
    Adapter,
    as_adapter,
    builtin_adapters,
    contract_output,
    reference_adapter,
    transformers_adapter,
    transformers_ensemble_adapter,
)
from specref.conformance.contracts import contract
from specref.randomness import Injected

pytestmark = pytest.mark.exact


def _t(rows) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64)


def test_as_adapter_wraps_functions_objects_and_passes_adapters():
    def my_verify(target_probs, draft_probs, draft_tokens, generator):
        return None

    plain = as_adapter(my_verify)
    assert plain.name == "my_verify" and not (plain.ragged or plain.point_mass or plain.uniforms)
    adapter = Adapter("x", my_verify, ragged=True)
    assert as_adapter(adapter) is adapter and as_adapter(adapter, name="y").name == "y"
    try:
        as_adapter(42)
    except ValueError as error:
        assert "obj=42" in str(error)
    else:
        raise AssertionError("as_adapter(42) did not raise")


def test_builtin_adapters_list_only_what_runs_here():
    names = set(builtin_adapters())
    assert {"reference", "batched", "transformers", "transformers-ensemble"} <= names
    if not torch.cuda.is_available():
        assert not names & {"vllm", "flashinfer", "sglang", "sglang-threshold"}
    assert builtin_adapters()["transformers-ensemble"]().lossy
    assert "global RNG" in builtin_adapters()["transformers"]().notes


def test_contract_output_left_aligns_and_pads():
    assert contract_output([[3], [1, 2, 0]], 2).tolist() == [[3, -1, -1], [1, 2, 0]]


def test_reference_adapter_is_specref_reference_row_by_row():
    target = [[[0.5, 0.5, 0], [0.2, 0.3, 0.5], [0.1, 0.1, 0.8]]] * 3
    draft = [[[0.0, 0.5, 0.5], [0.3, 0.3, 0.4]]] * 3
    tokens = [[1, 2], [2, 0], [1, 1]]
    uniforms = [[0.9, 0.1, 0.3], [0.2, 0.6, 0.7], [0.4, 0.99, 0.05]]
    num_draft = [2, 1, 0]
    out = reference_adapter().verify(
        _t(target), _t(draft), torch.tensor(tokens), None, uniforms=_t(uniforms), num_draft=torch.tensor(num_draft)
    )
    for b, n in enumerate(num_draft):
        row_uniforms = uniforms[b][:n] + [uniforms[b][-1]]
        if n:
            expected = reference.verify(target[b][: n + 1], draft[b][:n], tokens[b][:n], Injected(row_uniforms))
        else:  # no drafts: the bonus alone, the inverse CDF of p_1 = [.5, .5, 0] at u_g = 0.05
            expected = [0]
        assert out[b].tolist() == expected + [-1] * (3 - len(expected)), b


def test_reference_adapter_draws_reproducibly_from_the_generator():
    target = torch.full((16, 3, 5), 0.2, dtype=torch.float64)
    tokens = torch.zeros(16, 2, dtype=torch.int64)
    adapter = reference_adapter()
    first, second = (adapter.verify(target, target[:, :2], tokens, torch.Generator().manual_seed(3)) for _ in range(2))
    assert torch.equal(first, second)


def _check_contract(out, draft_tokens):
    batch, gamma = draft_tokens.shape
    assert out.shape == (batch, gamma + 1) and out.dtype == torch.int64
    emitted = (out >= 0).sum(1)
    for b in range(batch):
        n = int(emitted[b])
        assert 1 <= n <= gamma + 1 and (out[b, n:] == -1).all() and (out[b, :n] >= 0).all()
        assert out[b, : n - 1].tolist() == draft_tokens[b, : n - 1].tolist()


def test_transformers_adapter_meets_the_contract():
    generator = torch.Generator().manual_seed(11)
    batch, gamma, vocab_size = 24, 3, 5
    target = torch.rand(batch, gamma + 1, vocab_size, generator=generator).softmax(-1)
    draft = torch.rand(batch, gamma, vocab_size, generator=generator).softmax(-1)
    tokens = torch.multinomial(draft.view(-1, vocab_size), 1, generator=generator).view(batch, gamma)
    global_state = torch.random.get_rng_state()
    for adapter in (transformers_adapter(), transformers_ensemble_adapter()):
        first = adapter.verify(target, draft, tokens, torch.Generator().manual_seed(5))
        second = adapter.verify(target, draft, tokens, torch.Generator().manual_seed(5))
        _check_contract(first, tokens)
        assert torch.equal(first, second)  # seeded from the harness's generator
    assert torch.equal(torch.random.get_rng_state(), global_state)  # the global RNG is left as it was


def test_transformers_adapter_on_forced_cases():
    # Row 0: q = p one-hot, so d_1 = 1 is accepted and the bonus is 2. Row 1: p(d_1) = 0, rejected, correction 0.
    target = torch.tensor([[[0, 1.0, 0], [0, 0, 1.0]], [[1.0, 0, 0], [0, 0, 1.0]]])
    draft = torch.tensor([[[0, 1.0, 0]], [[0, 1.0, 0]]])
    tokens = torch.tensor([[1], [1]])
    out = transformers_adapter().verify(target, draft, tokens, torch.Generator().manual_seed(0))
    assert out.tolist() == [[1, 2], [0, -1]]


def test_coupling_is_checked_only_for_uniforms_in_specrefs_convention():
    """`coupled=False` (uniforms in a convention of the verifier's own) leaves the coupling check out, chain and tree
    alike (contract_chain.run_checks; the tree's is in test_edge_probe_tree_exact.py)."""
    from dataclasses import replace
    from types import SimpleNamespace

    from specref.conformance.engine.calls import Caller

    for coupled in (True, False):
        with Caller(
            replace(builtin_adapters()["batched"](), coupled=coupled), contract("chain"), mode="inline"
        ) as caller:
            results, _ = caller.contract.run_checks(caller, SimpleNamespace(scenarios=[]), 0, None)
        assert [r.name.split("[")[0] for r in results] == ["reproducibility"] + ["coupling"] * coupled
        assert all(r.passed for r in results)
