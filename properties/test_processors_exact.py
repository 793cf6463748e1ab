"""The reference processor chains (specref.reference.processors): hand-computed cases of each step and of where the
chains differ, and the transformers chain against the installed transformers' own LogitsProcessorList, built by its
own `_get_logits_processor` from a GenerationConfig (so the order is the engine's), compared exactly in float64.
vLLM and llama.cpp are compared through recorded fixtures (peers/, issue 30's real-engine work)."""

from __future__ import annotations

import numpy as np
import pytest

from specref.errors import BadArgument
from specref.reference.processors import CHAINS, SUPPORTS, History, SamplingParams, processed_law, processed_logits

pytestmark = pytest.mark.exact

LAW = np.array([0.5, 0.3, 0.2])
LOGITS = np.log(LAW)


def _law(chain, logits=LOGITS, history=None, **params):
    return processed_law(chain, np.asarray(logits, dtype=np.float64), SamplingParams(**params), history or History())


@pytest.mark.parametrize("chain", CHAINS)
def test_no_parameters_is_the_softmax(chain):
    np.testing.assert_allclose(_law(chain), LAW, rtol=0, atol=1e-15)


@pytest.mark.parametrize("chain", CHAINS)
def test_top_k_one_and_greedy_are_one_hot_at_the_argmax(chain):
    assert _law(chain, top_k=1).tolist() == [1.0, 0.0, 0.0]
    assert _law(chain, temperature=0.0).tolist() == [1.0, 0.0, 0.0]
    assert _law(chain, [1.0, 2.0, 2.0], temperature=0.0).tolist() == [0.0, 1.0, 0.0]  # lowest id on ties


@pytest.mark.parametrize("chain", CHAINS)
def test_a_logit_bias_moves_the_argmax_of_a_greedy_row(chain):
    assert _law(chain, temperature=0.0, logit_bias=((2, 1.0),)).tolist() == [0.0, 0.0, 1.0]


@pytest.mark.parametrize("chain", CHAINS)
def test_top_p_that_keeps_one_token(chain):
    assert _law(chain, top_p=0.4).tolist() == [1.0, 0.0, 0.0]  # 0.5 alone reaches 0.4


@pytest.mark.parametrize("chain", CHAINS)
def test_masked_logits_stay_excluded(chain):
    law = _law(chain, [0.0, -np.inf, 0.0, -np.inf], temperature=0.5, top_p=0.99)
    assert law.tolist() == [0.5, 0.0, 0.5, 0.0]


def test_top_p_on_the_renormalised_top_k_rest_or_on_the_original_law():
    # top-k 2 keeps [0.5, 0.3]; renormalised [0.625, 0.375]: 0.625 >= 0.6 alone (vLLM, transformers, llama.cpp).
    # SGLang's plain sampler decides top-p on the original law: before 0.3 the mass is 0.5 <= 0.6, so 0.3 stays.
    for chain in ("vllm", "transformers", "llama.cpp"):
        assert _law(chain, top_k=2, top_p=0.6).tolist() == [1.0, 0.0, 0.0]
    np.testing.assert_allclose(_law("sglang", top_k=2, top_p=0.6), [0.625, 0.375, 0.0], rtol=1e-15)


def test_min_p_before_top_p_or_after_it():
    law = np.array([0.4, 0.3, 0.2, 0.1])
    # vLLM: min_p 0.3 removes 0.1 (< 0.12), then top-p 0.7 on the renormalised [4, 3, 2]/9: 4/9 < 0.7, 7/9 >= 0.7.
    np.testing.assert_allclose(_law("vllm", np.log(law), min_p=0.3, top_p=0.7), [4 / 7, 3 / 7, 0, 0], rtol=1e-14)
    # transformers: top-p 0.7 first on the whole law keeps [0.4, 0.3] (0.4 < 0.7 <= 0.7), min_p then removes none.
    # Same set here; with top_p 0.75 they part: vLLM's renormalised 7/9 >= 0.75 stops at two, transformers' 0.7 < 0.75
    # keeps a third (0.2), and min_p 0.6 on the kept [0.4, 0.3, 0.2] removes 0.2 (< 0.24) but keeps 0.3.
    np.testing.assert_allclose(_law("vllm", np.log(law), min_p=0.3, top_p=0.75), [4 / 7, 3 / 7, 0, 0], rtol=1e-14)
    np.testing.assert_allclose(_law("transformers", np.log(law), min_p=0.3, top_p=0.75), [4 / 9, 3 / 9, 2 / 9, 0],
                               rtol=1e-14)  # fmt: skip


def test_temperature_before_truncation_or_after_it():
    # At T = 2 the law [0.5, 0.3, 0.2] flattens to sqrt: [.7071, .5477, .4472]/1.702; top-p 0.6 then needs two
    # tokens (0.4155 < 0.6). llama.cpp decides top-p at T = 1, where 0.5 < 0.6 <= 0.8 also keeps two: same set.
    # min_p 0.5: at T = 2 (vLLM) 0.4472/0.7071 = 0.632 >= 0.5 keeps all three; at T = 1 (llama.cpp) 0.2 < 0.25 goes.
    flat = np.sqrt(LAW) / np.sqrt(LAW).sum()
    np.testing.assert_allclose(_law("vllm", temperature=2.0, min_p=0.5), flat, rtol=1e-14)
    kept = np.sqrt(LAW[:2]) / np.sqrt(LAW[:2]).sum()
    np.testing.assert_allclose(_law("llama.cpp", temperature=2.0, min_p=0.5), [*kept, 0], rtol=1e-14)


def test_penalties_by_hand_and_whose_tokens_they_count():
    logits = np.array([2.0, -1.0, 1.0, 0.5])
    history = History(prompt=(0,), output=(1, 2, 2))
    r = 2.0
    # repetition counts prompt and output in every chain that has it: 2 / 2, -1 * 2, 1 / 2; token 3 untouched
    expect = np.array([1.0, -2.0, 0.5, 0.5])
    for chain in ("vllm", "transformers", "llama.cpp"):
        got = processed_logits(chain, logits, SamplingParams(repetition_penalty=r), history)
        np.testing.assert_allclose(got, expect, rtol=0, atol=0)
    # presence 0.25 and frequency 0.5: vLLM over the output only (token 0 is in the prompt alone), llama.cpp over both
    params = SamplingParams(presence_penalty=0.25, frequency_penalty=0.5)
    np.testing.assert_allclose(processed_logits("vllm", logits, params, history),
                               [2.0, -1.0 - 0.75, 1.0 - 1.25, 0.5], rtol=0, atol=0)  # fmt: skip
    np.testing.assert_allclose(processed_logits("llama.cpp", logits, params, history),
                               [2.0 - 0.75, -1.0 - 0.75, 1.0 - 1.25, 0.5], rtol=0, atol=0)  # fmt: skip


def test_penalties_see_the_drafts_the_history_was_extended_with():
    logits = np.array([1.0, 1.0, 0.0])
    params = SamplingParams(frequency_penalty=1.0)
    before = processed_law("vllm", logits, params, History())
    after = processed_law("vllm", logits, params, History().extended([0]))
    assert before[0] == before[1] and after[0] < after[1]
    assert History((1,), (2,)).extended(np.array([3, 4])) == History((1,), (2, 3, 4))


def test_allowed_token_ids():
    assert _law("vllm", allowed_token_ids=(1, 2)).tolist() == pytest.approx([0.0, 0.6, 0.4], abs=1e-15)


def test_each_chain_refuses_what_it_lacks_and_bad_values_are_named():
    for chain, supported in SUPPORTS.items():
        for name, value in (("presence_penalty", 0.5), ("allowed_token_ids", (0,)), ("repetition_penalty", 1.2)):
            if name not in supported:
                with pytest.raises(BadArgument, match=name):
                    _law(chain, **{name: value})
    for params, word in (
        (dict(temperature=-1.0), "temperature"),
        (dict(top_p=0.0), "top_p"),
        (dict(logit_bias=((7, 1.0),)), "token ids"),
        (dict(allowed_token_ids=()), "allowed"),
    ):
        with pytest.raises(BadArgument, match=word):
            _law("vllm", **params)  # fmt: skip
    with pytest.raises(BadArgument, match="chain='nope'"):
        _law("nope")
    with pytest.raises(BadArgument, match="exclude every token"):
        _law("vllm", [0.0, -np.inf, -np.inf], allowed_token_ids=(1, 2))


# --- transformers, by its own code ------------------------------------------------------------------------------------


def _transformers_law(logits: np.ndarray, params: SamplingParams, history: History) -> np.ndarray:
    """The law of transformers' own processors, in the order its `_get_logits_processor` builds them."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    v = logits.size
    config = transformers.GPT2Config(vocab_size=v, n_layer=1, n_embd=8, n_head=2, n_positions=64, bos_token_id=0,
                                     eos_token_id=0)  # fmt: skip
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config)
    greedy = params.temperature == 0
    allowed = params.allowed_token_ids
    generation = transformers.GenerationConfig(
        do_sample=not greedy, temperature=None if greedy else params.temperature, top_k=params.top_k or None,
        top_p=params.top_p if params.top_p < 1 else None, min_p=params.min_p or None,
        repetition_penalty=params.repetition_penalty if params.repetition_penalty != 1 else None,
        sequence_bias={(t,): b for t, b in params.logit_bias} or None,
        suppress_tokens=None if allowed is None else [t for t in range(v) if t not in allowed],
        eos_token_id=None, bos_token_id=None, pad_token_id=None,
    )  # fmt: skip
    input_ids = torch.tensor([list(history.prompt + history.output) or [0]])
    processors = model._get_logits_processor(generation_config=generation, input_ids_seq_length=input_ids.shape[1],
                                             encoder_input_ids=input_ids, prefix_allowed_tokens_fn=None,
                                             logits_processor=transformers.LogitsProcessorList(),
                                             device="cpu")  # fmt: skip
    scores = processors(input_ids, torch.from_numpy(logits.copy())[None, :])[0]
    if greedy:
        out = torch.zeros(v, dtype=torch.float64)
        out[int(scores.argmax())] = 1.0
        return out.numpy()
    return torch.softmax(scores, -1).numpy()


_CASES = [
    SamplingParams(),
    SamplingParams(temperature=0.7, top_k=5),
    SamplingParams(temperature=1.3, top_p=0.8),
    SamplingParams(temperature=1.5, top_k=8, top_p=0.9, min_p=0.05),
    SamplingParams(temperature=2.0, min_p=0.1, top_p=0.95),
    SamplingParams(temperature=0.0, logit_bias=((3, 2.5), (7, -1.0))),
    SamplingParams(repetition_penalty=1.5, temperature=0.8),
    SamplingParams(repetition_penalty=0.7, top_k=4, allowed_token_ids=(0, 2, 3, 5, 8, 9, 11)),
    SamplingParams(temperature=0.0, repetition_penalty=1.8, logit_bias=((1, 0.5),)),
    SamplingParams(top_k=1),
    SamplingParams(top_p=0.05),
]


@pytest.mark.parametrize("case", range(len(_CASES)))
def test_transformers_chain_equals_transformers_own_processors(case):
    rng = np.random.default_rng(case)
    logits = rng.normal(0, 2, 12)
    logits[rng.integers(12)] = -np.inf
    history = History(prompt=tuple(rng.integers(0, 12, 3).tolist()), output=tuple(rng.integers(0, 12, 4).tolist()))
    params = _CASES[case]
    ours = processed_law("transformers", logits, params, history)
    theirs = _transformers_law(logits, params, history)
    assert ((ours > 0) == (theirs > 0)).all(), (ours, theirs)
    np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-15)


def test_the_transformers_engine_parts_from_the_vllm_chain_where_min_p_and_top_p_meet():
    rng = np.random.default_rng(4)
    logits = rng.normal(0, 2, 12)
    logits[rng.integers(12)] = -np.inf
    history = History(prompt=tuple(rng.integers(0, 12, 3).tolist()), output=tuple(rng.integers(0, 12, 4).tolist()))
    params = _CASES[4]  # min_p with top_p: vLLM applies min_p first, transformers after top-p
    theirs = _transformers_law(logits, params, history)
    assert ((processed_law("vllm", logits, params, history) > 0) != (theirs > 0)).any()
