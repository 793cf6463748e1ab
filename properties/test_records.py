"""One record per check, every output: the counts agree everywhere, and every registered kind reaches every output.

The runs here use fixed rows and a family-wise alpha of 1e-9 for their statistical checks (a false alarm would only
move one check from passed to failed in every output alike; the counts must agree whatever the verdicts are).
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from specref.conformance import run, shards
from specref.conformance.chain.adapters import batched_adapter
from specref.conformance.chain.scenarios import get
from specref.conformance.chain.tally import Tally
from specref.conformance.contracts import every_kind
from specref.conformance.engine import registry
from specref.conformance.engine.check_words import counts_line
from specref.conformance.report.render import render_markdown
from specref.conformance.tree import run_tree
from specref.conformance.tree.adapters import builtin_tree_adapters
from specref.stats.record import STATUSES, CheckId

pytestmark = pytest.mark.exact
pytest_plugins = ["pytester"]
# Every contract's kinds declared before pytester snapshots sys.modules: the modules a test imports are dropped at its
# teardown while the registry keeps their kinds, and a second import would declare them again.
every_kind()

ALPHA = 1e-9
COUNTS = re.compile(r"(\d+) passed, (\d+) failed, (\d+) uninformative at this N, (\d+) not run, (\d+) not tested")
#: A verifier that is right except on cf_zero_support_g3 (V = 32), where its output lacks a column: the adapter
#: check fails there and that scenario's other checks are not run; cf_one_hot_target_g3 has checks that cannot fail.
VERIFIER = """
from specref.conformance.adapters import batched_adapter

_GOOD = batched_adapter()


def verify(target_probs, draft_probs, draft_tokens, generator=None):
    out = _GOOD.verify(target_probs, draft_probs, draft_tokens, generator)
    return out[:, :-1] if target_probs.shape[-1] == 32 else out
"""
SCENARIOS = ["cf_dense_g4", "cf_zero_support_g3", "cf_one_hot_target_g3", "cf_equal_g8"]
ROWS = 300


def _counts(text: str) -> dict[str, int]:
    match = COUNTS.search(text)
    assert match, text
    return dict(zip(STATUSES, map(int, match.groups())))


def test_counts_agree_across_summary_report_md_report_json_the_pytest_plugin_and_the_demo(pytester, monkeypatch):
    from specref.demo import side_by_side

    pytester.makepyfile(half_broken=VERIFIER)
    monkeypatch.syspath_prepend(str(pytester.path))
    import half_broken

    report = run(half_broken.verify, seed=0, budget_seconds=120, alpha=ALPHA, scenarios=SCENARIOS, rows=ROWS)
    counts = report.counts()
    assert all(counts[status] > 0 for status in STATUSES), counts  # every status occurs in this run

    record = json.loads(json.dumps(report.to_dict()))
    assert record["counts"] == counts
    assert {s: sum(c["status"] == s for c in record["checks"]) for s in STATUSES} == counts
    assert _counts(report.summary()) == counts
    markdown = render_markdown({**record, "spec": "half_broken.py:verify", "files": []})
    assert _counts(markdown) == counts
    monkeypatch.setattr("specref.demo.WIDTH", 400)  # one line a row: the counts read whole (test_demo holds 100)
    demo = side_by_side((report, {"md": "a.md"}), (report, {"md": "b.md"}), out=pytester.path)
    checks_row = next(line for line in demo.splitlines() if line.startswith("checks"))
    assert [dict(zip(STATUSES, map(int, m))) for m in COUNTS.findall(checks_row)] == [counts, counts]
    assert counts_line(counts) in report.summary()

    # the plugin's items: passed, failed (failed and not run), skipped (not tested, uninformative), from the same
    # run's records
    result = pytester.runpytest("-p", "specref.pytest_plugin", "--specref-impl", "half_broken.py:verify",
                                "--specref-rows", str(ROWS), "--specref-scenarios", ",".join(SCENARIOS),
                                "--specref-alpha", str(ALPHA), "-rs")  # fmt: skip
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) == counts["passed"]
    assert outcomes.get("failed", 0) == counts["failed"] + counts["not run"]
    assert outcomes.get("skipped", 0) == counts["not tested"] + counts["uninformative"]
    out = result.stdout.str()
    assert len(re.findall(r"^\S+ not run \(", out, re.M)) == counts["not run"], out
    assert _counts(out) == counts  # the terminal summary the plugin prints
    assert " in 0 rows" not in out and "... and" not in out


def test_a_malformed_output_gives_one_line_per_cause():
    """One wrong output shape in every scenario: one adapter line naming the scenarios, one line for the checks
    that could not be computed, never one line per scenario or "1 violations in 0 rows"."""
    from specref.conformance.chain.adapters import batched_adapter

    good = batched_adapter()

    def short(target_probs, draft_probs, draft_tokens, generator=None):
        return good.verify(target_probs, draft_probs, draft_tokens, generator)[:, :-1]

    report = run(short, seed=0, budget_seconds=120, scenarios=SCENARIOS + ["markov_g5", "cf_near_equal_g4"], rows=64)
    lines = report.summary().splitlines()[1:]
    assert len([line for line in lines if line.strip().startswith("FAIL adapter[")]) == 1, lines
    assert len([line for line in lines if "NOT RUN" in line]) == 1, lines
    assert not any("in 0 rows" in line or "more failed checks" in line for line in lines), lines


# --- every registered kind in every output ----------------------------------------------------------------------

#: Scenarios that together run every chain kind (reference: uniforms, so coupling runs too).
EVERY_CHAIN_KIND = ["cf_dense_g4", "cf_equal_g8", "mixed_batch_g3", "point_mass_g4", "ragged_g6", "identical_rows_g2",
                    "joint_markov_g2"]  # fmt: skip


def _in_outputs(report, kinds) -> None:
    record = json.loads(json.dumps(report.to_dict()))
    markdown = render_markdown({**record, "spec": "x", "files": []})
    in_json = {c["kind"] for c in record["checks"]}
    assert {c["kind"] for c in record["checks"]} == {CheckId.parse(c["name"]).kind for c in record["checks"]}
    for kind in kinds:
        assert kind in in_json, kind
        assert f"`{kind}[" in markdown or f"`{kind}`" in markdown, kind
        contract = registry.TREE if report.adapter.kind == "tree" else registry.CHAIN
        assert registry.describe(kind, contract).replace("|", "\\|") in markdown, kind  # a table cell escapes |


def test_every_chain_kind_survives_a_shard_merge_and_appears_in_every_output():
    from specref.conformance.chain.adapters import reference_adapter

    parts = [run(reference_adapter(), seed=0, budget_seconds=300, alpha=ALPHA, scenarios=EVERY_CHAIN_KIND, rows=400,
                 shard=(k, 2)) for k in range(2)]  # fmt: skip
    merged, _ = shards.merge_records([(str(k), json.loads(json.dumps(p.to_dict()))) for k, p in enumerate(parts)])
    one = run(reference_adapter(), seed=0, budget_seconds=300, alpha=ALPHA, scenarios=EVERY_CHAIN_KIND, rows=400)
    chain = [k.name for k in registry.for_contract(registry.CHAIN)]
    assert {r.id.kind for r in merged.checks} == set(chain)
    assert [(r.name, r.status, r.statistic, r.p_value) for r in merged.checks] == [
        (r.name, r.status, r.statistic, r.p_value) for r in one.checks
    ]
    _in_outputs(merged, chain)


def test_every_tree_kind_appears_in_every_output():
    adapter = builtin_tree_adapters()["tree-mss"]()
    report = run_tree(adapter, seed=0, budget_seconds=300, alpha=ALPHA, rows=600,
                      scenarios=["tree_eagle_markov", "tree_joint_markov"])  # fmt: skip
    tree = [k.name for k in registry.for_contract(registry.TREE)]
    assert {r.id.kind for r in report.checks} == set(tree)
    _in_outputs(report, tree)


@pytest.mark.parametrize("contract", [registry.CHAIN, registry.TREE])
def test_a_shard_carries_every_declared_counter_and_refuses_an_undeclared_one(contract):
    from specref.conformance.tree.checks import TreeTally
    from specref.conformance.tree.scenarios import get as tree_scenario

    tally = Tally(get("cf_dense_g4")) if contract == registry.CHAIN else TreeTally(tree_scenario("tree_star_cf"),
                                                                                      "iid", "mss")  # fmt: skip
    encoded = tally.counts()
    for kind in registry.for_contract(contract):
        assert set(kind.forms[contract].counters) <= set(encoded), kind.name
    tally.extra = np.zeros(3, dtype=np.int64)  # a counter no kind declares: merge would drop it
    with pytest.raises(ValueError, match=r"\['extra'\] are declared by no check kind"):
        tally.counts()


def test_kinds_are_declared_once_with_a_known_family_and_the_mutants_name_only_declared_kinds():
    from specref.mutants import CATALOGUE
    from specref.mutants.trees import CAUGHT_BY

    kinds = registry.kinds()
    for mutant in CATALOGUE.values():
        assert set(mutant.caught_by) <= set(kinds), mutant.name
    for name, caught in CAUGHT_BY.items():
        assert caught <= set(kinds), name
    with pytest.raises(ValueError, match="declared twice"):
        registry.declare(registry.CheckKind("accepted_length_law", registry.RULE, "T2", "again"))
    with pytest.raises(ValueError, match="undeclared check kinds"):
        registry.check_caught_by("m", ["first_token_law", "no_such_check"])
    with pytest.raises(ValueError, match="'nope\\[' is not 'kind'"):
        CheckId.parse("nope[")
    assert CheckId.parse("a[b]") == CheckId("a", "b") and str(CheckId("a", "b")) == "a[b]"
    assert CheckId.parse("reproducibility") == CheckId("reproducibility")


def test_the_tallies_t0_lists_are_the_registered_t0_kinds():
    """checks.T0_CHECKS and tree/checks.T0_CHECKS fix the order a row is charged in; the kinds are the registry's."""
    from specref.conformance.chain import tally as checks
    from specref.conformance.tree import checks as tree_checks

    assert set(checks.T0_CHECKS) == {k.name for k in registry.for_contract(registry.CHAIN, "T0")}
    assert set(tree_checks.T0_CHECKS) == {k.name for k in registry.for_contract(registry.TREE, "T0")}


def test_a_report_json_written_before_the_probe_had_words_still_renders():
    """`specref merge` and `render.rebuild` read report.json files of earlier versions: the statistical probe's
    record carried its detection probability alone, with no `detection_words`."""
    report = run(batched_adapter(), scenarios=["cf_dense_g4", "probe_zero_ratio_g1"], rows=256, budget_seconds=60)
    record = json.loads(json.dumps(report.to_dict()))
    del record["probe"]["detection_words"]
    markdown = render_markdown(record)
    assert f"detection probability reached: {record['probe']['detection_probability']:.4g}" in markdown
