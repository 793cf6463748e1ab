"""Verdicts that must never be wrong: low-precision verifiers, lossless rules other than exact, lossy adapters.

Each case was misjudged once: a correct bf16 verifier was called non-conforming (the harness expected the float64
laws), a sample-and-match verifier failed first_token_law (rows were dropped by a rule-specific T0 check before the
law checks), and an adapter declared lossy that raised was called "lossy by configuration".

False alarms: RUNS runs must pass their statistical checks; each gets the family-wise alpha
alpha_for("verdicts", RUNS). Power: the undeclared sample-and-match verifier must fail its rule checks; at 20000 rows
the reject rates differ by more than 0.1 on cf_dense_g4, where the exact binomial detects 0.02 with power 0.999.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
from budget import alpha_for
from cli_in_process import conform

from specref.conformance import Adapter, run
from specref.conformance.chain.adapters import as_adapter
from specref.conformance.engine.report import LOSSY, NON_CONFORMING, lossless

IMPLS = Path(__file__).parent / "external_impls"
sys.path.insert(0, str(IMPLS))
import low_precision  # noqa: E402
import sample_and_match  # noqa: E402

RUNS = 4  # bf16, fp16, match declared (API), match declared (CLI) -- the undeclared run must fail
ALPHA = alpha_for("verdicts", RUNS)
SCENARIOS = ["cf_dense_g4", "cf_zero_support_g3", "cf_near_equal_g4", "cf_small_residual_g4", "cf_equal_g8",
             "markov_g5", "mixed_batch_g3", "identical_rows_g2", "joint_markov_g2"]  # fmt: skip
ROWS = 20_000


def _run(verifier, seed):
    return run(verifier, seed=seed, budget_seconds=300, alpha=ALPHA, scenarios=SCENARIOS, rows=ROWS)


@pytest.mark.statistical
@pytest.mark.parametrize("verifier", [low_precision.BF16, low_precision.FP16], ids=lambda v: v.name)
def test_a_correct_low_precision_verifier_conforms(verifier):
    report = _run(verifier, seed=3)
    assert report.passed, report.summary()
    assert report.to_dict()["adapter"]["dtype"] == str(verifier.dtype)


@pytest.mark.statistical
def test_declared_sample_and_match_is_lossless():
    report = _run(sample_and_match.VERIFIER, seed=4)
    assert report.passed, report.summary()
    assert report.verdict == lossless("match")


@pytest.mark.statistical
def test_undeclared_sample_and_match_keeps_the_law_but_not_the_exact_rule():
    report = _run(sample_and_match.verify, seed=5)
    assert report.verdict == NON_CONFORMING
    assert report.law_kept, report.summary()
    failed = {r.name.split("[")[0] for r in report.failures}
    assert {"reject_rate", "t0_residual_support"} <= failed
    assert not failed & {"first_token_law", "batch_composition", "joint_law"}, "no law check may fail"
    assert report.rule_diagnosis["rules"]["match"]["matches"], report.rule_diagnosis
    assert 0 < report.rule_diagnosis["acceptance_ratio"] < 1
    words = report.summary()
    assert "output law kept; acceptance does not follow 'exact'" in words and "matches rule 'match'" in words


@pytest.mark.statistical
def test_cli_exit_codes_follow_the_declared_rule(tmp_path, capsys):
    """Declared: exit 0, verdict 'lossless (declared rule match)'. Undeclared: exit 1, law kept (power as above)."""
    base = ["--seed", "6", "--rows", "8000", "--budget-seconds", "200", "--alpha", f"{ALPHA:.6g}", "--no-plots",
            "--scenarios", "cf_dense_g4,markov_g5"]  # fmt: skip
    code, out, err = conform(f"{IMPLS / 'sample_and_match.py'}:VERIFIER", *base, "--report", str(tmp_path / "d"),
                             "--json", str(tmp_path / "d.json"), cwd=tmp_path, capsys=capsys)  # fmt: skip
    assert code == 0, out + err
    assert json.loads((tmp_path / "d.json").read_text())["verdict"] == lossless("match")
    code, out, err = conform(f"{IMPLS / 'sample_and_match.py'}:verify", *base, "--report", str(tmp_path / "u"),
                             cwd=tmp_path, capsys=capsys)  # fmt: skip
    assert code == 1, out + err
    assert "output law kept; acceptance does not follow 'exact'" in out


def _raises(target_probs, draft_probs, draft_tokens, generator):
    raise RuntimeError("boom")


def _emits_id_v(target_probs, draft_probs, draft_tokens, generator):
    batch, gamma = draft_tokens.shape
    out = torch.full((batch, gamma + 1), -1, dtype=torch.int64)
    out[:, 0] = target_probs.shape[-1]  # id == V: a broken invariant, whatever the rule's law
    return out


@pytest.mark.exact
@pytest.mark.parametrize("verify", [_raises, _emits_id_v], ids=["raises", "emits_id_v"])
def test_lossy_never_excuses_a_crash_or_a_broken_invariant(verify):
    """Lossy describes a law (emitting a p = 0 token is part of some lossy laws); a crash or a bad id never is."""
    adapter = Adapter("lossy-but-broken", verify, lossy=True)
    report = run(adapter, seed=0, budget_seconds=60, scenarios=["cf_zero_support_g3"], rows=512)
    assert report.verdict == NON_CONFORMING, report.summary()
    assert report.verdict != LOSSY


@pytest.mark.exact
def test_checks_that_cannot_fail_spend_no_alpha_and_are_not_passes():
    from specref.conformance.chain.adapters import reference_adapter

    report = run(reference_adapter(), seed=0, budget_seconds=60, scenarios=["cf_disjoint_g2"], rows=300)
    untested = [r for r in report.checks if "not_tested" in r.details]
    assert {r.name for r in untested} >= {"correction_law[cf_disjoint_g2]", "reject_rate[cf_disjoint_g2]"}
    assert all(r.alpha == 0 and r.details["tier"] == "none" for r in untested)
    assert "not tested (could not fail)" in report.summary()
    tested_t2 = [r for r in report.checks if r.details.get("tier") == "T2"]
    assert [r.name for r in tested_t2] == ["first_token_law[cf_disjoint_g2]"]
    assert tested_t2[0].alpha == pytest.approx(report.alpha), "the whole budget goes to the one real test"


@pytest.mark.exact
def test_holm_family_size_is_fixed_by_the_plan_not_the_data():
    """Issue 20 item 8: at 300 rows, 3 of the 12 planned T2 checks turn "not tested (df = 0)" at run time (strata
    merged to one bin). They keep their slots: m = 12, as planned, not the 9 tested (before: m = 9)."""
    from specref.conformance.chain.adapters import reference_adapter
    from specref.conformance.contracts import contract
    from specref.conformance.engine.run_plan import make_plan

    adapter, scenarios = reference_adapter(), ["cf_near_equal_g4", "cf_dense_g4"]
    planned = make_plan(adapter, scenarios, 1e-3, contract("chain")).alphas
    report = run(adapter, seed=0, budget_seconds=60, scenarios=scenarios, rows=300, alpha=1e-3)
    t2 = [r for r in report.checks if r.details.get("tier") == "T2"]
    assert sorted(r.name for r in t2) == sorted(planned)
    untested = [r for r in t2 if not r.tested]
    assert untested and all(r.status == "not tested" and r.alpha == 0 for r in untested)
    assert all(r.details["not_tested"].startswith("not tested") for r in untested)
    sizes = {r.details["holm"]["family_size"] for r in t2 if r.tested}
    assert sizes == {len(planned)}
    smallest = min((r for r in t2 if r.tested), key=lambda r: r.p_value)
    assert smallest.alpha == pytest.approx(1e-3 / len(planned))


@pytest.mark.exact
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_an_empty_residual_bug_is_reached_in_every_dtype(dtype):
    """cf_near_equal_g4's rows round to p == q in bf16 (Z = 0, so no residual is ever drawn); the dyadic rows of
    cf_small_residual_g4 keep Z = 3 * 2^-9 in every dtype, so a verifier that mishandles a tiny residual meets one."""
    from dataclasses import replace

    from specref.mutants import CATALOGUE

    adapter = replace(as_adapter(CATALOGUE["empty_residual_out_of_vocab"]), dtype=dtype)
    report = run(adapter, seed=0, budget_seconds=60, scenarios=["cf_small_residual_g4"], rows=4096)
    failed = {r.name for r in report.checks if not r.passed}
    # ~96 residual draws at 4096 rows; each emits id V, so the T0 check fails with certainty (0.9941^16384 < 1e-40)
    assert "t0_valid_ids[cf_small_residual_g4]" in failed, report.summary()
