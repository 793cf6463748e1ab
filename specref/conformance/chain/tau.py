"""The mean tokens per cycle tau: a derived number beside its theory value, not a test (issue 33, item 8).

tau = A + 1 of a full-draft row (num_draft = g). Its mean is a function of the accepted-count table that
accepted_length_law already tests (reports/one-table.md: a test of the mean adds no power to that law's test), so it
spends no alpha: the report gives the observed mean with a confidence interval at LEVEL and the rule's value,
(1 - a^(g+1)) / (1 - a) for context-free laws (a = 1 - Z), the exact DP of laws.length_law otherwise.

The interval is Hoeffding's on [1, g+1]: valid at every n and for every law of tau (whatever a verifier does), no
variance assumed; half-width g sqrt(log(2 / (1 - LEVEL)) / (2 n)).
"""

from __future__ import annotations

import math

import numpy as np

from . import laws

#: The confidence level of the interval printed beside tau.
LEVEL = 0.95


def applies(sc) -> bool:
    """A scenario with one start state, fixed num_draft and its own laws (not the probe, identical or joint rows)."""
    return not (sc.probe or sc.identical_rows or sc.joint or sc.ragged) and len(sc.starts) == 1


def theory(sc, rule: str, counts: np.ndarray) -> float:
    """The rule's mean of tau over the start states of the full-draft rows `counts` [start state, A]."""
    tau = np.arange(1, sc.gamma + 2)
    rows = counts.sum(1)
    return float(sum(rows[s] * (laws.length_law(sc, int(s), sc.gamma, rule) @ tau) for s in np.flatnonzero(rows))
                 / rows.sum())  # fmt: skip


def estimate(sc, tally, rule: str, level: float = LEVEL) -> dict | None:
    """report.json's "tau" of a scenario: {n, observed, ci, level, interval, theory, formula}, or None where it does
    not apply or fewer than 2 full-draft rows were seen."""
    if not applies(sc):
        return None
    counts = tally.length[:, sc.gamma, :]  # full-draft rows: [start state, A]
    n = int(counts.sum())
    if n < 2:
        return None
    tau = np.arange(1, sc.gamma + 2)
    observed = float(counts.sum(0) @ tau) / n
    half = sc.gamma * math.sqrt(math.log(2 / (1 - level)) / (2 * n))
    return {
        "n": n,
        "observed": observed,
        "ci": [max(1.0, observed - half), min(sc.gamma + 1.0, observed + half)],
        "level": level,
        "interval": "Hoeffding on [1, g+1] (every law of tau, no variance assumed)",
        "theory": theory(sc, rule, counts),
        "formula": "(1 - a^(g+1)) / (1 - a), a = 1 - Z" if sc.context_free else "exact DP of the accepted-count law",
    }


__all__ = ["LEVEL", "applies", "estimate", "theory"]
