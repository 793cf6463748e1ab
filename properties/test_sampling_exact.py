"""The sampling contract, deterministic parts: the batched vLLM chain equals the reference chain on every scenario's
states; the reference and batched sampling verifiers are coupled token for token under injected uniforms; the
scenarios' state machines hold the drafts in their histories; the call form reads what the contract says; a file
IMPL declaring kind="sampling" resolves to the sampling contract; each mutant's certain check flags it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specref.batched.sampling import processed_probs
from specref.conformance.contracts import contract, contract_of
from specref.conformance.engine.callform import call_inputs
from specref.conformance.engine.calls import AdapterFailure
from specref.conformance.sampling.adapters import (
    batched_sampling_adapter,
    reference_sampling_adapter,
    reference_sampling_verify,
)
from specref.conformance.sampling.form import FORM
from specref.conformance.sampling.scenarios import SCENARIOS
from specref.reference.processors import SUPPORTS, History, processed_law
from specref.reference.sampling import chain_law

pytestmark = pytest.mark.exact

SMALL = [name for name in SCENARIOS if not name.startswith("large")]


def _bound(name, dtype=torch.float64):
    return SCENARIOS[name].bound(chain_law("vllm"), "vllm", dtype)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_batched_chain_equals_the_reference_chain_on_every_state(name):
    s = _bound(name)
    for state, (c, path) in enumerate(zip(s.component_of, s.paths)):
        comp = s.components[c]
        width = len(path) + 1
        logits = torch.from_numpy(np.broadcast_to(s.logits[state], (1, width, s.vocab_size)).copy())
        drafts = torch.tensor([list(path)], dtype=torch.int64).reshape(1, len(path))
        ours = processed_probs(logits, drafts, [comp.params], [comp.history])[0, -1].numpy()
        assert ((ours > 0) == (s.target[state] > 0)).all(), (name, state)
        np.testing.assert_allclose(ours, s.target[state], rtol=1e-12, atol=1e-15)


def test_penalised_states_hold_their_paths_and_the_law_moves_with_them():
    s = _bound("penalties_drafts_g2")
    comp = s.components[1]  # greedy, frequency penalty 0.3: drafting token 0 moves the argmax to token 1
    root, child = int(s.starts[1]), int(s.next_state[s.starts[1], 0])
    assert s.paths[child] == (0,) and s.target[root].argmax() == 0 and s.target[child].argmax() == 1
    expected = processed_law("vllm", s.logits[child], comp.params, comp.history.extended([0]))
    np.testing.assert_array_equal(s.target[child], expected)
    assert len(s.paths) == 3 * (1 + 3 + 9)


@pytest.mark.parametrize("name", SMALL)
def test_reference_and_batched_are_coupled_token_for_token(name):
    s = _bound(name)
    batch = s.inputs(512, 0, "coupling")
    uniforms = np.random.default_rng(1).random((512, s.gamma + 1))
    (ref_args, ref_kw), (bat_args, bat_kw) = (
        call_inputs(batch, 0, form=FORM, dtype=torch.float64, uniforms=uniforms, logprobs="processed") for _ in range(2)
    )
    ours, ours_lp = reference_sampling_adapter().verify(*ref_args, **ref_kw)
    theirs, theirs_lp = batched_sampling_adapter().verify(*bat_args, **bat_kw)
    assert torch.equal(ours, theirs)
    emitted = ours >= 0
    np.testing.assert_allclose(theirs_lp[emitted].numpy(), ours_lp[emitted].numpy(), rtol=0, atol=1e-9)


def test_greedy_rows_keep_a_draft_only_when_it_is_the_processed_argmax():
    s = _bound("bias_argmax_g3")
    batch = s.inputs(256, 0, 0)
    args, kwargs = call_inputs(batch, 0, form=FORM, dtype=torch.float64, uniforms=np.full((256, 4), 0.5))
    tokens = reference_sampling_verify(*args, **kwargs).numpy()
    greedy = s.greedy[batch.chain.states[:, 0]]
    argmax = s.target.argmax(1)[batch.chain.states]
    assert greedy.any() and (tokens[greedy][tokens[greedy] >= 0] == argmax[greedy][tokens[greedy] >= 0]).all()


def test_the_form_reads_tokens_and_logprobs_and_refuses_the_rest():
    job = {"tokens": np.zeros((2, 3), dtype=np.int64), "logprobs": "processed"}
    tokens, lp = FORM.read((torch.zeros(2, 4, dtype=torch.int64), torch.zeros(2, 4)), job)
    assert tokens.shape == (2, 4) and lp.shape == (2, 4)
    for bad in (torch.zeros(2, 4, dtype=torch.int64), (torch.zeros(2, 3, dtype=torch.int64), torch.zeros(2, 4))):
        with pytest.raises(AdapterFailure):
            FORM.read(bad, job)
    with pytest.raises(AdapterFailure, match="int64"):
        FORM.read(torch.zeros(2, 4), {**job, "logprobs": None})


def test_a_file_declaring_kind_sampling_resolves_to_the_sampling_contract(tmp_path):
    from specref.conformance import run
    from specref.conformance.resolve import resolve

    file = tmp_path / "my_sampler.py"
    file.write_text(
        "from specref.batched.sampling import verify_sampling\n\n\n"
        "def verify(target_logits, draft_probs, draft_tokens, params, histories, generator):\n"
        "    return verify_sampling(target_logits, draft_probs, draft_tokens, params, histories, generator)\n\n\n"
        'verify.kind = "sampling"\nverify.chain = "vllm"\n'
    )
    adapter, label = resolve(f"{file}:verify")
    assert contract_of(adapter) == "sampling" and adapter.chain == "vllm" and label == "my_sampler.verify"
    assert contract("sampling").name == "sampling"
    report = run(adapter, rows=256, scenarios=["min_p_bias_g2"])
    assert report.scenarios["min_p_bias_g2"]["rows"] == 256 and report.contract.name == "sampling"


def test_each_mutant_fails_its_certain_check_on_one_call():
    from specref.mutants.sampling import CATALOGUE

    cases = {"processors_skipped_on_verified_rows": ("bias_argmax_g3", "greedy_argmax"),
             "penalties_before_the_step": ("penalties_drafts_g2", "greedy_argmax"),
             "raw_logprobs_as_processed": ("mixed_params_g3", "logprob_value")}  # fmt: skip
    c = contract("sampling")
    for name, (scenario, kind) in cases.items():
        adapter = c.wrap(CATALOGUE[name])
        s = next(x for x in c.scenarios(adapter) if x.name == scenario)
        batch = s.inputs(512, 0, 0)
        args, kwargs = call_inputs(batch, 0, form=FORM, dtype=adapter.dtype, logprobs=adapter.logprobs)
        out = FORM.read(adapter.verify(*args, **kwargs), {"tokens": batch.draft_tokens, "logprobs": "processed"})
        tally = c.tally(adapter, s, 0)
        tally.add(batch, out, (None, batch.draft_probs), {"scenario": scenario})
        results = {r.name: r for r in tally.t0_results()}
        assert not results[kind].passed, (name, kind)
    correct = c.wrap(batched_sampling_adapter())
    for s in c.scenarios(correct):
        if s.name.startswith("large"):
            continue
        batch = s.inputs(512, 0, 0)
        args, kwargs = call_inputs(batch, 0, form=FORM, dtype=correct.dtype, logprobs="processed")
        out = FORM.read(correct.verify(*args, **kwargs), {"tokens": batch.draft_tokens, "logprobs": "processed"})
        tally = c.tally(correct, s, 0)
        tally.add(batch, out, (None, batch.draft_probs), {"scenario": s.name})
        assert all(r.passed for r in tally.t0_results()), (s.name, [r.name for r in tally.t0_results() if not r.passed])


def test_history_extended_keeps_the_prompt():
    assert History((1,), ()).extended([2]).prompt == (1,)


def test_an_adapter_declares_its_law_or_a_chain_and_what_it_supports():
    from specref.conformance.sampling.adapters import as_sampling_adapter

    def verify(target_logits, draft_probs, draft_tokens, params, histories, generator):
        raise AssertionError("never called here")

    law = chain_law("llama.cpp")
    verify.kind, verify.law, verify.supports = (
        "sampling",
        law,
        SUPPORTS["llama.cpp"],
    )  # a law= adapter says what it takes
    c = contract("sampling")
    adapter = c.wrap(verify)
    s = next(x for x in c.scenarios(adapter) if x.name == "top_k_top_p_g3")
    comp = s.components[0]
    np.testing.assert_array_equal(s.target[0], processed_law("llama.cpp", s.logits[0], comp.params, comp.history))
    assert adapter.law_key.startswith("law:") and c.adapter_record(adapter)["law"] == adapter.law_key
    verify.law, verify.chain, verify.supports = None, "transformers", None
    transformers = as_sampling_adapter(verify)
    names = {x.name: x for x in c.scenarios(transformers)}
    kept = names["penalties_drafts_g2"].components  # presence and frequency penalties: transformers has neither
    assert [k.params.repetition_penalty for k in kept] == [2.0] and "point_mass_g3" not in names
