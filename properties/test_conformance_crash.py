"""Nothing an adapter does crashes the harness: hangs, exceptions, crashes and contract-breaking rows each get a
named verdict (exit 1), never exit 3 or a signal; reproduce snippets rebuild the calls really made.

All exact: every assertion is a certain event (a hang is a sleep or an endless torch loop; the broken rows are
broken on purpose). Adapters: properties/external_impls/misbehaving.py. Hangs are declared after 1-2 s
(MIN_CALL_TIMEOUT patched in process, SPECREF_MIN_CALL_TIMEOUT for the CLI).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from specref.conformance import run
from specref.conformance.chain.adapters import batched_adapter
from specref.conformance.chain.scenarios import get
from specref.conformance.cli import resolve
from specref.conformance.contracts import contract
from specref.conformance.engine import run as runner
from specref.conformance.engine.calls import Caller, abandoned_threads
from specref.conformance.report.render import write_report
from specref.outputs import REPORTS

pytestmark = pytest.mark.exact
IMPLS = Path(__file__).parent / "external_impls"
MISBEHAVING = IMPLS / "misbehaving.py"


def adapter(attr: str):
    return resolve(f"{MISBEHAVING}:{attr}")[0]


def conform(*args: str, cwd: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specref.cli", "conform", *args, "--no-plots"], cwd=cwd,
                          capture_output=True, text=True, timeout=300, env={**os.environ, **env})  # fmt: skip


def within(seconds: float, fn):
    """fn() in a watchdog thread: a harness that loops forever fails the test instead of hanging the suite."""
    box: dict = {}

    def target():
        try:
            box["result"] = fn()
        except BaseException as error:  # noqa: BLE001 -- re-raised in the test's thread
            box["error"] = error

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    assert not worker.is_alive(), f"no result within {seconds} s: the harness loops"
    if "error" in box:
        raise box["error"]
    return box["result"]


def check(report, name: str):
    return next(r for r in report.checks if r.name == name)


def snippet(markdown: str, heading: str) -> str:
    section = markdown[markdown.index(f"### `{heading}`") :]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.fixture
def short_hangs(monkeypatch):
    monkeypatch.setattr(runner, "MIN_CALL_TIMEOUT", 1.0)


# --- hangs -----------------------------------------------------------------------------------------------------


def test_hang_in_the_main_pass_before_the_joint_scenario_exits_1(tmp_path):
    """Was exit 3: the joint scenario, never reached, reached joint_law_result with no counts."""
    result = conform(f"{MISBEHAVING}:hangs_after_probe", "--scenarios", "cf_dense_g4,joint_markov_g2", "--rows",
                     "300", "--budget-seconds", "60", cwd=tmp_path, env={"SPECREF_MIN_CALL_TIMEOUT": "2"})  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert "FAIL adapter[cf_dense_g4]" in result.stdout and "the worker process was killed" in result.stdout
    assert re.search(r"at \S*misbehaving\.py:\d+ in hangs_after_probe", result.stdout)
    record = json.loads((tmp_path / REPORTS / "misbehaving.hangs_after_probe" / "report.json").read_text())
    joint = next(c for c in record["checks"] if c["name"] == "joint_law[joint_markov_g2]")
    assert not joint["passed"] and joint["details"]["error"].startswith("not run: the run stopped")
    assert record["caught_by"][0] == "adapter"


def test_hang_inside_torch_abandoned_in_a_thread_exits_1_not_134(tmp_path):
    """Thread mode (what CUDA adapters get): was exit 134, the abandoned thread aborting the interpreter's exit."""
    result = conform(f"{MISBEHAVING}:hangs_in_torch", "--scenarios", "cf_dense_g4", "--budget-seconds", "1",
                     cwd=tmp_path, env={"SPECREF_MIN_CALL_TIMEOUT": "2", "SPECREF_CALL_MODE": "thread"})  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    assert "the call was abandoned in a thread" in result.stdout
    assert (tmp_path / REPORTS / "misbehaving.hangs_in_torch" / "report.json").is_file()


def test_hang_inside_torch_is_killed_in_the_worker(short_hangs):
    report = run(adapter("hangs_in_torch"), scenarios=["cf_dense_g4", "markov_g1"], rows=256, budget_seconds=1)
    failed = check(report, "adapter[cf_dense_g4]")
    assert not failed.passed and failed.details["kind"] == "hang"
    line = MISBEHAVING.read_text().splitlines().index("        a = torch.tanh(a @ a)") + 1
    assert failed.details["raised_at"] == f"{MISBEHAVING}:{line} in hangs_in_torch"
    # the run stops calling after a hang: what was left is not run, and not run is never a pass
    for name in ("adapter[markov_g1]", "first_token_law[cf_dense_g4]", "reproducibility[run]"):
        assert not check(report, name).passed and check(report, name).details["error"].startswith("not run")
    assert report.verdict == "non-conforming"
    assert abandoned_threads() == 0 and not multiprocessing.active_children()


def _slow_first_call():
    calls = []

    def verify(target_probs, draft_probs, draft_tokens, generator=None):
        calls.append(1)  # in the worker process, which lives for the whole run
        if len(calls) == 1:
            time.sleep(4.5)  # a loaded machine, a cold cache: slower than the whole budget, but it returns
        return batched_adapter().verify(target_probs, draft_probs, draft_tokens, generator)

    return verify


def test_a_call_that_overruns_the_budget_is_slow_not_hung(short_hangs):
    """Was a hang verdict (non-conforming) for the correct reference engine on a loaded machine: its first call on
    V = 151936 took longer than what was left of the budget. A run's first call, with no rate measured yet, has the
    run's ceiling (twice the budget: hangs.py)."""
    report = run(_slow_first_call(), scenarios=["cf_dense_g4"], rows=256, budget_seconds=3)
    assert check(report, "adapter[cf_dense_g4]").passed, report.summary()
    assert "hang" not in report.summary()


# --- the joint-law loop ----------------------------------------------------------------------------------------


def test_joint_loop_stops_on_rows_that_emit_nothing():
    """Was an endless loop: rows that never emit a token never finish."""
    report = within(120, lambda: run(adapter("all_minus_one"), scenarios=["joint_markov_g2"], rows=300,
                                     budget_seconds=30))  # fmt: skip
    assert not check(report, "t0_padding[joint_markov_g2]").passed
    joint = check(report, "joint_law[joint_markov_g2]")
    assert not joint.passed and "no sequence" in joint.details["error"]


def test_joint_loop_never_indexes_an_id_v():
    """Was IndexError (exit 3): the id V indexed the scenario's next-state table."""
    report = within(120, lambda: run(adapter("emits_id_v"), scenarios=["joint_markov_g2"], rows=300,
                                     budget_seconds=30))  # fmt: skip
    assert not check(report, "t0_valid_ids[joint_markov_g2]").passed
    assert not check(report, "joint_law[joint_markov_g2]").passed


def test_joint_counts_leave_out_rows_that_break_t0():
    """Even rows end in -2 on every call (a T0 violation); only the 150 odd rows of 300 may enter the joint counts
    (before: all 300, their valid tokens counted)."""
    report = within(120, lambda: run(adapter("even_rows_bad_id"), scenarios=["joint_markov_g2"], rows=300,
                                     budget_seconds=30))  # fmt: skip
    assert not check(report, "t0_valid_ids[joint_markov_g2]").passed
    assert check(report, "joint_law[joint_markov_g2]").n == 150


# --- exceptions and crashes ------------------------------------------------------------------------------------


def test_exception_names_the_raising_line_and_reproduces(tmp_path):
    verifier, _ = resolve(f"{MISBEHAVING}:raises_in_helper")
    report = run(verifier, scenarios=["markov_g1"], rows=300, budget_seconds=20)
    failed = check(report, "adapter[markov_g1]")
    line = 1 + next(i for i, text in enumerate(MISBEHAVING.read_text().splitlines()) if "raise ValueError" in text)
    assert failed.details["raised_at"] == f"{MISBEHAVING}:{line} in _check_inputs"
    assert f"misbehaving.py:{line} in _check_inputs" in report.summary()
    markdown = Path(write_report(report, tmp_path, spec=f"{MISBEHAVING}:raises_in_helper", plots=False)["md"])
    code = snippet(markdown.read_text(), "adapter[markov_g1]")
    with pytest.raises(ValueError, match="rejected a batch of 256 rows"):
        exec(code, {})


def test_a_crashing_worker_is_a_verdict_and_the_next_scenario_gets_a_fresh_one():
    report = run(adapter("crashes_on_v16"), scenarios=["cf_dense_g4", "markov_g1"], rows=256, budget_seconds=30)
    failed = check(report, "adapter[cf_dense_g4]")
    assert not failed.passed and failed.details["kind"] == "crash" and "SIGKILL" in failed.details["error"]
    assert check(report, "adapter[markov_g1]").passed and report.scenarios["markov_g1"]["rows"] == 256


# --- snippets rebuild what was sent ----------------------------------------------------------------------------


def test_t2_snippet_rebuilds_the_batch_really_sent(tmp_path, monkeypatch):
    """Was chunk 1 with 4096 rows whatever was sent; now the first call that fed the check (chunk 0, 256 rows)."""
    record_dir = tmp_path / "calls"
    record_dir.mkdir()
    monkeypatch.setenv("RECORD_DIR", str(record_dir))
    spec = f"{MISBEHAVING}:recording"
    report = run(resolve(spec)[0], scenarios=["cf_dense_g4"], rows=300, budget_seconds=20)
    assert not check(report, "first_token_law[cf_dense_g4]").passed
    sent = [dict(np.load(path)) for path in sorted(record_dir.iterdir())]
    markdown = Path(write_report(report, tmp_path / "report", spec=spec, plots=False)["md"]).read_text()
    for path in record_dir.iterdir():
        path.unlink()
    exec(snippet(markdown, "first_token_law[cf_dense_g4]"), {})
    (rebuilt_path,) = record_dir.iterdir()
    rebuilt = dict(np.load(rebuilt_path))
    first = next(call for call in sent if call["seed"] == rebuilt["seed"])
    assert first["tokens"].shape == (256, 4)
    for key in ("target", "draft", "tokens"):
        np.testing.assert_array_equal(rebuilt[key], first[key])
    assert "Its counts came from 2 calls (chunks 0 to 1, 300 rows)" in markdown


# --- the worker ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", ["cf_dense_g4", "ragged_g6", "point_mass_g4", "large_v151936_g1"])
def test_worker_tokens_are_bit_identical_to_in_thread_tokens(scenario):
    s = get(scenario)
    batch = s.inputs(min(s.rows_per_call, 512), 3, 7)
    with (
        Caller(batched_adapter(), contract("chain"), mode="thread") as in_thread,
        Caller(batched_adapter(), contract("chain"), mode="process") as worker,
    ):
        ours, seen, _ = in_thread(batch, 12345, timeout=60)
        theirs, seen_worker, _ = worker(batch, 12345, timeout=60)
        assert worker.workers_started == 1
    np.testing.assert_array_equal(ours, theirs)
    np.testing.assert_array_equal(seen[0], seen_worker[0])


def test_worker_keeps_torch_threads_after_the_parent_used_them():
    """libgomp's pool does not survive fork in the forking thread: the worker's adapter thread must get a new one."""
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        (torch.randn(1 << 22) + 1).sum()  # a parallel op in the parent before the fork
        batch = get("cf_dense_g4").inputs(256, 0, 0)
        with Caller(adapter("reports_threads"), contract("chain"), mode="process") as worker:
            with pytest.raises(Exception, match="threads=2"):
                within(60, lambda: worker(batch, 1, timeout=30))
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_job_is_compact_and_casts_once(dtype):
    """What a worker is sent for V=151936 is one cast row, not [B, g+1, V]; its tensors equal a direct cast."""
    from specref.conformance.chain.form import CHAIN
    from specref.conformance.engine.callform import _arguments, _job

    batch = get("large_v151936_g1").inputs(64, 0, 1)
    job, (target_seen, _) = _job(batch, 1, dtype, "cpu", {"ragged": False}, None, None, CHAIN)
    assert len(pickle.dumps(job)) < 4 * 151936 * 8  # a few rows' worth; the batch is 64 x 2 rows
    (target, draft, tokens, _), _ = _arguments(job)
    expected = torch.from_numpy(np.ascontiguousarray(batch.target_probs)).to(dtype)
    assert target.dtype == dtype and target.is_contiguous() and torch.equal(target, expected)
    np.testing.assert_array_equal(target_seen, expected.double().numpy())


@pytest.mark.parametrize(("make", "said"), [(lambda t: t.to("meta"), "a meta tensor"),
                                            (lambda t: t.to_sparse(), "a sparse_coo tensor")])  # fmt: skip
def test_a_meta_or_sparse_output_is_the_adapters_malformed_output(make, said):
    """Was: 'exception: NotImplementedError: Cannot copy out of meta tensor' located at specref's own form.py."""
    from specref.conformance.chain.form import CHAIN
    from specref.errors import AdapterFailure

    job = {"tokens": np.zeros((2, 3), dtype=np.int64)}
    with pytest.raises(AdapterFailure) as failure:
        CHAIN.read(make(torch.zeros(2, 4, dtype=torch.int64)), job)
    assert failure.value.kind == "malformed" and said in failure.value.message, failure.value
