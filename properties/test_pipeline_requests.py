"""The pipeline contract's request-level checks (specref.conformance.pipeline.requests).

Exact: the counters invariant on hand-made rows, the binning, the independence test on tables whose answer is
known, and specref's request seeding (a seeded row alone, beside others and after others). Statistical: one run of a
correct pipeline through `run` (the request checks planned, the independence test at its alpha: its false-alarm rate
is the run's alpha, from the "requests" share), and each request-level mutant flagged by its own check (power: a
reused stream gives a diagonal table, X^2 = n (c - 1) at n = 192 pairs, p < 1e-40; a seed ignored in batches
leaves the SEEDED = 8 seeded rows beside others equal to their alone rows with probability below 1e-3 on the tiny
models; the EOS mutant miscounts on most rows whose EOS is an accepted draft, met in every call of 64 rows).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from budget import alpha_for

from specref.conformance import run
from specref.conformance.engine.calls import Caller
from specref.conformance.pipeline import requests
from specref.conformance.pipeline.contract import CONTRACT, PromptBatch, PromptScenario
from specref.mutants.requests import MUTANTS, caught_by, correct_eos, request_mutant

ALPHA = alpha_for("requests", 1)


@pytest.mark.exact
def test_counter_invariant_on_hand_made_rows():
    eos, n_new = 0, 4
    ok = {"drafted": 6, "accepted": 2, "steps": 2}
    assert requests.counter_violation(np.array([5, 6, 7, 0]), ok, n_new, eos) is None  # 2 + 2 = 4 emitted
    assert requests.counter_violation(np.array([5, 0, 0, 0]), {"drafted": 3, "accepted": 1, "steps": 1}, n_new,
                                      eos) is None  # EOS was the accepted draft: 2 = 1 + 1  # fmt: skip
    past_eos = {"drafted": 3, "accepted": 3, "steps": 1}  # a draft after the EOS counted
    assert "ended at EOS" in requests.counter_violation(np.array([5, 0, 0, 0]), past_eos, n_new, eos)
    assert "accepted <= drafted" in requests.counter_violation(np.array([5, 6, 7, 8]), {"drafted": 2, "accepted": 3,
                                                                "steps": 1}, n_new, None)  # fmt: skip
    assert "n_new" in requests.counter_violation(np.array([5, 6, 7, 8]), {"drafted": 3, "accepted": 0, "steps": 1},
                                                 n_new, None)  # fmt: skip
    assert "not a dict" in requests.counter_violation(np.array([5, 6, 7, 8]), None, n_new, None)


@pytest.mark.exact
def test_categories_cut_the_law_into_bins_of_about_equal_mass():
    law = np.array([0.4, 0.3, 0.2, 0.1])
    assert requests.categories(law, 10_000).tolist() == [0, 2, 4, 5]  # mass before: 0, .4, .7, .9 in sixths
    assert requests.categories(law, 20).max() == 1  # sqrt(20 / 5) = 2 bins


@pytest.mark.exact
def test_independence_test_on_known_tables():
    rng = np.random.default_rng(3)
    law = np.full(8, 1 / 8)
    first = rng.integers(0, 8, 600)
    same = requests.independence_result(first, first.copy(), law, 1e-3, "unseeded_independence[x]")
    assert not same.passed and same.p_value < 1e-50 and same.details["identical_pairs"] == 600
    other = requests.independence_result(first, rng.integers(0, 8, 600), law, 1e-6, "unseeded_independence[x]")
    assert other.tested and other.df == 25  # a 6 x 6 table
    one = requests.independence_result(np.zeros(50, np.int64), np.zeros(50, np.int64), law, 1e-3, "x[y]")
    assert not one.tested


@pytest.mark.exact
def test_specref_seeding_of_requests():
    pipeline = correct_eos()
    prompt = torch.tensor([list(pipeline.suggested_prompts[0])])
    alone = pipeline.generate(prompt, 3, [11])
    beside = pipeline.generate(prompt.repeat(4, 1), 3, [None, 11, None, 12])
    assert torch.equal(beside[1], alone[0]) and torch.equal(pipeline.generate(prompt, 3, [11]), alone)
    assert len(pipeline.counters()) == 1
    ignored = request_mutant("mutant-seed-ignored")
    alone = ignored.generate(prompt, 3, [11])
    assert torch.equal(ignored.generate(prompt, 3, [11]), alone)  # alone, the mutant keeps its seed
    with pytest.raises(ValueError, match="per-row seeds"):
        pipeline.generate(prompt, 3, [1, 2])


@pytest.mark.statistical
def test_a_correct_pipeline_passes_the_request_checks_through_run():
    # The independence test has its fixed 192 pairs whatever the rows (detectable TV about 0.37 at its alpha), so at
    # the default resolution floor (0.1) it is uninformative; this run asks for the resolution those pairs give.
    report = run(correct_eos(), seed=5, rows=64, alpha=ALPHA, resolution=0.5)
    checks = {c.name: c for c in report.checks}
    for kind in requests.NEEDS:
        assert checks[f"{kind}[prompt0]"].status == "passed", checks[f"{kind}[prompt0]"]
    independence = checks["unseeded_independence[prompt0]"]
    assert independence.details["tier"] == "T2" and 0.1 < independence.detectable_tv < 0.5
    assert report.verdict == "conforming"


@pytest.mark.exact
def test_a_pipeline_without_the_capabilities_has_them_planned_out():
    from specref.hf.pipelines import builtin_pipeline

    pipeline = builtin_pipeline("specref-generate")
    bare = type(pipeline)(pipeline.name, pipeline.generate, pipeline.exact_law, pipeline.vocab_size)
    tested, run_level, skipped = requests.plan(bare)
    assert (tested, run_level) == ([], []) and set(skipped) == set(requests.NEEDS)


@pytest.mark.statistical
@pytest.mark.parametrize("name", list(MUTANTS))
def test_each_request_mutant_is_flagged_by_its_check(name):
    pipeline = request_mutant(name)
    adapter = CONTRACT.wrap(pipeline)
    scenario = PromptScenario("prompt0", tuple(pipeline.suggested_prompts[0]),
                              pipeline.law_array(pipeline.suggested_prompts[0], 3))  # fmt: skip
    kind = caught_by(name)[0]
    kinds = [kind] + ([requests.INDEPENDENCE] if kind == requests.COUNTERS else [])  # counters ride on those calls
    with Caller(adapter, CONTRACT) as caller:
        results = requests.run_requests(caller, scenario, {f"{requests.INDEPENDENCE}[prompt0]": ALPHA}, kinds, 0,
                                        PromptBatch)  # fmt: skip
    by_kind = {r.name.split("[")[0]: r for r in results}
    assert by_kind[kind].status == "failed", by_kind[kind]
