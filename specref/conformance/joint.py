"""The joint-law loop: the first n tokens of each row over repeated verify cycles, counted over [V^n].

Each call feeds every row of a batch from the state its emitted tokens reached. A row leaves the count as soon as a
call's output for it breaks a T0 invariant (`t0_clean`): its tokens are certainly wrong, they may not even index
(an id V), and a row that emits nothing would never finish. So every row still counted gains a token per call, and
a batch ends within n calls. The first batch always runs to its end (at most n calls); after it, the loop starts no
batch past the scenario's slice of the budget and stops at the run's deadline mid-batch (that batch is dropped).
"""

from __future__ import annotations

import time

import numpy as np

from .scenarios import Batch, Scenario


def t0_clean(batch: Batch, out: np.ndarray, seen: tuple[np.ndarray, np.ndarray | None], vocab: int) -> np.ndarray:
    """[B] rows that pass the contract checks and emit no token of probability 0, tested as checks.Tally.add tests
    them (ids, padding, prefix, zero probability). Never the rule's residual support: the joint law is a law check,
    and dropping rows by a rule-specific check would bias it for every verifier following another lossless rule."""
    rows, width = out.shape
    gamma = width - 1
    emitted = out >= 0
    ok = ((out == -1) | (emitted & (out < vocab))).all(1)
    k = emitted.cumprod(1).sum(1)  # leading emitted tokens
    ok &= (emitted.sum(1) == k) & (k >= 1) & (k <= batch.num_draft + 1)
    accepted = np.clip(k - 1, 0, gamma)
    drafts = np.concatenate([batch.draft_tokens, np.full((rows, 1), -1)], 1)
    ok &= ~((np.arange(width)[None, :] < accepted[:, None]) & (out != drafts)).any(1)
    target_seen, draft_seen = seen
    safe = np.where(emitted & (out < vocab), out, 0)
    p_at = np.take_along_axis(target_seen, safe[:, :, None], 2)[:, :, 0]  # [B, g+1]
    ok &= ~(emitted & (p_at <= 0)).any(1)
    return ok


def joint_counts(feed, s: Scenario, rows: int, n: int, *, slice_end: float, deadline: float) -> np.ndarray:
    """counts [V^n] of the first n tokens of up to `rows` sequences (row-major index); T0-breaking rows left out.

    feed(rows, chunk, start_states) -> (batch, tokens, probs seen): one verify call, T0-checked and tallied.
    """
    v = s.vocab_size
    counts = np.zeros(v**n, dtype=np.int64)
    done, chunk = 0, 1000
    while done < rows and (done == 0 or time.perf_counter() < slice_end):
        batch_rows = min(s.rows_per_call, rows - done)
        state = np.full(batch_rows, s.starts[0])
        seqs = np.full((batch_rows, n), -1)
        filled = np.zeros(batch_rows, dtype=np.int64)
        counted = np.ones(batch_rows, dtype=bool)  # rows whose outputs so far passed T0
        while (counted & (filled < n)).any():
            if done and time.perf_counter() >= deadline:
                return counts  # this batch is unfinished: none of its rows is counted
            batch, out, seen = feed(batch_rows, chunk, state.copy())
            chunk += 1
            counted &= t0_clean(batch, out, seen, v) | (filled >= n)  # finished rows keep their sequence
            for j in range(out.shape[1]):
                emit = counted & (filled < n) & (out[:, j] >= 0)
                seqs[emit, filled[emit]] = out[emit, j]
                state[emit] = s.next_state[state[emit], out[emit, j]]
                filled += emit
        index = np.ravel_multi_index(seqs[counted].T, (v,) * n)
        np.add.at(counts, index, 1)
        done += batch_rows
    return counts
