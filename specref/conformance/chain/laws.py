"""Expected laws for a scenario's state machine (see scenarios.py), in float64, under a verification rule.

The rows are those the verifier was given (Scenario.given): exact in its dtype and summing to exactly 1.

Rules (an adapter declares one with `rule=`; all of them keep the target law, they differ in acceptance):
  exact   speculative sampling (Leviathan et al. 2023, Chen et al. 2023): accept draft x with min(1, P(x)/Q(x)),
          on the first rejection emit from max(0, P - Q) / Z, after all accepts the bonus from P at g+1.
  match   sample-and-match (MLX-LM, llama.cpp's server, transformers' prompt lookup; also SGLang's target-only
          verification of sampled drafts): the target draws y ~ P; keep the draft while y == x, else emit y.
          Accept x with P(x); on a rejection of x, emit from P with x removed.
  block   block verification (Sun et al., ICLR 2025, arXiv 2403.10444; specref.reference.block): the weights b_k of
          the drafted path decide how many drafts are kept, P(A >= k) = E_q[b_k]; on tau < n the correction is
          drawn from (b_tau p - q)_+ / r_tau. Its laws depend on the path, not on the state alone: block_laws.py.
Point-mass drafts (draft_probs=None) are verified the same way under every rule: accept d with P(d), else emit
from P with d removed (block's weights b_k are then prod p(x_i), and its residual is p without the next draft).

With m[s, x] the probability that a draft x is drawn in state s and accepted -- min(P, Q) under exact, Q * P under
match and for point-mass drafts -- the accepted count A obeys P(A >= k) = sum over draft paths of prod m, computed
forward over states (cf. specref.theory.accepted_at_least).
"""

from __future__ import annotations

import numpy as np

from . import block_laws
from .columns import rows_any
from .scenarios import Scenario

RULES = {
    "exact": "exact speculative sampling: accept with min(1, p/q), correction from max(0, p - q) / Z",
    "match": "sample-and-match: the target samples y ~ p, drafts are kept while they equal y",
    "block": "block verification: P(tau >= k) = E_q[b_k], correction from (b_tau p - q)_+ (Sun et al., ICLR 2025)",
}
#: The rules whose reject indicator at a position depends on the state there alone, so that on a context-free
#: scenario P(reject at i | i reached) is Z at every position (reject_rate). Block's depends on the drafts before i:
#: 1 - E_q[b_{i+1}] / E_q[b_i], a function of the accepted-count law that accepted_length_law tests.
MEMORYLESS = ("exact", "match")


def _block(scenario: Scenario, rule: str) -> bool:
    """Block verification on sampled drafts (point masses verify as under the token rule: module docstring)."""
    return check_rule(rule) == "block" and not scenario.point_mass


def check_rule(rule: str) -> str:
    if rule not in RULES:
        raise ValueError(f"rule={rule!r} is not a rule specref knows; known: {sorted(RULES)}")
    return rule


def accept_mass(scenario: Scenario, rule: str = "exact") -> np.ndarray:
    """m [S, V]: probability of drafting x in state s and accepting it (under block: at b = 1, the first draft)."""
    if scenario.point_mass or check_rule(rule) == "match":
        return scenario.draft * scenario.target
    return np.minimum(scenario.target, scenario.draft)


def accepted_at_least(scenario: Scenario, start: int, num_draft: int, rule: str = "exact") -> np.ndarray:
    """[num_draft + 1]: P(A >= k) for k = 0..num_draft, from start state `start`."""
    if _block(scenario, rule):
        return block_laws.laws(scenario, start)["tail"][: num_draft + 1].copy()
    m = accept_mass(scenario, rule)
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


def length_law(scenario: Scenario, start: int, num_draft: int, rule: str = "exact") -> np.ndarray:
    """[g+1]: P(A = k) for k = 0..g (zero past num_draft)."""
    if _block(scenario, rule):
        return block_laws.length_law(scenario, start, num_draft)
    tail = accepted_at_least(scenario, start, num_draft, rule)
    law = np.zeros(scenario.gamma + 1)
    law[: num_draft + 1] = tail - np.append(tail[1:], 0.0)
    return np.clip(law, 0.0, None)


def _normalise_rows(rows: np.ndarray) -> np.ndarray:
    z = rows.sum(1, keepdims=True)
    return np.divide(rows, z, out=np.zeros_like(rows), where=z > 0)


def residuals(scenario: Scenario) -> np.ndarray:
    """[S, V] the exact rule's correction law max(0, P - Q) / Z per state; a zero row where Z = 0."""
    return _normalise_rows(np.clip(scenario.target - scenario.draft, 0.0, None))


def point_mass_residuals(scenario: Scenario) -> np.ndarray:
    """[S*V, V]: for point-mass draft d in state s (stratum s*V + d), P[s] without d, renormalised."""
    s, v = scenario.target.shape
    rows = np.repeat(scenario.target, v, axis=0)  # [S*V, V]
    rows[np.arange(s * v), np.tile(np.arange(v), s)] = 0.0
    return _normalise_rows(rows)


def correction_law(scenario: Scenario, rule: str = "exact") -> np.ndarray:
    """The law of the correction given a rejection: [S, V] per state, or [S*V, V] per (state, draft) for point mass.

    Under match, a rejection from state s emits y with probability sum_x Q(x) P(y) [y != x] = P(y) (1 - Q(y)).
    """
    if scenario.point_mass:
        return point_mass_residuals(scenario)
    if check_rule(rule) == "match":
        return _normalise_rows(scenario.target * (1.0 - scenario.draft))
    if rule == "block":
        return block_laws.correction_law(scenario)
    return residuals(scenario)


def correction_given_draft(scenario: Scenario, state: int, draft: int, rule: str = "exact") -> np.ndarray:
    """[V]: the correction's law once draft `draft` was rejected in state `state` (exact and match)."""
    if scenario.point_mass or check_rule(rule) == "match":
        return point_mass_residuals(scenario)[state * scenario.vocab_size + draft]
    return residuals(scenario)[state]


def accept_probability(scenario: Scenario, state: int, draft: int, rule: str = "exact") -> float:
    """P(accept | draft `draft` drawn in state `state`)."""
    p, q = scenario.target[state, draft], scenario.draft[state, draft]
    if scenario.point_mass or check_rule(rule) == "match":
        return float(p)
    return float(min(1.0, p / q)) if q > 0 else 0.0


def rejection_mass(scenario: Scenario, rule: str = "exact") -> np.ndarray:
    """[S]: Z[s] = P(reject | state s) = 1 - sum_x m[s, x], clipped to [0, 1] (rounding can leave -1e-16).

    Under block, Z[s] is the rejection mass at b = 1 (a block from state s stops at 0 with it): 0 iff p_s == q_s,
    where block never stops either (b stays 1 and r = 0), and 1 iff their supports are disjoint (b_1 = 0)."""
    if not scenario.point_mass and check_rule(rule) in ("exact", "block"):  # sum (P - Q)_+ is exact's Z, never < 0
        return np.clip(np.clip(scenario.target - scenario.draft, 0.0, None).sum(1), 0.0, 1.0)
    return np.clip(1.0 - accept_mass(scenario, rule).sum(1), 0.0, 1.0)


def may_correct(target_rows: np.ndarray, draft_rows: np.ndarray | None, drafts: np.ndarray, rule: str) -> np.ndarray:
    """[R, V] bool: where a correction may land after draft drafts[r] was rejected on rows (p, q).

    exact: where max(0, p - q) > 0, anywhere with p > 0 if that residual is numerically empty;
    block: as exact, a sound bound that needs no weight b (b p - q > 0 with b <= 1 implies p > q): the law of
    where it lands is correction_law's (computing b per row would charge the verifier's own rounding of b p = q);
    match and point mass: where p > 0, except the rejected draft.
    """
    rows = np.arange(len(drafts))
    if draft_rows is None or check_rule(rule) == "match":
        allowed = target_rows > 0
        allowed[rows, drafts] = False
        return allowed
    allowed = target_rows - draft_rows > 0
    empty = ~allowed.any(1)
    allowed[empty] = target_rows[empty] > 0
    return allowed


def may_correct_at(target_seen: np.ndarray, draft_seen: np.ndarray | None, rows: np.ndarray, positions: np.ndarray,
                   drafts: np.ndarray, tokens: np.ndarray) -> dict[str, np.ndarray]:  # fmt: skip
    """{rule: [R] bool}: may_correct(target_seen[rows, positions], ...)[r, tokens[r]] for every rule, computed at the
    tokens alone; a context-free batch (broadcast rows: strides 0) reads one row per position instead of [R, V]."""
    p = target_seen[rows, positions, tokens]
    match = (p > 0) & (tokens != drafts)
    if draft_seen is None:
        return dict.fromkeys(RULES, match)
    q = draft_seen[rows, positions, tokens]
    if target_seen.strides[0] == 0 and draft_seen.strides[0] == 0:  # the same rows in every batch row
        levels = np.unique(positions)
        empty_at = ~rows_any((target_seen[0, levels] - draft_seen[0, levels]) > 0)  # [levels]
        empty = empty_at[np.searchsorted(levels, positions)]
    else:
        empty = ~rows_any((target_seen[rows, positions] - draft_seen[rows, positions]) > 0)
    residual = (p - q > 0) | (empty & (p > 0))
    return {rule: match if check_rule(rule) == "match" else residual for rule in RULES}


def first_token_given_drafts(scenario: Scenario, drafts, rule: str = "exact") -> np.ndarray:
    """[V]: the law of the first emitted token when every row carries the drafts `drafts` [g] from the start state."""
    if _block(scenario, rule):
        return block_laws.first_token_given_drafts(scenario, drafts)
    start, d = int(scenario.starts[0]), int(drafts[0])
    a1 = accept_probability(scenario, start, d, rule)
    law = (1 - a1) * correction_given_draft(scenario, start, d, rule)
    law[d] += a1
    return law / law.sum()


def sequence_law(scenario: Scenario, start: int, n: int) -> np.ndarray:
    """[V^n]: the target law of the first n tokens, prod_i P[state_i, x_i], states following next_state."""
    law = np.ones(1)
    states = np.array([start])
    for _ in range(n):
        law = (law[:, None] * scenario.target[states]).ravel()  # [V^k * V]
        states = scenario.next_state[states].ravel()
    return law
