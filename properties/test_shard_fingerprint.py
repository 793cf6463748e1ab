"""A shard knows what it ran (issue 34): the subject's fingerprint in report.json, a merge of two codes refused
naming both, and a shard that claims nothing about the law. Exact: fixed seeds, and the tests are equalities."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specref.cli import main
from specref.conformance import run
from specref.mutants import CATALOGUE

pytestmark = pytest.mark.exact

VERIFIER = (
    "from specref.batched import verify as _verify\n\n\n"
    "def verify(target_probs, draft_probs, draft_tokens, generator):\n"
    "    return _verify(target_probs, draft_probs, draft_tokens, generator)\n"
)


def shard(tmp_path: Path, folder: str, k: int, source: str) -> Path:
    (tmp_path / folder).mkdir()
    (tmp_path / folder / "v.py").write_text(source)
    out = tmp_path / f"shard-{folder}-{k}"
    args = ["conform", str(tmp_path / folder / "v.py") + ":verify", "--rows", "1000", "--scenarios", "cf_dense_g4",
            "--shard", f"{k}/2", "--report", str(out), "--no-plots", "--budget-seconds", "600"]  # fmt: skip
    assert main(args) == 0
    return out


def test_merge_refuses_shards_of_two_files_with_one_label_naming_both(tmp_path, capsys):
    first = shard(tmp_path, "a", 0, VERIFIER)
    second = shard(tmp_path, "b", 1, VERIFIER + "# edited between the shards\n")
    fp = json.loads((first / "report.json").read_text())["shard"]["fingerprint"]
    assert fp["module"] and fp["source_sha256"] and fp["torch"] and fp["specref"] and fp["declaration_sha256"]
    capsys.readouterr()
    assert main(["merge", str(first), str(second), "--out", str(tmp_path / "merged"), "--no-plots"]) == 2
    err = capsys.readouterr().err
    assert str(tmp_path / "a" / "v.py") in err and str(tmp_path / "b" / "v.py") in err, err
    assert "not shards of one code" in err and not (tmp_path / "merged").exists()


def test_merge_of_one_code_in_two_places_is_not_refused(tmp_path):
    first, second = shard(tmp_path, "a", 0, VERIFIER), shard(tmp_path, "b", 1, VERIFIER)
    assert main(["merge", str(first), str(second), "--out", str(tmp_path / "merged"), "--no-plots"]) == 0


def test_a_shard_of_a_law_breaking_verifier_claims_nothing_about_the_law():
    # residual_at_drafted_token breaks the law; its shard fails only rule-family certain checks, which main read as
    # "output law kept"
    report = run(CATALOGUE["residual_at_drafted_token"], shard=(0, 2), rows=2000, scenarios=["cf_dense_g4"],
                 budget_seconds=600)  # fmt: skip
    assert report.failures
    assert report.to_dict()["law_kept"] is None
    assert "output law kept" not in report.summary()
