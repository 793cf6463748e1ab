"""End-to-end checks on the tiny transformers models (reduced CI version of `python -m specref.e2e`).

Deterministic checks first (processors against transformers' warpers, left padding, the exact law's chain rule,
bit-for-bit rebuild, ragged rows), then two statistical checks sharing the e2e area's budget: specref's speculative
generation follows the target's processed law, and a processor-mismatch mutant is flagged. The models are built
on first use (a few seconds of training) and cached under $SPECREF_CACHE/models (default ~/.cache/specref/models).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from budget import alpha_for  # noqa: E402
from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper  # noqa: E402

from specref.hf import forward, pipelines, rebuild, target_law, tiny  # noqa: E402
from specref.hf.generation import SpecConfig, speculative_generate  # noqa: E402
from specref.hf.lawcheck import law_check  # noqa: E402
from specref.hf.processors import Processors  # noqa: E402
from specref.stats import min_num_samples_chisquare  # noqa: E402

STAT_CHECKS = 2  # statistical checks in this file, for the e2e share of the budget
ALPHA = alpha_for("e2e", STAT_CHECKS)
BETA = 1e-3
DETECT_TV = 0.1  # each law check must detect TV >= 0.1 on the merged bins with power 1 - BETA
N_NEW, GAMMA = 2, 2
SETTING = Processors(temperature=0.8, top_k=5)


@pytest.fixture(scope="module")
def models():
    return tiny.tiny_pair()


@pytest.mark.exact
@pytest.mark.parametrize("setting", [Processors(0.7), Processors(1.0, top_k=5), Processors(0.9, top_k=4, top_p=0.8)])
def test_processors_match_transformers_warpers(setting):
    logits = torch.randn(64, 16, generator=torch.Generator().manual_seed(3)) * 3  # [N, V]
    warpers = LogitsProcessorList([TemperatureLogitsWarper(setting.temperature)])
    if setting.top_k is not None:
        warpers.append(TopKLogitsWarper(setting.top_k))
    if setting.top_p is not None:
        warpers.append(TopPLogitsWarper(setting.top_p))
    expected = warpers(torch.zeros(64, 1, dtype=torch.long), logits.clone())
    ours = setting.logits(logits)
    assert torch.equal(torch.isinf(ours), torch.isinf(expected))
    torch.testing.assert_close(ours[~torch.isinf(ours)], expected[~torch.isinf(expected)])


@pytest.mark.exact
def test_left_padding_matches_unpadded_forward(models):
    target, _ = models
    rows = [[3, 1, 4, 1, 5], [9, 2], [6, 5, 3, 5]]
    input_ids, attention_mask = forward.left_pad(rows)
    padded = forward.logits(target, input_ids, attention_mask)  # [3, 5, V]
    for i, row in enumerate(rows):
        alone = forward.logits(target, torch.tensor([row]))[0]  # [len, V]
        torch.testing.assert_close(padded[i, -len(row) :], alone, atol=1e-5, rtol=1e-5)


@pytest.mark.exact
def test_exact_law_is_the_chain_rule_of_the_model(models):
    target, _ = models
    prompt = [7, 8, 4, 11]
    law = target_law.continuation_law(target, prompt, 2, SETTING)  # [V, V]
    assert law.sum() == pytest.approx(1.0, abs=1e-12)
    assert np.count_nonzero(law) <= 25  # top-5 at each of the two positions
    for x1, x2 in [(int(np.argmax(law.sum(1))), 0), (3, 5)]:
        p1 = SETTING.probs(forward.logits(target, torch.tensor([prompt]))[0, -1])
        p2 = SETTING.probs(forward.logits(target, torch.tensor([prompt + [x1]]))[0, -1])
        assert law[x1, x2] == pytest.approx(float(p1[x1] * p2[x2]), rel=1e-5, abs=1e-12)


@pytest.mark.exact
def test_draft_rebuilds_bit_for_bit(tmp_path):
    first = tiny.load_or_build(tiny.DRAFT, cache=tmp_path / "a")
    second = tiny.load_or_build(tiny.DRAFT, cache=tmp_path / "b")
    reloaded = tiny.load_or_build(tiny.DRAFT, cache=tmp_path / "a")  # from save_pretrained
    assert rebuild.same_weights(first, second) and rebuild.same_weights(first, reloaded)


@pytest.mark.exact
def test_a_model_two_builders_miss_at_once_is_built_once(tmp_path):
    """As pytest-xdist workers on a cold cache: the second waits for the first's build and loads it."""
    builds = []

    class Saved:  # what `tiny.cached` uses of a model
        def save_pretrained(self, path):
            Path(path).mkdir()
            (Path(path) / "config.json").write_text("{}")

        def eval(self):
            return self

    def build():
        builds.append(1)
        time.sleep(0.3)  # both miss before either saves, unless the lock holds the second back
        return Saved()

    with ThreadPoolExecutor(2) as pool:
        list(pool.map(lambda _: tiny.cached(tmp_path / "model", Saved, build), range(2)))
    assert builds == [1] and (tmp_path / "model" / "config.json").is_file()


@pytest.mark.exact
def test_ragged_rows_keep_every_emitted_token(models):
    """A verify that emits a context-dependent count (1..g+1) per row: batched output equals one-row runs."""
    target, draft = models

    def ragged_verify(target_probs, draft_probs, draft_tokens, generator):  # deterministic given the context
        best = target_probs[:, 0].argmax(-1)  # [B]  p_1 depends on the context only
        count = best % (draft_tokens.shape[1] + 1) + 1
        tokens = torch.full((len(best), draft_tokens.shape[1] + 1), -1, dtype=torch.long)
        for i, (token, k) in enumerate(zip(best.tolist(), count.tolist(), strict=True)):
            tokens[i, :k] = token
        return tokens

    prompts = tiny.sample_prompts(6, 4, seed=17)
    config = SpecConfig(3, Processors())
    batched = speculative_generate(
        target, draft, prompts, 9, config, torch.Generator().manual_seed(0), verify=ragged_verify
    )
    for i in range(len(prompts)):
        alone = speculative_generate(
            target, draft, prompts[i : i + 1], 9, config, torch.Generator().manual_seed(1), verify=ragged_verify
        )
        assert batched[i].tolist() == alone[0].tolist()


def _samples(adapter, n_samples: int, seed: int) -> tuple[torch.Tensor, np.ndarray]:
    prompt = [7, 8, 4, 11]
    samples = adapter.generate(torch.tensor([prompt] * n_samples), N_NEW, seed)
    return samples, adapter.law_array(prompt, N_NEW)


def _n_samples() -> int:
    # df <= support - 1 = 5^2 - 1 (top-k 5 at two positions; the mutant below has top-k 6: 35); more df, more N
    return min_num_samples_chisquare(DETECT_TV, ALPHA, BETA, 35)


@pytest.mark.statistical
def test_speculative_generation_follows_the_target_law(models):
    target, draft = models
    adapter = pipelines.specref_pipeline(target, draft, SpecConfig(GAMMA, SETTING))
    n_samples = _n_samples()
    samples, law = _samples(adapter, n_samples, seed=11)
    result = law_check(samples, law, alpha=ALPHA, name=adapter.name, beta=BETA)
    assert result.df <= 35, "N was sized for df <= 35 (_n_samples)"
    assert result.detectable_tv <= DETECT_TV
    assert result.passed, result.to_dict()


@pytest.mark.statistical
def test_processor_mutant_is_flagged(models):
    """Drafts sampled from processed q, accept ratio from q before processing: the law check must fail.

    Miss risk: the check detects TV >= DETECT_TV (plus merged hidden mass) with probability 1 - BETA; this mutant's
    empirical TV measured by `nox -s e2e` is 0.25 (reports/e2e/e2e.md), so a miss has probability <= BETA unless
    merging hides more than 0.15 of it.
    """
    target, draft = models
    mutant = pipelines.mutant_pipelines(target, draft, GAMMA)[0]
    n_samples = _n_samples()
    samples, law = _samples(mutant, n_samples, seed=12)
    result = law_check(samples, law, alpha=ALPHA, name=mutant.name, beta=BETA)
    assert result.detectable_tv <= DETECT_TV
    assert not result.passed, result.to_dict()
