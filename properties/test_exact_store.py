"""specref.exact_store: a tree scenario's cycle law read back from the disk equals the law enumerated again, exactly;
a change of anything the law is a function of (a row, the rule, the code) misses; a corrupt, tampered or foreign
file is enumerated again and rewritten, never trusted."""

from __future__ import annotations

import hashlib
import json
from fractions import Fraction

import pytest
import torch

from specref import exact_store, exact_tree
from specref.conformance.tree.scenarios import get

pytestmark = pytest.mark.exact

NAME, SCHEME, RULE = "tree_duplicates_cf", "iid", "mss"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECREF_CACHE", str(tmp_path))
    monkeypatch.delenv(exact_store.ENV, raising=False)
    return tmp_path / "exact"


def _inputs(name=NAME):
    s = get(name).given(torch.float64)
    target, draft = s._fraction_rows()
    return s, target, draft


def _stored(s, target, draft, rule=RULE, label="t"):
    return exact_store.tree_cycle_law(target, draft, s.next_state, s.start, s.shapes[0], SCHEME, rule, label=label)


def _enumerated(s, rule=RULE):
    target, draft = s.models()
    return exact_tree.tree_cycle_law(target, draft, (), s.shapes[0], SCHEME, rule)


def _refuse(monkeypatch):
    def refused(*args, **kwargs):
        raise AssertionError("enumerated although an equal law is on the disk")

    monkeypatch.setattr(exact_tree, "tree_cycle_law", refused)


def test_a_stored_law_equals_the_law_enumerated_again_exactly(cache, monkeypatch):
    s, target, draft = _inputs()
    fresh = _enumerated(s)
    first = _stored(s, target, draft)
    (path,) = cache.glob("t-*.json")
    _refuse(monkeypatch)
    again = _stored(s, target, draft)
    assert again == fresh == first and len(again) > 10
    assert all(type(p) is Fraction for p in again.values()) and sum(again.values()) == sum(fresh.values())
    assert all(type(t) is tuple and all(type(x) is int for x in t) for t in again)
    assert "/" in json.loads(json.loads(path.read_text())["law"])[0][1]  # numerator/denominator strings


def test_the_scenario_reads_its_law_from_the_disk_in_a_new_process(cache, monkeypatch):
    s, *_ = _inputs("tree_chain_cf")
    law = s.cycle_law(0, "topk", "target_only")
    _refuse(monkeypatch)
    other = get("tree_chain_cf").given(torch.float64)
    other._laws.clear()  # as a new process would have it
    assert other.cycle_law(0, "topk", "target_only") == law


def test_a_change_of_key_misses(cache, monkeypatch):
    s, target, draft = _inputs()
    law, other_rule = _stored(s, target, draft), _enumerated(s, "sample_match")
    (old,) = cache.glob("t-*.json")
    calls = []
    enumerate_law = exact_tree.tree_cycle_law
    monkeypatch.setattr(exact_tree, "tree_cycle_law", lambda *a, **k: calls.append(a) or enumerate_law(*a, **k))
    nudged = [row[:] for row in target]
    nudged[0][0], nudged[0][1] = nudged[0][0] + Fraction(1, 2**60), nudged[0][1] - Fraction(1, 2**60)
    assert _stored(s, nudged, draft) != law and len(calls) == 1  # one row changed by 2^-60: another law
    assert not old.exists()  # saving it removed the label's law of the other key
    assert _stored(s, target, draft, rule="sample_match") == other_rule and len(calls) == 2
    exact_store.fingerprint.cache_clear()
    monkeypatch.setattr(exact_store, "fingerprint", lambda: "other code")
    assert _stored(s, target, draft) == law and len(calls) == 3  # the code changed: enumerated again
    assert _stored(s, target, draft) == law and len(calls) == 3


@pytest.mark.parametrize("damage", ["truncated", "garbage", "tampered", "foreign", "bad fraction"])
def test_a_corrupt_file_is_enumerated_again_and_rewritten(cache, monkeypatch, damage):
    s, target, draft = _inputs()
    law = _stored(s, target, draft)
    (path,) = cache.glob("t-*.json")
    text = path.read_text()
    record = json.loads(text)
    if damage == "truncated":
        path.write_text(text[: len(text) // 2])
    elif damage == "garbage":
        path.write_bytes(b"\x00\xff" * 64)
    elif damage == "tampered":  # one probability changed, the file's digest left as it was
        entries = json.loads(record["law"])
        entries[0][1] = "1/3"
        path.write_text(json.dumps(dict(record, law=json.dumps(entries))))
    elif damage == "foreign":  # a well-formed file of another key under this name
        path.write_text(json.dumps(dict(record, key=record["key"].replace('"mss"', '"rsd"'))))
    else:
        entries = json.loads(record["law"])
        entries[0][1] = "1/0"
        body = json.dumps(entries)
        digest = hashlib.sha256(body.encode()).hexdigest()
        path.write_text(json.dumps(dict(record, law=body, digest=digest)))
    assert exact_store.load(path, record["key"]) is None
    calls = []
    enumerate_law = exact_tree.tree_cycle_law
    monkeypatch.setattr(exact_tree, "tree_cycle_law", lambda *a, **k: calls.append(a) or enumerate_law(*a, **k))
    assert _stored(s, target, draft) == law and len(calls) == 1
    assert json.loads(path.read_text()) == record  # rewritten whole
    assert _stored(s, target, draft) == law and len(calls) == 1


def test_without_a_disk_nothing_is_written(cache, monkeypatch):
    monkeypatch.setenv(exact_store.ENV, "0")
    s, target, draft = _inputs()
    assert _stored(s, target, draft) == _enumerated(s)
    assert not cache.exists()
