"""A new contract is one package and one row of specref.builtins.CONTRACTS: the toy sampler contract
(properties/toy_contract/, written against engine/contract.py alone) runs through `run()`, shards and merges into
the report of one unsharded run, and renders, with no other file of specref touched."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
import torch

from specref import builtins
from specref.conformance import run, shards
from specref.conformance.contracts import contract, contract_of
from specref.conformance.report.render import render_markdown

pytestmark = pytest.mark.exact  # fixed rows and seeds: the verdicts below are the same on every run

ROW = builtins.Contract("toy", "toy-sampler", "toy_contract.contract:CONTRACT", "a plain sampler (a test)")


@pytest.fixture(autouse=True)
def toy_row(monkeypatch):
    monkeypatch.setattr(builtins, "CONTRACTS", (*builtins.CONTRACTS, ROW))


def sampler(name, sample):
    from toy_contract.contract import Sampler

    return Sampler(name, sample)


def correct(probs, generator):
    return torch.multinomial(probs, 1, generator=generator)[:, 0]


def drops_the_last_token(probs, generator):
    """A tiled sampler that never reaches the vocabulary's last entry."""
    return torch.multinomial(probs[:, :-1] + 1e-12, 1, generator=generator)[:, 0]


def test_the_contract_is_found_from_its_row():
    subject = sampler("correct", correct)
    assert contract_of(subject) == "toy" and contract(subject).name == "toy"


def test_a_correct_sampler_conforms_and_a_biased_one_does_not():
    good = run(sampler("correct", correct), seed=0, rows=4096)
    assert good.verdict == "conforming", good.summary()
    assert {r.name for r in good.checks} >= {"toy_law[toy_dense]", "toy_law[toy_sparse]", "t0_valid_ids[toy_dense]"}
    assert good.to_dict()["contract"] == "toy"
    bad = run(sampler("drops-last", drops_the_last_token), seed=0, rows=4096)
    assert bad.verdict == "non-conforming" and "toy_law" in bad.caught_by(), bad.summary()


def test_shards_merge_into_the_unsharded_report_and_render():
    subject = sampler("correct", correct)
    one = run(subject, seed=3, rows=3000)
    parts = [run(subject, seed=3, rows=3000, shard=(k, 3)) for k in range(3)]
    merged, _ = shards.merge_records([(str(k), json.loads(json.dumps(p.to_dict()))) for k, p in enumerate(parts)])
    same = [(r.name, r.status, r.statistic, r.p_value, r.n) for r in one.checks]
    assert [(r.name, r.status, r.statistic, r.p_value, r.n) for r in merged.checks] == same
    assert merged.verdict == one.verdict == "conforming"
    text = render_markdown(replace(merged).to_dict())
    assert "toy_law[toy_dense]" in text and "the sampled tokens follow the given law" in text
