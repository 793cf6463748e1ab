"""Expected laws for a scenario's state machine (see scenarios.py), in float64.

With m[s, x] the probability that a draft x is drawn in state s and accepted -- min(P[s, x], Q[s, x]) for sampled
drafts, Q[s, x] * P[s, x] for point-mass drafts (drawn from Q, accepted w.p. P) -- the accepted count A obeys
P(A >= k) = sum over draft paths of prod m, computed forward over states (cf. specref.theory.accepted_at_least).
"""

from __future__ import annotations

import numpy as np

from .scenarios import Scenario


def accept_mass(scenario: Scenario) -> np.ndarray:
    """m [S, V]: probability of drafting x in state s and accepting it."""
    if scenario.point_mass:
        return scenario.draft * scenario.target
    return np.minimum(scenario.target, scenario.draft)


def accepted_at_least(scenario: Scenario, start: int, num_draft: int) -> np.ndarray:
    """[num_draft + 1]: P(A >= k) for k = 0..num_draft, from start state `start`."""
    m = accept_mass(scenario)
    states = scenario.target.shape[0]
    alpha = np.zeros(states)
    alpha[start] = 1.0
    out = [1.0]
    for _ in range(num_draft):
        nxt = np.zeros(states)
        np.add.at(nxt, scenario.next_state.ravel(), (alpha[:, None] * m).ravel())
        alpha = nxt
        out.append(alpha.sum())
    return np.asarray(out)


def length_law(scenario: Scenario, start: int, num_draft: int) -> np.ndarray:
    """[g+1]: P(A = k) for k = 0..g (zero past num_draft)."""
    tail = accepted_at_least(scenario, start, num_draft)
    law = np.zeros(scenario.gamma + 1)
    law[: num_draft + 1] = tail - np.append(tail[1:], 0.0)
    return np.clip(law, 0.0, None)


def residuals(scenario: Scenario) -> np.ndarray:
    """[S, V] the correction law max(0, P - Q) / Z per state; a zero row where Z = 0 (no rejection possible)."""
    r = np.clip(scenario.target - scenario.draft, 0.0, None)
    z = r.sum(1, keepdims=True)
    return np.divide(r, z, out=np.zeros_like(r), where=z > 0)


def point_mass_residuals(scenario: Scenario) -> np.ndarray:
    """[S*V, V]: for point-mass draft d in state s (stratum s*V + d), P[s] without d, renormalised."""
    s, v = scenario.target.shape
    rows = np.repeat(scenario.target, v, axis=0)  # [S*V, V]
    rows[np.arange(s * v), np.tile(np.arange(v), s)] = 0.0
    z = rows.sum(1, keepdims=True)
    return np.divide(rows, z, out=np.zeros_like(rows), where=z > 0)


def rejection_mass(scenario: Scenario) -> np.ndarray:
    """[S]: Z[s] = 1 - sum_x m[s, x]."""
    return 1.0 - accept_mass(scenario).sum(1)


def sequence_law(scenario: Scenario, start: int, n: int) -> np.ndarray:
    """[V^n]: the target law of the first n tokens, prod_i P[state_i, x_i], states following next_state."""
    law = np.ones(1)
    states = np.array([start])
    for _ in range(n):
        law = (law[:, None] * scenario.target[states]).ravel()  # [V^k * V]
        states = scenario.next_state[states].ravel()
    return law
