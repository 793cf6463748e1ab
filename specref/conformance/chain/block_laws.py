"""Block verification's expected laws on a scenario's state machine (Sun et al., ICLR 2025; specref.reference.block).

With b_0 = 1, b_k = min(1, b_{k-1} p(x_k) / q(x_k)) along the drafted path x_1..x_k (drawn from q, the states
following next_state) and r_k = sum_y (b_k p_k(y) - q_k(y))_+, block verification of n drafts has

  P(tau >= k | x_1..x_k) = b_k,    P(tau = k, x_1..x_k) = q(x_1..x_k) r_k  (k < n),    P(tau = n, x) = q(x) b_n,

and given tau = k < n the correction is drawn from (b_k p_k - q_k)_+ / r_k (the path's weights, not a function of
the state alone). So the accepted-count law is E_q[r_k] for k < n and E_q[b_n] at n, and the correction law in
state s mixes (b p_s - q_s)_+ over the paths that end in s, weighted by their q-probability. Both are computed here
in float64 by walking the paths of k < g drafts (paths with b = 0 dropped: they never stop again; paths with equal
(state, b) merged), each entry a sum of non-negative terms, so a law that is exactly 0 in the reals is 0 here.

Point-mass drafts (draft_probs=None) verify as the token rule does (q_k is the point mass at x_{k+1}: b_k =
prod p(x_i), the residual is p without the next draft): laws.py keeps its point-mass formulas for them.
"""

from __future__ import annotations

import numpy as np

#: Entries of a [paths, V] block computed at once (memory bound of one chunk: 8 bytes each, a few arrays).
CHUNK = 1 << 21


def _merge(state: np.ndarray, b: np.ndarray, w: np.ndarray):
    """Paths with equal (state, b) merged, their q-probabilities added."""
    keys = np.stack([state.astype(np.float64), b], 1)
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    merged = np.zeros(len(unique))
    np.add.at(merged, inverse.ravel(), w)
    return unique[:, 0].astype(np.int64), unique[:, 1], merged


def _chunks(m: int, v: int):
    step = max(1, CHUNK // max(v, 1))
    for lo in range(0, m, step):
        yield slice(lo, min(m, lo + step))


def _walk(sc, start: int, gamma: int):
    """For k = 0..gamma-1: (state [M], b_k [M], q-probability [M]) of the paths of k drafts from `start`."""
    state, b, w = np.array([start]), np.ones(1), np.ones(1)
    for k in range(gamma):
        yield state, b, w
        if k == gamma - 1:
            return
        p, q = sc.target[state], sc.draft[state]  # [M, V]
        ratio = np.divide(p, q, out=np.zeros_like(p), where=q > 0)
        nb = np.minimum(1.0, b[:, None] * ratio)
        nw = w[:, None] * q
        keep = (nw > 0) & (nb > 0)
        state, b, w = _merge(sc.next_state[state][keep], nb[keep], nw[keep])


def laws(sc, start: int) -> dict:
    """{"stop": [g] E_q[r_k] (P(tau = k) for k < n), "tail": [g+1] E_q[b_k] (P(tau >= k)),
    "correction": [S, V] sum over paths of q-probability x (b p_s - q_s)_+ in the state s they end in}."""
    key = (id(sc), start)
    if key in _CACHE and _CACHE[key][0] is sc:
        return _CACHE[key][1]
    s_count, v = sc.target.shape
    g = sc.gamma
    stop, tail = np.zeros(g), np.ones(g + 1)
    correction = np.zeros((s_count, v))
    for k, (state, b, w) in enumerate(_walk(sc, start, g)):
        r_total = next_b = 0.0
        for part in _chunks(len(state), v):
            st, bb, ww = state[part], b[part], w[part]
            p, q = sc.target[st], sc.draft[st]
            weighted = ww[:, None] * np.clip(bb[:, None] * p - q, 0.0, None)  # [m, V]
            for s in np.unique(st):
                correction[s] += weighted[st == s].sum(0)
            r_total += float(weighted.sum())
            ratio = np.divide(p, q, out=np.zeros_like(p), where=q > 0)
            next_b += float((ww[:, None] * q * np.minimum(1.0, bb[:, None] * ratio)).sum())
        stop[k], tail[k + 1] = r_total, next_b
    out = {"stop": stop, "tail": tail, "correction": correction}
    _CACHE[key] = (sc, out)
    return out


#: (id(scenario), start) -> (scenario, laws): the scenario is held, so its id is never reused while cached.
_CACHE: dict = {}


def length_law(sc, start: int, num_draft: int) -> np.ndarray:
    """[g+1]: P(A = k) for a block of num_draft drafts: E_q[r_k] for k < num_draft, E_q[b_num_draft] at it."""
    law = np.zeros(sc.gamma + 1)
    found = laws(sc, start)
    law[:num_draft] = found["stop"][:num_draft]
    law[num_draft] = found["tail"][num_draft]
    return law


def correction_law(sc) -> np.ndarray:
    """[S, V]: the correction's law given a rejection (tau < g) in each state, from the scenario's start state."""
    rows = laws(sc, int(sc.starts[0]))["correction"]
    z = rows.sum(1, keepdims=True)
    return np.divide(rows, z, out=np.zeros_like(rows), where=z > 0)


def first_token_given_drafts(sc, drafts) -> np.ndarray:
    """[V]: the first emitted token's law when every row carries the drafts x_1..x_g (identical rows): x_1 when
    tau >= 1, with probability 1 - prod_{i >= 1} (1 - h_i) given the drafts; else the correction (p_0 - q_0)_+."""
    from ...reference.block import weights

    states = [int(sc.starts[0])]
    for x in drafts[:-1]:
        states.append(int(sc.next_state[states[-1], x]))
    states.append(int(sc.next_state[states[-1], drafts[-1]]))
    p = [sc.target[s].tolist() for s in states]
    q = [sc.draft[s].tolist() for s in states[:-1]]
    _, h = weights(p, q, [int(x) for x in drafts])
    stay = float(np.prod([1.0 - hi for hi in h[1:]]))  # P(tau = 0 | drafts)
    residual = np.clip(sc.target[states[0]] - sc.draft[states[0]], 0.0, None)
    law = stay * (residual / residual.sum() if residual.sum() > 0 else sc.target[states[0]])
    law[int(drafts[0])] += 1.0 - stay
    return law / law.sum()
