"""The deterministic edge probe (specref.conformance.edge_probe): u = 0 edges shown in one call, honestly worded.

Each verifier below is run through the harness's Caller with forced generator states. Verifiers with the edge are
caught, with the edge named and its line located; correct ones pass; ones the probe cannot reach (their own RNG,
a seed drawn from the generator, CUDA) are "not shown", never passed; a failure that needs several zeros at once
is not counted; a failure that happens without any forced zero is not called a rare edge.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from specref.conformance import run
from specref.conformance.chain.adapters import Adapter, as_adapter, builtin_adapters, contract_output, seeds_from
from specref.conformance.chain.form import call_inputs
from specref.conformance.chain.probe import DESIGN
from specref.conformance.cli import EXIT_CONFORMING, EXIT_NON_CONFORMING, _write_and_tell
from specref.conformance.contracts import contract
from specref.conformance.edge_probe import probe_batch
from specref.conformance.edges.probe import EDGES, ROWS, edge_probe
from specref.conformance.engine.calls import Caller
from specref.conformance.engine.report import RARE_EDGE
from specref.conformance.peers.findings import known_verdict
from specref.conformance.report.render import render_markdown
from specref.forced import forced_state
from specref.mutants import CATALOGUE
from specref.stats import ErrorBudget

pytestmark = pytest.mark.exact


def _probe(adapter: Adapter, seed: int = 0, mode: str = "inline"):
    with Caller(adapter, contract(adapter), mode=mode) as caller:
        return caller.contract.edge_probe(caller, seed, timeout=lambda: 120.0)


def _verdicts(probe) -> dict[str, str]:
    out = {}
    for r in probe.results:
        edge = r.name.split("[")[1][:-1]
        out[edge] = "not tested" if "not_tested" in r.details else ("pass" if r.passed else "FAIL")
    return out


def _fp32_then_own_rng(target_probs, draft_probs, draft_tokens, generator):
    """u <= p/q, but on numpy uniforms: the forced stream never reaches it."""
    rng = np.random.Generator(np.random.PCG64(int(seeds_from(generator, 1)[0])))
    u = torch.from_numpy(rng.random(draft_tokens.shape[0]))
    return _accept_le_rows(target_probs, draft_probs, draft_tokens, u)


def _accept_le_rows(target_probs, draft_probs, draft_tokens, u):
    rows = []
    for b in range(draft_tokens.shape[0]):
        d = int(draft_tokens[b, 0])
        accepted = float(u[b]) <= float(target_probs[b, 0, d] / draft_probs[b, 0, d])
        rows.append([d, 1] if accepted else [1])
    return contract_output(rows, 1)


def _all_zero_only(target_probs, draft_probs, draft_tokens, generator):
    """Correct unless all four float32 uniforms of a row are 0 (an event of probability 2^-96: never in nature)."""
    u = torch.rand(draft_tokens.shape[0], 4, generator=generator)
    reference = builtin_adapters()["batched"]().verify
    out = reference(target_probs, draft_probs, draft_tokens, torch.Generator().manual_seed(1))
    out[(u == 0).all(1), 0] = 0
    out[(u == 0).all(1), 1] = -1
    return out


@pytest.mark.parametrize("name", ["reference", "batched", "batched-block"])
def test_correct_engines_pass_every_edge_check(name):
    probe = _probe(builtin_adapters()[name]())
    assert _verdicts(probe) == {"accept": "pass", "correction": "pass", "bonus": "pass"}
    assert not probe.summary["edges"] and "not_shown" not in probe.summary
    if name == "reference":  # float64 uniforms: forced float32 zeros never reach them, so it is given a 0 directly
        assert all(b == {"injected": True} for b in probe.summary["batches"].values())
    else:
        assert all(b["outputs_read"] >= ROWS for b in probe.summary["batches"].values())


@pytest.mark.parametrize(
    ("mutant", "expected"),
    [
        ("accept_le_fp32", {"accept": "FAIL", "correction": "not tested", "bonus": "pass"}),
        ("inverse_cdf_left_search", {"accept": "pass", "correction": "FAIL", "bonus": "FAIL"}),
        ("inverse_cdf_from_first_token", {"accept": "pass", "correction": "FAIL", "bonus": "FAIL"}),
    ],
)
def test_edge_mutants_are_caught_in_one_forced_output(mutant, expected):
    probe = _probe(as_adapter(CATALOGUE[mutant]))
    assert _verdicts(probe) == expected
    for key, edge in probe.summary["edges"].items():
        assert "2^-24" in edge["words"] and "bugs.py" in edge["words"], edge["words"]
        # the snippet's call: one forced output alone shows it
        batch = probe_batch(edge["batch"], torch.float32, ROWS, 0)
        args, kwargs = call_inputs(batch, edge["generator_seed"], generator_state=forced_state([edge["output"]],
                                   seed=edge["generator_seed"]))  # fmt: skip
        row = CATALOGUE[mutant].verify(*args, **kwargs)[edge["row"]].tolist()
        target = batch.target_probs[edge["row"]]
        emitted = [(i, t) for i, t in enumerate(row) if t >= 0]
        assert any(target[i, t] == 0 for i, t in emitted), (key, row)


def test_transformers_kernel_edge_is_named_with_its_line():
    """transformers 5.24.0 and before: `r_i <= probability_ratio`; 5.25.0 made it strict (peers/findings.py), and the
    probe must then pass it: the expectation follows the installed release, so a test of each release can fail."""
    pytest.importorskip("transformers")
    probe = _probe(builtin_adapters()["transformers"](), mode="process")
    if known_verdict("transformers") == "conforming":
        assert _verdicts(probe)["accept"] == "pass", probe.summary["edges"]["accept"]["words"]
        return
    assert _verdicts(probe)["accept"] == "FAIL"
    words = probe.summary["edges"]["accept"]["words"]
    assert "accepts a zero-probability draft" in words and "2^-24 per accept test" in words
    assert "generation/utils.py" in words and "r_i <= probability_ratio" in words
    # and its fix, that line made strict (was: the line alone)
    assert "known defect class: a non-strict accept test; use `u < p/q`; at " in words, words
    assert "`is_accepted = r_i < probability_ratio`" in words, words


def _seed_per_row(target_probs, draft_probs, draft_tokens, generator):
    """u <= p/q on float32 uniforms from one generator per row, seeded from the harness's (vLLM's per-request
    generators): it reads 2 outputs per row, none of them a uniform; the generators it makes and seeds are reached."""
    u = torch.stack([torch.rand((), generator=torch.Generator().manual_seed(s))
                     for s in seeds_from(generator, draft_tokens.shape[0])])  # fmt: skip
    return _accept_le_rows(target_probs, draft_probs, draft_tokens, u)


_MADE_BEFORE = torch.Generator()


def _seed_one_made_before(target_probs, draft_probs, draft_tokens, generator):
    """u <= p/q on a generator made before the call, seeded from the harness's: out of reach (its method is C's)."""
    _MADE_BEFORE.manual_seed(seeds_from(generator, 1)[0])
    return _accept_le_rows(target_probs, draft_probs, draft_tokens, torch.rand(draft_tokens.shape[0],
                                                                               generator=_MADE_BEFORE))  # fmt: skip


def test_a_verifier_the_forced_stream_cannot_reach_is_not_shown_never_passed():
    probe = _probe(Adapter("own-rng", _fp32_then_own_rng))
    assert set(_verdicts(probe).values()) == {"not tested"}
    assert probe.summary["not_shown"].startswith("rare edge not shown: the verifier drew 1 seed from the generator")
    numpy_rng = _probe(Adapter("numpy", lambda t, d, x, g: _accept_le_rows(t, d, x, np.random.default_rng(0).random(
        x.shape[0]))))  # fmt: skip
    assert numpy_rng.summary["not_shown"].startswith("rare edge not shown: the verifier read 0 outputs")
    before = _probe(Adapter("made-before", _seed_one_made_before))
    assert set(_verdicts(before).values()) == {"not tested"} and "drew 1 seed" in before.summary["not_shown"]
    cuda = _probe(Adapter("on-cuda", _fp32_then_own_rng, device="cuda"), mode="thread")
    assert set(_verdicts(cuda).values()) == {"not tested"} and "Philox" in cuda.summary["not_shown"]
    for unreached in (probe, cuda):  # report.json carries it, so report.md and the terminal say it
        assert unreached.results[-1].details["forced_probe"]["not_shown"] == unreached.summary["not_shown"]
    report = run(Adapter("own-rng", _fp32_then_own_rng), scenarios=["probe_zero_ratio_g1"], rows=512)
    said = [line.strip() for line in report.summary().splitlines() if "rare edge not shown" in line]
    assert len(said) == 1 and said[0].startswith(probe.summary["not_shown"] + "; statistical probe's detection ")
    assert f"- {probe.summary['not_shown']}." in render_markdown({**report.to_dict(), "spec": "x:y"})


def test_a_pipeline_is_not_shown_with_the_reason_and_the_kernel_that_is_probed():
    from specref.conformance.pipeline.contract import PIPELINE_CONTRACT, PipelineRun

    pipeline = type("Pipeline", (), {"kernel": "transformers"})()
    caller = type("Caller", (), {"adapter": PipelineRun("p", verify=None, pipeline=pipeline)})()
    probe = PIPELINE_CONTRACT.edge_probe(caller, 0)
    assert set(_verdicts(probe).values()) == {"not tested"} and not any(r.passed and r.tested for r in probe.results)
    why = probe.results[-1].details["forced_probe"]["not_shown"]
    assert why.startswith("rare edge not shown: a whole pipeline drafts from its own models")
    assert why.endswith("probed on its own: specref conform transformers")


def test_a_failure_that_needs_several_zeros_at_once_is_not_counted():
    probe = _probe(Adapter("all-zero-only", _all_zero_only))
    assert _verdicts(probe) == {"accept": "pass", "correction": "pass", "bonus": "pass"}
    assert any("several forced zeros" in note for note in probe.summary["not_counted"])


def test_a_common_failure_is_not_called_a_rare_edge():
    probe = _probe(as_adapter(CATALOGUE["softmax_residual"]))
    edge = probe.summary["edges"]["correction"]
    assert edge["natural"] and "without any forced zero" in edge["words"] and "2^-24" not in edge["words"]


def test_a_run_gives_the_rare_edge_verdict_and_the_exit_code_follows_allow_edge(tmp_path, capsys):
    report = run(CATALOGUE["accept_le_fp32"], scenarios=["cf_dense_g4"], rows=2048, budget_seconds=60)
    assert report.verdict == RARE_EDGE and not report.passed
    assert report.caught_by() == ["rare_edge"]
    assert "accepts a zero-probability draft" in report.summary()
    text = render_markdown({**report.to_dict(), "spec": "specref.mutants.bugs:accept_le_fp32"})
    assert "## Rare edges (u = 0)" in text and "output law otherwise exact" in text
    assert "forced_state([" in text and "Statistical probe: not in this run's scenarios" in text
    for allow, code in ((False, EXIT_NON_CONFORMING), (True, EXIT_CONFORMING)):
        assert _write_and_tell(report, tmp_path / str(allow), "x", None, plots=False, stream=None,
                               allow_edge=allow) == code  # fmt: skip
    clean = run(builtin_adapters()["batched"](), scenarios=["cf_dense_g4"], rows=2048, budget_seconds=60)
    assert clean.passed and "No rare edge shown" in render_markdown(clean.to_dict())


def test_injected_uniforms_show_the_edges_where_the_generator_cannot_be_forced():
    # the CUDA path (Philox cannot be forced): an adapter declaring `uniforms` is given a 0 in one column at a time
    def injected(name, verify):
        with Caller(
            Adapter(name, verify, uniforms=True, uniform_dtype=torch.float32), contract("chain"), mode="inline"
        ) as caller:
            return edge_probe(caller, 0, lambda: 120.0, DESIGN, inject=True)

    from specref.batched import verify as batched_verify
    from specref.mutants import bugs

    assert _verdicts(injected("batched", batched_verify)) == {"accept": "pass", "correction": "pass", "bonus": "pass"}
    accept = injected("accept_le", bugs.accept_le_fp32)
    assert _verdicts(accept)["accept"] == "FAIL"
    assert "2^-24 per accept test on cpu" in accept.summary["edges"]["accept"]["words"]
    left = injected("left", bugs.inverse_cdf_left_search)
    assert _verdicts(left) == {"accept": "pass", "correction": "FAIL", "bonus": "FAIL"}


def test_the_statistical_probe_states_the_event_of_the_device_and_uniform_dtype():
    from types import SimpleNamespace

    from specref.conformance.chain.contract import probe_summary
    from specref.conformance.chain.scenarios import PROBE, get, probe_rows_needed

    rows = probe_rows_needed()  # sized for 0.99 at 2^-24 (CPU float32)
    tally = SimpleNamespace(rows=rows)

    def summary(**kw):
        return probe_summary(get(PROBE), tally, Adapter("x", _fp32_then_own_rng, **kw))

    cpu = summary(uniform_dtype=torch.float32)
    assert cpu["event_probability"] == 2.0**-24 and cpu["detection_probability"] == pytest.approx(0.99, abs=1e-6)
    cuda = summary(device="cuda", uniform_dtype=torch.float32)  # curand's (0, 1] mapped to [0, 1): 2^-25
    assert cuda["event_probability"] == 2.0**-25 and cuda["detection_probability"] == pytest.approx(0.90, abs=0.001)
    f64 = summary(uniform_dtype=torch.float64)
    assert f64["detection_probability"] is None and "not reachable" in f64["event"]
    assert "float32 assumed" in summary()["event"]
    batched = run(builtin_adapters()["batched"](), scenarios=["cf_dense_g4"], rows=512, budget_seconds=60)
    text = render_markdown({**batched.to_dict(), "probe": f64})  # report.md with a float64 verifier's probe
    assert text.count("no detection probability is stated") == 1 and "the event is a float64 uniform" in text


def test_the_probe_costs_two_calls_for_a_verifier_without_the_edge_and_a_few_with_it():
    # its cost is a count of calls of 64 rows (time is measured as a ratio in reports, never asserted here)
    calls = []

    def counted(verify):
        def wrapper(*args, **kwargs):
            calls.append(1)
            return verify(*args, **kwargs)

        return wrapper

    from specref.batched import verify as batched_verify

    _probe(Adapter("batched", counted(batched_verify)))
    assert len(calls) == 2  # one forced call per batch
    calls.clear()
    _probe(Adapter("accept_le", counted(CATALOGUE["accept_le_fp32"].verify)))
    assert len(calls) <= 6  # + the natural control, one prefix, one confirmation (the locating replay is forked)


def _edge_report(zero_tokens: int, rows: int, more=(), scenarios=None):
    """A report whose forced probe named the accept edge (2^-24) and whose probe scenario emitted zero_tokens
    tokens of target probability 0 in `rows` rows of g = 1; `more`: further failed checks (already named), in
    `scenarios` (name: (rows, gamma)) beside the probe's."""
    from specref.conformance.engine.report import Report
    from specref.conformance.engine.results import t0_result

    report = Report(Adapter("v", verify=None), contract("chain"), seed=0, budget_seconds=None, alpha=1e-3)
    report.scenarios = {"probe_zero_ratio_g1": {"rows": rows, "gamma": 1}}
    report.scenarios.update({name: {"rows": n, "gamma": g} for name, (n, g) in (scenarios or {}).items()})
    probe = {"edges": {"accept": {"event_probability": 2**-24}}}
    report.add_t0("run", [t0_result("rare_edge[accept]", 1, 64, {"family": "edge", "forced_probe": probe})])
    report.add_t0("probe_zero_ratio_g1", [t0_result("t0_zero_prob_emitted", zero_tokens, rows)])
    report.checks += list(more)
    report.finish(ErrorBudget(1e-3), 1.0, family_size=sum(r.details.get("tier") == "T2" for r in more))
    return report


def test_zero_tokens_the_named_edge_explains_keep_the_rare_edge_verdict_and_more_do_not():
    from specref.conformance.engine.report import NON_CONFORMING, RARE_EDGE

    rows = 32_000_000  # 32M accept tests (the accept edge acts on those alone) at 2^-24: 1.9 expected
    natural = _edge_report(2, rows)
    assert natural.verdict == RARE_EDGE and natural.natural_edge["tokens"] == 2, natural.summary()
    assert "met naturally" in natural.summary() and natural.to_dict()["natural_edge"]["draws"] == rows
    assert _edge_report(40, rows).verdict == NON_CONFORMING  # 40 where 1.9 are expected: another bug
    assert _edge_report(2, 1000).verdict == NON_CONFORMING  # 2 in 1,000 draws: not the 2^-24 edge


def test_the_natural_edge_rule_states_the_extra_rate_it_flags_and_a_second_cause_keeps_non_conforming():
    from scipy.stats import poisson

    from specref.conformance.engine.natural_edge import edge_power
    from specref.conformance.engine.report import NON_CONFORMING, RARE_EDGE
    from specref.conformance.engine.results import t0_result

    rows, event = 32_000_000, 2.0**-24
    natural = _edge_report(2, rows).natural_edge
    extra = natural["flagged_extra_rate"]  # at event + extra per draw, the test at alpha flags with power 0.999
    critical = next(c for c in range(1, 100) if poisson.sf(c - 1, rows * event) <= 1e-3)
    assert poisson.sf(critical - 1, rows * (event + extra)) == pytest.approx(0.999, abs=1e-9)
    assert poisson.sf(critical - 2, rows * event) > 1e-3  # c is the least count flagged
    assert extra == edge_power(rows, event, 1e-3) and "would have been flagged with probability 0.999" in natural[
        "words"]  # fmt: skip
    # a second cause: 3 zero-probability tokens in 1.2M accept tests of another scenario (0.07 expected there), 1 in
    # the probe's: the run's count (4 against 1.98) passes, but that scenario holds more than its draws explain
    elsewhere = [t0_result("t0_zero_prob_emitted[cf_zero_support_g3]", 3, 400_000)]
    second = _edge_report(1, rows, elsewhere, {"cf_zero_support_g3": (400_000, 3)})
    assert second.verdict == NON_CONFORMING and not second.natural_edge, second.summary()
    one = _edge_report(1, rows, [t0_result("t0_zero_prob_emitted[cf_zero_support_g3]", 1, 400_000)],
                       {"cf_zero_support_g3": (400_000, 3)})  # fmt: skip
    assert one.verdict == RARE_EDGE  # one there: p = 0.07, as likely from the edge


def test_an_out_of_support_token_and_its_impossible_outcome_are_the_edge_too_and_a_real_deviation_is_not():
    """A left-side inverse CDF at a natural u = 0 returns a zero-weight token: on identical rows that fails
    t0_residual_support, and the same token is an impossible outcome of that scenario's row_independence. Both are
    the named edge when the statistical check's possible outcomes pass; a check that also deviates there is not."""
    from specref.conformance.engine.report import NON_CONFORMING, RARE_EDGE
    from specref.conformance.engine.results import t0_result
    from specref.stats import CheckResult

    def verdict(p_asymptotic: float, scenario: str = "identical_rows_g2"):
        t0 = t0_result("t0_residual_support[identical_rows_g2]", 1, 400_000)
        t2 = CheckResult(
            f"row_independence[{scenario}]",
            11.3,
            15,
            0.0,
            200_000,
            1.6e-5,
            float("nan"),
            False,
            0.0,
            {"tier": "T2", "family": "law", "impossible_observed": 1, "p_asymptotic": p_asymptotic},
        )
        return _edge_report(1, 16_000_000, [t0, t2], {"identical_rows_g2": (400_000, 2)})

    kept = verdict(0.63)
    assert kept.verdict == RARE_EDGE and kept.natural_edge["tokens"] == 2, kept.summary()
    assert "row_independence[identical_rows_g2]" in kept.natural_edge["checks"]
    assert verdict(1e-9).verdict == NON_CONFORMING  # its possible outcomes deviate too: another bug
    assert verdict(0.63, "cf_dense_g4").verdict == NON_CONFORMING  # no edge token in that scenario


# --- reach: RNGs the verifier seeds, forks or makes during the call (forced.reaching) ---------------------------


def _self_seeded(strict: bool):
    """`u < p/q` (strict) or `u <= p/q` on torch's global RNG, seeded inside fork_rng from a seed drawn from the
    generator (one output of it read); the final draw a right-side inverse CDF (correct at u = 0)."""

    def verify(target_probs, draft_probs, draft_tokens, generator):
        rows, gamma = draft_tokens.shape
        seed = int(torch.randint(0, 2**31 - 1, (1,), generator=generator))
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            u, final_u = torch.rand(rows, gamma), torch.rand(rows)
        ratio = (target_probs[:, :gamma].gather(2, draft_tokens[..., None]) / draft_probs.gather(
            2, draft_tokens[..., None]))[..., 0]  # fmt: skip
        accepted = ((u < ratio) if strict else (u <= ratio)).long().cumprod(1).sum(1)  # [B]
        weights = torch.cat([(target_probs[:, :gamma] - draft_probs).clamp_min(0), target_probs[:, gamma:]], 1)
        weights = weights[torch.arange(rows), accepted].double()  # [B, V]: residual, or p_{g+1} as the bonus row
        cdf = weights.cumsum(1)
        token = torch.searchsorted(cdf, (final_u.double() * cdf[:, -1])[:, None], right=True)[:, 0]
        out = torch.full((rows, gamma + 1), -1, dtype=torch.int64)
        for b in range(rows):
            n = int(accepted[b])
            out[b, :n] = draft_tokens[b, :n]
            out[b, n] = min(int(token[b]), weights.shape[1] - 1)
        return out

    return verify


def test_a_verifier_that_seeds_torchs_global_rng_inside_fork_rng_is_reached():
    from specref.forced import GIVEN, GLOBAL

    found = _probe(Adapter("self-seeded-le", _self_seeded(strict=False)))
    assert _verdicts(found) == {"accept": "FAIL", "correction": "not tested", "bonus": "pass"}
    edge = found.summary["edges"]["accept"]
    assert edge["rngs"][GLOBAL] >= 1 and edge["rngs"][GIVEN] <= 2, edge  # the uniform came from the global RNG
    assert "u <= ratio" in edge["words"]  # the locating replay reaches it too
    assert found.summary["batches"]["accept"]["rngs_reached"][GLOBAL] == 2 * ROWS
    clean = _probe(Adapter("self-seeded-lt", _self_seeded(strict=True)))
    assert _verdicts(clean) == {"accept": "pass", "correction": "pass", "bonus": "pass"}
    assert torch.rand(1).item() != 0.0  # the global RNG is restored after the calls (inline mode)
    per_row = _probe(Adapter("seed-per-row", _seed_per_row))  # vLLM's per-request generators, made in the call
    assert _verdicts(per_row)["accept"] == "FAIL"
    assert "a torch.Generator it seeded" in per_row.summary["edges"]["accept"]["rngs"]


# --- every edge shown is a failed check, in every output ---------------------------------------------------------


def _one_minus_rand(target_probs, draft_probs, draft_tokens, generator):
    """Uniforms 1 - rand in (0, 1], as curand's; `u < p/q` rejects at u = 1 where p = q, and a final draw on an
    empty residual returns token 0 (a left-side search of 0 in an all-zero CDF): wrong only at rand = 0, in the
    bonus batch, as a correction none of the probe's edges names (problem 9 of issue 33)."""
    rows, gamma = draft_tokens.shape
    u = 1 - torch.rand(rows, gamma + 1, generator=generator)
    ratio = (target_probs[:, :gamma].gather(2, draft_tokens[..., None]) / draft_probs.gather(
        2, draft_tokens[..., None]))[..., 0]  # fmt: skip
    accepted = (u[:, :gamma] < ratio).long().cumprod(1).sum(1)
    weights = torch.cat([(target_probs[:, :gamma] - draft_probs).clamp_min(0), target_probs[:, gamma:]], 1)
    cdf = weights[torch.arange(rows), accepted].double().cumsum(1)
    token = torch.searchsorted(cdf, (u[:, gamma].double() * cdf[:, -1])[:, None])[:, 0].clamp_max(cdf.shape[1] - 1)
    out = torch.full((rows, gamma + 1), -1, dtype=torch.int64)
    for b in range(rows):
        n = int(accepted[b])
        out[b, :n] = draft_tokens[b, :n]
        out[b, n] = int(token[b])
    return out


@pytest.mark.parametrize(
    ("verify", "findings"),
    [
        (CATALOGUE["accept_le_fp32"].verify, {"accept"}),  # the accept batch's accept test
        (CATALOGUE["inverse_cdf_left_search"].verify, {"correction", "bonus"}),  # its correction, the bonus batch
        (_one_minus_rand, {"bonus:t0_zero_prob_emitted"}),  # the bonus batch, under no edge's name
    ],
)
def test_every_finding_of_the_probe_is_a_failed_check_in_every_output(verify, findings, tmp_path):
    report = run(Adapter("v", verify), scenarios=["cf_dense_g4"], rows=512)
    record = report.to_dict()
    edges = report.forced_probe["edges"]
    assert set(edges) == findings
    failed = {c["name"] for c in record["checks"] if c["status"] == "failed"}
    assert failed == {f"rare_edge[{key}]" for key in findings}, failed  # each finding, and nothing else
    assert report.verdict == RARE_EDGE and record["counts"]["failed"] == len(findings)
    first = report.summary().splitlines()[0]
    assert "RARE EDGE" in first and f"{len(findings)} failed" in first
    assert f"{len(findings)} failed" in render_markdown({**record, "spec": "x:y"}).split("**Verdict:")[1][:200]
    assert _write_and_tell(report, tmp_path, "x", None, plots=False, stream=None, allow_edge=False) == \
        EXIT_NON_CONFORMING  # fmt: skip


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_self_seeded_non_strict_verifier_is_a_rare_edge_and_its_strict_twin_conforms(seed):
    """Issue 33's case at small rows (the 30-seed, 30 s runs are in the report): `u <= p/q` on torch's global RNG,
    seeded inside fork_rng from a seed drawn from the generator, is "non-conforming: rare edge" whatever the seed;
    the same shape with `u < p/q` passes every certain check and the probe (its T2 checks are statistical: their
    false alarms belong to the runs in the report, not here)."""
    scenarios = ["cf_dense_g4", "cf_zero_support_g3", "markov_g5"]
    found = run(Adapter("self-seeded-le", _self_seeded(strict=False)), seed=seed, scenarios=scenarios, rows=2048)
    assert found.verdict == RARE_EDGE and found.caught_by() == ["rare_edge"], found.summary()
    assert "reached through torch's global RNG" in render_markdown({**found.to_dict(), "spec": "x:y"})
    clean = run(Adapter("self-seeded-lt", _self_seeded(strict=True)), seed=seed, scenarios=scenarios, rows=2048)
    certain = [c for c in clean.checks if c.details.get("tier") == "T0"]
    assert certain and all(c.passed for c in certain), clean.summary()
    assert {c.name for c in certain if c.id.kind == "rare_edge"} == {f"rare_edge[{e}]" for e in EDGES}
