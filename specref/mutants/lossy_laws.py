"""Exact first-token laws of the lossy built-ins on a context-free scenario (one target row p, one draft row q, g
drafts), in float64 closed form: what `lossy_engines` emits first is x_1 when it keeps it, else its correction at
position 1, so with a(x) = P(keep x_1 = x) and c_x its correction law,
    law(y) = q(y) a(y) + sum_x q(x) (1 - a(x)) c_x(y).
The TV of this law from p is the exact TV the measured interval must cover (properties/test_lossy_coverage.py).
"""

from __future__ import annotations

import numpy as np


def _norm(w: np.ndarray, fallback: np.ndarray) -> np.ndarray:
    return w / w.sum() if w.sum() > 0 else fallback


def _entropy(p: np.ndarray) -> float:
    nz = p[p > 0]
    return float(-(nz * np.log(nz)).sum())


def first_token_law(rule: str, settings: tuple, p: np.ndarray, q: np.ndarray, gamma: int) -> np.ndarray:
    """[V] the law of the first emitted token (module docstring)."""
    v = len(p)
    exact = np.minimum(1.0, np.divide(p, q, out=np.ones(v), where=q > 0))
    residual = _norm(np.clip(p - q, 0, None), p)
    corrections = np.tile(residual, (v, 1))  # [x, y]
    if rule == "relaxed":
        topk, delta, phase = settings
        top = np.argsort(-p, kind="stable")[:topk]
        ok = np.zeros(v, bool)
        ok[top] = p[top] >= p.max() - delta
        keep = np.where(ok & (phase == "think"), 1.0, exact)
    elif rule == "sglang":
        single, acc = settings
        keep = np.where(p >= single, 1.0, np.minimum(1.0, p / acc))
        corrections = np.stack([_norm(np.where(np.arange(v) == x, 0.0, p), p) for x in range(v)])
    elif rule == "typical":
        threshold, alpha = settings
        keep = (p > min(threshold, alpha * np.exp(-_entropy(p)))).astype(float)
        corrections = np.tile(p, (v, 1))
    elif rule == "lenience":
        (lenience,) = settings
        keep = np.minimum(1.0, np.divide(p, lenience * q, out=np.ones(v), where=q > 0))
        corrections = np.tile(_norm(np.clip(p - lenience * q, 0, None), p), (v, 1))
    elif rule == "fly":
        entropy, window = settings
        window_accepted = float(np.minimum(p, q).sum()) ** window if gamma > window else 0.0
        override = window_accepted if _entropy(p) > entropy else 0.0
        keep = exact + (1 - exact) * override
    elif rule == "synthetic":
        keep = np.full(v, float(settings[0]))  # the first position's rate
        corrections = np.tile(p, (v, 1))
    elif rule == "exact":
        keep = exact
    else:
        raise ValueError(f"rule={rule!r} has no first-token law here")
    return q * keep + ((q * (1 - keep))[:, None] * corrections).sum(0)


def tv(law: np.ndarray, p: np.ndarray) -> float:
    return 0.5 * float(np.abs(law - p).sum())


__all__ = ["first_token_law", "tv"]
