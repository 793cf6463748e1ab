"""Bin merging for Pearson chi-square, a function of the expected counts only.

Tokens with expected probability 0 are "impossible": they get no bin, and a single observation on one is a certain
failure (handled by the checks, not here). The possible tokens are sorted by expected count (ascending, ties by
token id); tokens whose expected count is below min_expected are pooled greedily from the smallest up, closing a
bin as soon as it reaches min_expected; a leftover tail joins the last pooled bin. If the small tokens together
stay below min_expected, they pool with the smallest large tokens. Tokens with expected count >= min_expected keep
their own bin. Every bin then holds >= min_expected expected draws, unless the whole sample is smaller than that
(one bin, df = 0).

What merging can hide: inside a pooled bin G the chi-square sees only sum_{x in G} (p(x) - p0(x)). The part of the
TV that cancels inside G is min(sum_G (p - p0)^+, sum_G (p - p0)^-) <= p0(G). Summed over pooled bins,
TV(merged) >= TV - hidden_mass, where hidden_mass = sum of p0 over bins holding more than one token.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ._args import check_count, check_positive, check_probs


class Bins(NamedTuple):
    """Bins as positions into `order`: bin b holds order[starts[b]:starts[b + 1]] (the last runs to the end)."""

    order: np.ndarray  # [K] possible token ids, by ascending expected count
    starts: np.ndarray  # [B] first position of each bin in order
    impossible: np.ndarray  # token ids with expected probability 0
    hidden_mass: float  # p0 mass in bins with more than one token

    @property
    def sizes(self) -> np.ndarray:  # [B]
        return np.diff(np.append(self.starts, self.order.size))

    def groups(self) -> list[np.ndarray]:
        return np.split(self.order, self.starts[1:])

    def sum(self, values: np.ndarray) -> np.ndarray:  # values [V] -> [B] per-bin totals
        return np.add.reduceat(values[self.order], self.starts)


def bins_for(expected_probs: np.ndarray, n: int, min_expected: float) -> Bins:
    """Merge for already-validated probabilities (see the module docstring for the rule)."""
    possible = np.flatnonzero(expected_probs > 0)
    impossible = np.flatnonzero(expected_probs == 0)
    order = possible[np.argsort(expected_probs[possible], kind="stable")]
    counts = n * expected_probs[order]  # ascending expected counts
    n_small = int(np.searchsorted(counts, min_expected, side="left"))

    starts: list[int] = []
    bin_start, running = 0, 0.0
    for position, count in enumerate(counts[:n_small].tolist()):
        running += count
        if running >= min_expected:
            starts.append(bin_start)
            bin_start, running = position + 1, 0.0
    first_alone = n_small  # from here on every token keeps its own bin
    if bin_start < n_small and not starts:
        # the small tokens together stay below min_expected: pool them with the smallest large tokens
        starts.append(0)
        while running < min_expected and first_alone < counts.size:
            running += counts[first_alone]
            first_alone += 1
    # (a leftover tail after a closed bin has no start of its own, so it joins that bin)
    starts_array = np.concatenate([np.asarray(starts, dtype=np.int64), np.arange(first_alone, counts.size)])
    if starts_array.size == 0:
        starts_array = np.zeros(1, dtype=np.int64)
    sizes = np.diff(np.append(starts_array, order.size))
    bin_probs = np.add.reduceat(expected_probs[order], starts_array)
    hidden_mass = float(bin_probs[sizes > 1].sum())
    return Bins(order, starts_array, impossible, min(1.0, hidden_mass))


def merge_bins(expected_probs, n: int, min_expected: float = 20.0) -> tuple[list[np.ndarray], float]:
    """Group token ids into chi-square bins by expected counts n * expected_probs only, never by observed counts.

    Returns (groups, hidden_mass): groups is a list of int arrays of token ids (impossible tokens, with expected
    probability 0, belong to no group), and hidden_mass is the expected probability in groups of more than one
    token, a bound on the TV that merging can hide (TV on the merged bins >= TV - hidden_mass).
    """
    probs = check_probs("expected_probs", expected_probs)
    n = check_count("n", n, minimum=1)
    min_expected = check_positive("min_expected", min_expected)
    bins = bins_for(probs, n, min_expected)
    return bins.groups(), bins.hidden_mass
