"""T2: the reference and batched engines through every T0 and T2 check of the harness, at fixed N.

False alarms: the two runs share the "engines" budget (budget.py); inside a run the harness splits its alpha by
Bonferroni over the planned checks and re-verdicts by Holm. Power: on the batched engine every primary law check
must detect a TV of 0.02 with probability 0.999 (asserted through the records' detectable_tv, i.e. N >=
min_num_samples). The reference engine is a Python row loop, so CI affords it 0.04; it is tied to the batched
engine's stronger run by exact token-for-token coupling (test_batched_exact.py and the harness's coupling check).
The conditional checks (corrections, bonuses, rare strata) see fewer draws; the test prints their power.

Rows on the reference engine: each scenario gets about 5% more than its primary checks' largest need
(min_num_samples_chisquare at the check's run-time df and Bonferroni alpha; the largest is 16,421,
ragged_law[ragged_g6], df 21); the sample-size assertion fails if a check's df grows past what its rows serve. The
batched engine keeps 150,000 (about twice its largest need, 76,861, joint_law[joint_markov_g2], df 34), and the
extra rows give the conditional checks their power.

The rare-edge probe (probe_zero_ratio_g1) gets one call of rows here, not the 77 M rows it plans for power 0.99
against a 2^-24 event: those took 25 of the run's 34 s of CPU, and no assertion here reads the probe. The engines'
strict accept test and inverse CDF at u = 0 are shown exactly, on forced uniforms, by test_edge_probe_exact.py.
"""

from __future__ import annotations

import math

import pytest
from budget import alpha_for

from specref.conformance import builtin_adapters, run
from specref.conformance.chain.scenarios import PROBE, get
from specref.conformance.engine.check_words import kind_of
from specref.stats import min_num_samples_chisquare

pytestmark = pytest.mark.statistical

ALPHA_RUN = alpha_for("engines", 2)
# reject_rate is an exact binomial per position: its power statement is that of its least-reached position (the
# last), a conditional event, so it is printed with the conditional checks rather than held to the design TV.
PRIMARY = {"first_token_law", "batch_composition", "accepted_length_law", "joint_law", "ragged_law"}
SMALL_VOCAB = [
    "cf_dense_g4",
    "cf_zero_support_g3",
    "cf_disjoint_g2",
    "cf_equal_g8",
    "cf_near_equal_g4",
    "cf_one_hot_draft_g3",
    "markov_g1",
    "markov_g5",
    "markov_g8",
    "mixed_batch_g3",
    "ragged_g6",
    "point_mass_g4",
    "identical_rows_g2",
    "joint_markov_g2",
]
#: Rows per scenario on the reference engine: its primary checks' largest need (module doc) and about 5% more.
REFERENCE = {"cf_dense_g4": 16_500, "cf_zero_support_g3": 14_500, "markov_g5": 13_500, "ragged_g6": 17_500,
             "point_mass_g4": 13_000, "mixed_batch_g3": 16_000}  # fmt: skip


def _assert_conforms_with_power(report, primary_scenarios, target_tv):
    assert report.passed, report.summary()
    weak = []
    for r in report.checks:
        if r.details.get("tier") != "T2" or r.df == 0:
            continue
        scenario = r.name[r.name.index("[") + 1 : -1]
        bonferroni = r.details["holm"]["bonferroni_alpha"]
        if kind_of(r.name) in PRIMARY and scenario in primary_scenarios:
            assert r.detectable_tv <= target_tv, r.summary()
            assert r.n >= min_num_samples_chisquare(target_tv, bonferroni, 1e-3, r.df), r.summary()
        elif not math.isnan(r.detectable_tv) and r.detectable_tv > target_tv:
            weak.append(f"{r.name}: detects TV >= {r.detectable_tv:.3f} at n={r.n}")
    print("\n".join([f"checks below the {target_tv} design (conditional or rare events):", *weak]))


def test_reference_engine_conforms():
    """The pure-Python reference engine, a row loop: 13k-17.5k rows per scenario on the small-vocabulary scenarios."""
    report = run(builtin_adapters()["reference"](), seed=11, alpha=ALPHA_RUN, budget_seconds=900, rows=REFERENCE,
                 scenarios=list(REFERENCE))  # fmt: skip
    _assert_conforms_with_power(report, set(REFERENCE), target_tv=0.04)


def test_batched_engine_conforms():
    """The batched torch engine on every scenario, including V = 8193 and V = 151936."""
    rows = {name: 150_000 for name in SMALL_VOCAB} | {"large_v8193_g2": 20_000, "large_v151936_g1": 1_024}
    rows |= {"cf_one_hot_target_g3": 150_000, PROBE: get(PROBE).rows_per_call}
    report = run(builtin_adapters()["batched"](), seed=12, alpha=ALPHA_RUN, budget_seconds=900, rows=rows)
    assert set(report.scenarios) >= set(rows), "the batched engine declares every capability"
    _assert_conforms_with_power(report, set(SMALL_VOCAB), target_tv=0.02)
