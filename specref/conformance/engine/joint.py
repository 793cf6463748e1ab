"""The joint-law loop: the first n tokens of each row over repeated verify cycles, counted over [V^n].

Each call feeds every row of a batch from the state its emitted tokens reached. A row leaves the count as soon as a
call's output for it breaks a rule-free T0 invariant (the tally's `add` says which): its tokens are certainly wrong,
they may not even index (an id V), and a row that emits nothing would never finish. So every row still counted gains a
token per call, and a batch ends within n calls: batch b uses chunks 1000 + b n + j (j < n), fixed by b alone, so
a shard can run batch b without the batches before it. The first batch this process runs always runs to its end (at
most n calls); after it, the loop starts no batch past the scenario's slice of the budget and stops at the run's
deadline mid-batch (that batch is dropped). A run sized by time passes `size`, which shrinks each batch to the rows
its n calls can take in the slice's time left: the first keeps at least FIRST_BATCH_ROWS, and a later one that
would get fewer is not started.
"""

from __future__ import annotations

import time

import numpy as np

#: The tokens n of the joint law (chain and tree scenarios with `joint`): counted over [V^n].
JOINT_TOKENS = 3
#: A first batch sized by time keeps at least this many rows (n calls of them), so the joint law gets some counts.
FIRST_BATCH_ROWS = 256


def joint_counts(feed, s, rows: int, n: int, *, slice_end: float, deadline: float,
                 owns=lambda batch: True, size=None) -> np.ndarray:  # fmt: skip
    """counts [V^n] of the first n tokens of up to `rows` sequences (row-major index); T0-breaking rows left out.

    feed(rows, chunk, start_states) -> (batch, tokens, probs seen, [B] rows passing the rule-free T0 checks): one
    call, T0-checked and tallied (passes.feed).
    owns(batch): whether this process runs batch b (shards.py); the others are left to other shards.
    size(rows) -> the rows of a batch that fit in the slice's time left (None: fixed rows, every batch full).
    """
    v = s.vocab_size
    counts = np.zeros(v**n, dtype=np.int64)
    done, ran, b = 0, 0, -1  # rows of the batches so far (any shard's), batches run here, batch index
    while done < rows and (ran == 0 or time.perf_counter() < slice_end):
        b += 1
        batch_rows = min(s.rows_per_call, rows - done)
        if size is not None:  # sized by time (unsharded): a batch near its slice's end is shrunk, or not started
            fit, least = size(batch_rows), min(batch_rows, FIRST_BATCH_ROWS)
            if ran and fit < least:
                break  # no room left in the slice for a batch worth its n calls
            batch_rows = max(fit, least)
        if not owns(b):
            done += batch_rows
            continue
        chunk = 1000 + b * n
        state = np.full(batch_rows, s.starts[0])
        seqs = np.full((batch_rows, n), -1)
        filled = np.zeros(batch_rows, dtype=np.int64)
        counted = np.ones(batch_rows, dtype=bool)  # rows whose outputs so far passed T0
        while (counted & (filled < n)).any():
            if ran and time.perf_counter() >= deadline:
                return counts  # this batch is unfinished: none of its rows is counted
            _, out, _, good = feed(batch_rows, chunk, state.copy())
            chunk += 1
            counted &= good | (filled >= n)  # finished rows keep their sequence
            for j in range(out.shape[1]):
                emit = counted & (filled < n) & (out[:, j] >= 0)
                seqs[emit, filled[emit]] = out[emit, j]
                state[emit] = s.next_state[state[emit], out[emit, j]]
                filled += emit
        index = np.ravel_multi_index(seqs[counted].T, (v,) * n)
        np.add.at(counts, index, 1)
        done += batch_rows
        ran += 1
    return counts
