"""The new peers' adapter logic without their engines: transformers' candidate generators' models and tokenizers,
OpenVINO GenAI's registration (certain outcomes). Runs need the engines: `nox -s peers-<engine>`.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch

pytest.importorskip("transformers", reason="the candidate generators are transformers' own")

from specref.conformance import peers  # noqa: E402
from specref.conformance.peers import suite  # noqa: E402
from specref.conformance.peers import transformers_candidates as tc  # noqa: E402
from specref.hf import forward, tiny  # noqa: E402

pytestmark = pytest.mark.exact


def test_word_level_tokenizer_maps_names_to_the_model_ids():
    tokenizer = tc.word_level_tokenizer({f"w{i}": i for i in range(16)})
    assert tokenizer("w3 w0 w15", add_special_tokens=False)["input_ids"] == [3, 0, 15]
    assert tokenizer.convert_ids_to_tokens([7]) == ["w7"]


def test_reindexed_assistant_is_the_draft_under_other_ids():
    _, draft = tiny.tiny_pair()
    assistant, assistant_tokenizer = tc.reindexed_assistant(draft)
    permutation = torch.tensor(tc.PERMUTATION)
    inverse = torch.argsort(permutation)  # target id -> assistant id
    context = torch.tensor([[3, 9, 0, 12, 5]])  # target ids
    draft_logits = forward.logits(draft, context)[0, -1]  # [16]
    assistant_logits = forward.logits(assistant, inverse[context])[0, -1]  # [20]
    torch.testing.assert_close(assistant_logits[: len(permutation)], draft_logits[permutation], rtol=1e-5, atol=1e-5)
    assert assistant.config.vocab_size == 16 + tc.EXTRA_TOKENS
    # the strings tie the two vocabularies: assistant id i is the target's token PERMUTATION[i]
    assert assistant_tokenizer.convert_ids_to_tokens([0, 1]) == [f"w{tc.PERMUTATION[0]}", f"w{tc.PERMUTATION[1]}"]
    assert assistant_tokenizer.convert_ids_to_tokens([16]) == ["x0"]


def test_early_exit_changes_the_llama_logits_but_would_not_change_gpt2s():
    """Why the early-exit row uses a Llama: GPT-2 runs every block whatever config.num_hidden_layers says."""
    context = torch.tensor([[3, 9, 0, 12]])
    for model, should_change in ((tc.tiny_llama(), True), (tiny.load_or_build(tiny.TARGET), False)):
        base = getattr(model, model.base_model_prefix)
        with torch.no_grad():
            full = model(context, use_cache=False).logits
        layers = base.config.num_hidden_layers
        base.config.num_hidden_layers = tc.EARLY_EXIT_LAYER
        try:
            with torch.no_grad():
                early = model(context, use_cache=False).logits
        finally:
            base.config.num_hidden_layers = layers
        assert (not torch.allclose(full, early)) == should_change, type(model).__name__


def test_new_peers_are_registered_with_their_rows():
    names = ("openvino-genai", "openvino-genai-plain", "transformers-prompt-lookup", "transformers-universal",
             "transformers-early-exit")  # fmt: skip
    for name in names:
        assert peers.peer(name).name == name and peers.peer(name).engine is not None
    assert peers.peer("openvino-genai").pip.startswith("pip install openvino-genai==2026.4.")


def test_openvino_row_says_how_to_install_when_absent(tmp_path, monkeypatch):
    if importlib.util.find_spec("openvino_genai") is not None:
        pytest.skip("openvino_genai imports here; this test is for environments without it")
    rows = suite.engine_rows(tmp_path, seed=0, budget_seconds=1, only={"openvino-genai"})
    assert [r.verdict for r in rows] == ["did not run"]
    assert "pip install openvino-genai==2026.4.1.0" in rows[0].why


def test_vllm_v2_inputs_lay_each_request_out_as_its_model_runner_does():
    from specref.conformance.peers.vllm_v2 import v2_inputs

    batch, gamma, vocab = 2, 3, 5
    target_probs = torch.full((batch, gamma + 1, vocab), 1 / vocab)
    draft_probs = torch.full((batch, gamma, vocab), 1 / vocab)
    draft_tokens = torch.tensor([[4, 1, 2], [0, 3, 3]])
    kw = v2_inputs(target_probs, draft_probs, draft_tokens)
    assert kw["draft_sampled"].tolist() == [0, 4, 1, 2, 0, 0, 3, 3]  # draft i of a request at row start + i + 1
    assert kw["cu_num_logits"].tolist() == [0, 4, 8]
    assert kw["expanded_idx_mapping"].tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert kw["expanded_local_pos"].tolist() == [0, 1, 2, 3, 0, 1, 2, 3]
    assert kw["target_logits"].shape == (8, vocab) and kw["draft_logits"].shape == (batch, gamma, vocab)
    torch.testing.assert_close(kw["target_logits"].softmax(-1), target_probs.reshape(8, vocab))
    assert kw["num_speculative_steps"] == gamma and kw["temperature"].tolist() == [1.0, 1.0]
