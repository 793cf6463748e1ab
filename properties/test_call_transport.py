"""The speed paths of a run hold its numbers bit for bit: what crosses the pipe to the worker (engine/transport.py),
broadcast rows repeated into reused buffers (engine/callform.py), Pearson lattice tails kept on disk
(stats/tables.py), Bennett's detectable shift scanned on arrays (stats/bennett.py), and calls sized at the rate of
the largest calls (engine/hangs.py)."""

from __future__ import annotations

import math
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.optimize import brentq

from specref.conformance.engine import callform
from specref.conformance.engine.transport import Packed, pack, unpack
from specref.stats import bennett, size, tables

pytestmark = pytest.mark.exact

ARRAYS = {
    "zeros": np.zeros(5000, np.int64),
    "same 2-d": np.full((300, 7), 3, np.int64),
    "signed range": np.arange(10_000, dtype=np.int64) - 5000,
    "tokens": np.random.default_rng(0).integers(0, 4, (65536, 1)),
    "wide values": np.random.default_rng(1).integers(0, 2**40, 5000),
    "int16": np.random.default_rng(2).integers(-100, 100, 9000).astype(np.int16),
    "bools": np.ones(10_000, bool),
    "floats": np.random.default_rng(3).random((100, 50)).astype(np.float32),
    "signed zeros": np.full(3000, -0.0),
    "fortran": np.asfortranarray(np.random.default_rng(4).integers(0, 5, (100, 80))),
    "empty": np.zeros(0, np.int64),
}


@pytest.mark.parametrize("name", list(ARRAYS))
def test_a_packed_array_unpacks_to_the_same_bytes_dtype_shape_and_layout(name):
    array = ARRAYS[name]
    message = {"x": array, "nested": ("array", array, [array])}
    back = unpack(pickle.loads(pickle.dumps(pack(message))))
    for got in (back["x"], back["nested"][1], back["nested"][2][0]):
        assert got.dtype == array.dtype and got.shape == array.shape and got.tobytes() == array.tobytes()
        assert got.flags.writeable and got.flags.c_contiguous == array.flags.c_contiguous
    assert back["nested"][0] == "array"


def test_packing_shrinks_the_probe_job_and_leaves_floats_alone():
    assert isinstance(pack(ARRAYS["tokens"]), Packed) and pack(ARRAYS["tokens"]).payload.dtype == np.uint8
    assert isinstance(pack(ARRAYS["zeros"]), Packed) and pack(ARRAYS["zeros"]).payload.nbytes == 8
    assert pack(ARRAYS["floats"]) is ARRAYS["floats"] and pack(ARRAYS["fortran"]) is ARRAYS["fortran"]
    assert pack(ARRAYS["wide values"]) is ARRAYS["wide values"]


@pytest.mark.parametrize("rows", [0, 1, 3, 64, 1000])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_a_repeated_row_is_torchs_expand_contiguous(rows, dtype):
    row = torch.rand(37).to(dtype)
    packed = ("row", row.view(torch.uint8).numpy(), (rows, 3, 37))
    built = callform._tensor(packed, dtype, "cpu")
    assert built.dtype == dtype and built.is_contiguous() and torch.equal(built, row.expand(rows, 3, 37).contiguous())


def test_a_reused_buffer_never_overwrites_an_input_the_verifier_kept():
    row = torch.arange(8, dtype=torch.float32)
    packed = ("row", row.view(torch.uint8).numpy(), (5, 2, 8))
    kept = callform._tensor(packed, torch.float32, "cpu")
    view = kept[1:3]  # a view keeps the buffer too
    kept.add_(100.0)
    second = callform._tensor(packed, torch.float32, "cpu")
    assert second.data_ptr() != kept.data_ptr() and torch.equal(second, row.expand(5, 2, 8))
    assert bool((view >= 100).all())
    address = second.data_ptr()
    del second
    third = callform._tensor(packed, torch.float32, "cpu")  # second's buffer is free again: reused, and refilled
    assert third.data_ptr() == address and torch.equal(third, row.expand(5, 2, 8))
    del kept, view, third


@pytest.fixture
def table_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECREF_CACHE", str(tmp_path))
    monkeypatch.delenv(tables.ENV, raising=False)
    tables.folder.cache_clear()
    size._tail.cache_clear()
    yield Path(tmp_path) / "stats"
    tables.folder.cache_clear()
    size._tail.cache_clear()


@pytest.mark.parametrize(("e", "df"), [(20, 2), (30, 5), (20, 40)])
def test_a_stored_lattice_tail_is_the_computed_one(table_folder, e, df):
    computed, escaped = size._lattice_tail(e, df)
    first = size._tail(e, df)  # computed and stored
    assert len(list(table_folder.glob(f"pearson-tail-{e}-{df}-*.npy"))) == 1
    size._tail.cache_clear()
    stored = size._tail(e, df)  # read back
    for tail, esc in (first, stored):
        assert np.array_equal(tail, computed) and esc == escaped and isinstance(esc, float)


def test_a_damaged_table_is_computed_again_and_another_codes_is_never_read(table_folder):
    size._tail(20, 3)
    (path,) = table_folder.glob("pearson-tail-20-3-*.npy")
    path.write_bytes(b"not a table")
    size._tail.cache_clear()
    assert np.array_equal(size._tail(20, 3)[0], size._lattice_tail(20, 3)[0])
    assert tables._fingerprint("specref.stats.size") in path.name  # the key names the code that computed it
    assert tables._fingerprint("specref.stats.bennett") != tables._fingerprint("specref.stats.size")


def test_without_a_folder_tables_are_computed_in_the_process(monkeypatch):
    monkeypatch.setenv(tables.ENV, "0")
    tables.folder.cache_clear()
    try:
        assert tables.folder() is None and tables.load("pearson-tail", (20, 2)) is None
        tables.save("pearson-tail", (20, 2), np.zeros(3))  # a no-op
    finally:
        tables.folder.cache_clear()


def _scalar_detectable_shift(n, alpha, beta, mu0, variance, lo, hi):
    """detectable_shift as it was before the array scan: miss_bound at each shift, in Python."""
    h_up, h_down = bennett.half_widths(n, alpha, variance, hi - mu0, mu0 - lo)
    sides = []
    for sign, h, reach in ((+1, h_up, hi - mu0), (-1, h_down, mu0 - lo)):
        if reach <= h:
            sides.append((math.inf, reach))
            continue
        shifts = h + (reach - h) * np.linspace(0.0, 1.0, bennett.SCAN_POINTS + 1)[1:]
        misses = [bennett.miss_bound(n, mu0, sign * d, h, lo, hi) for d in shifts.tolist()]
        above = [i for i, m in enumerate(misses) if m > beta]
        if not above:
            sides.append((h, reach))
        elif above[-1] == len(shifts) - 1:
            sides.append((math.inf, reach))
        else:
            i = above[-1]
            sides.append((brentq(lambda d, s=sign, hw=h: bennett.miss_bound(n, mu0, s * d, hw, lo, hi) - beta,
                                 float(shifts[i]), float(shifts[i + 1])), reach))  # fmt: skip
    if all(math.isinf(d) for d, _ in sides):
        return math.inf
    return max(math.nextafter(reach, math.inf) if math.isinf(d) else d for d, reach in sides)


@pytest.mark.parametrize("n", [1, 10, 257, 4096, 123_457, 10**7])
@pytest.mark.parametrize(("mu0", "variance", "gamma"), [(1.5, 0.3, 1), (3.9, 0.05, 4), (4.98, 0.0199, 4),
                                                        (2.0, 1.0, 8), (1.01, 0.0099, 4)])  # fmt: skip
def test_bennetts_array_scan_gives_the_scalar_scans_shift(n, mu0, variance, gamma):
    """np.exp and np.log differ from math's by ulps (the bounds agree to 1e-9, amplified by n and by the exponent's
    cancellation); the scan only brackets the last shift above beta, which brentq then finds on miss_bound itself,
    so the shift is the same number."""
    lo, hi = 1.0, gamma + 1.0
    for alpha, beta in ((1e-2, 0.05), (1e-3, 1e-3), (3.3e-7, 1e-3)):
        expected = _scalar_detectable_shift(n, alpha, beta, mu0, variance, lo, hi)
        assert bennett.detectable_shift(n, alpha, beta, mu0, variance, lo, hi) == expected
        h_up, _ = bennett.half_widths(n, alpha, variance, hi - mu0, mu0 - lo)
        if hi - mu0 > h_up:
            shifts = h_up + (hi - mu0 - h_up) * np.linspace(0.0, 1.0, bennett.SCAN_POINTS + 1)[1:]
            scalar = np.array([bennett.miss_bound(n, mu0, d, h_up, lo, hi) for d in shifts.tolist()])
            np.testing.assert_allclose(bennett._miss_bounds(n, mu0, shifts, h_up, lo, hi), scalar, rtol=1e-9)


def test_the_pool_gives_up_free_buffers_beyond_its_bound(monkeypatch):
    monkeypatch.setattr(callform, "POOL_BYTES", 1 << 16)
    row = np.arange(1024, dtype=np.uint8)
    for rows in range(1, 40):  # a new shape each time, each buffer free once its tensor is gone
        callform._repeat_row(row, (rows, 1))
    assert sum(b.nbytes for b in callform._pool) <= (1 << 16) + 40 * 1024


def _scanned_critical(alpha, df, e):
    """pearson_critical's lattice search for df <= LATTICE_DF as it was: every point in order, from the smallest."""
    level = alpha / size.REAL_E_FACTOR
    tail, _ = size._tail(e, df)
    critical = float(np.flatnonzero(tail <= level)[0]) / e
    candidates = sorted({math.ceil((x * critical) - 1e-9) / x for x in size._span(e, df)} | {critical})
    points = sorted({q / x for x in size._span(e, df) for q in range(int(critical * x), int(critical * x * 1.5) + 2)})
    return next(p for p in points if p >= candidates[0] and size._lattice_p_value(p, df, e) <= level)


@pytest.mark.parametrize(("alpha", "df", "e"), [(1e-2, 2, 20), (1.35e-5, 2, 30), (1e-7, 3, 20), (3.3e-7, 2, 50),
                                                (1e-3, 3, 30), (2.7e-6, 3, 20)])  # fmt: skip
def test_the_critical_values_bisection_finds_the_scans_point(alpha, df, e):
    """The p-value only falls along the sorted lattice points, so bisection finds the scan's first point."""
    assert size.pearson_critical.__wrapped__(alpha, df, e) == _scanned_critical(alpha, df, e)


def test_calls_are_sized_at_the_rate_of_the_largest_calls_not_a_warm_ups_fixed_cost():
    from specref.conformance.engine.hangs import HangLimits

    limits = HangLimits(60.0, 30.0)
    limits.record("probe", 8, 8, 0.004)  # 0.5 ms a row: the verifier's fixed cost per call, over 8 rows
    assert limits.bulk_rate("probe") == pytest.approx(0.0005)
    limits.record("probe", 65536, 8, 0.02)
    assert limits.bulk_rate("probe") == pytest.approx(0.02 / 65536)  # a call 2x larger and more: its own rate
    limits.record("probe", 40000, 8, 0.03)  # as large as half the largest: a slower machine re-rates the calls
    assert limits.bulk_rate("probe") == pytest.approx(0.03 / 40000)
    limits.record("probe", 100, 8, 0.01)  # a small call (the slice's last) changes nothing
    assert limits.bulk_rate("probe") == pytest.approx(0.03 / 40000)
    assert limits.row_rate["probe"] == pytest.approx(0.0005) and limits.bulk_rate("other") is None  # hangs: slowest


def test_saving_a_table_removes_the_same_keys_tables_of_other_code(table_folder):
    table_folder.mkdir(parents=True, exist_ok=True)
    other = table_folder / "pearson-tail-20-2-0123456789abcdef.npy"
    unrelated = table_folder / "pearson-tail-20-22-0123456789abcdef.npy"
    np.save(other, np.zeros(2))
    np.save(unrelated, np.zeros(2))
    size._tail(20, 2)
    assert not other.exists() and unrelated.exists()
    assert len(list(table_folder.glob("pearson-tail-20-2-*.npy"))) == 1
