"""What each chain T2 check needs, from a scenario's own probabilities under the declared rule (engine/sizing.py).

The share of a scenario's rows that feeds each check, before any output: rows start in each component with
probability 1/len(starts) and, ragged, draw num_draft ~ U{0..g}; the accepted count A then has laws.length_law, so
  first-token laws, the accepted-count law     every row
  the correction law                           P(A < num_draft)
  the bonus law                                P(A = num_draft)
  the reject rate at position i                P(num_draft > i, A >= i)   (one exact binomial test per position)
  row independence                             half the rows (pairs of rows)
  the joint law                                every sequence (a joint scenario's rows are its sequences)
Degrees of freedom are the unmerged ones (support sizes less one, summed over strata), which bound the merged.
"""

from __future__ import annotations

import numpy as np

from ..engine.joint import JOINT_TOKENS
from ..engine.sizing import Demand, rate_demand, tv_demand
from . import laws
from .kinds import _df


def _start_nd(sc):
    """[(start state, num_draft, probability)] of a row's start and num_draft."""
    nds = range(sc.gamma + 1) if sc.ragged else (sc.gamma,)
    w = 1.0 / (len(sc.starts) * len(nds))
    return [(int(s), nd, w) for s in sc.starts for nd in nds]


def _fractions(sc, rule):
    """(P(a rejection), P(all drafts accepted), [P(num_draft > i, A >= i)] for i < g)."""
    reject = bonus = 0.0
    reached = np.zeros(sc.gamma)
    for s, nd, w in _start_nd(sc):
        law = laws.length_law(sc, s, nd, rule)
        bonus += w * law[nd]
        reject += w * (1.0 - law[nd])
        tail = law[::-1].cumsum()[::-1]  # P(A >= i)
        reached[:nd] += w * tail[:nd]
    return reject, bonus, reached


def _two_bin_p0(rows: np.ndarray) -> float | None:
    """The rarer bin's probability of a single two-bin law (df = 1), else None."""
    support = rows[rows > 0]
    return float(support.min() / support.sum()) if support.size == 2 else None


def demands(sc, rule: str, tested: list[str], alphas: dict[str, float]) -> list[Demand]:
    """One Demand per tested check of scenario sc (several for reject_rate: one per position)."""
    if sc.probe:
        return []
    reject, bonus, reached = _fractions(sc, rule)
    out: list[Demand | None] = []
    for kind in tested:
        check = f"{kind}[{sc.name}]"
        alpha = alphas[check]
        if kind in ("first_token_law", "batch_composition", "point_mass_law"):
            first = sc.target[sc.starts]
            out.append(tv_demand(check, 1.0, alpha, _df(first), _two_bin_p0(first[0])))
        elif kind == "correction_law":
            law = laws.correction_law(sc, rule)
            out.append(tv_demand(check, reject, alpha, _df(law), _two_bin_p0(law[0]) if len(law) == 1 else None))
        elif kind == "bonus_law":
            out.append(tv_demand(check, bonus, alpha, _df(sc.target)))
        elif kind in ("accepted_length_law", "ragged_law"):
            rows = np.stack([laws.length_law(sc, s, nd, rule) for s, nd, _ in _start_nd(sc)])
            out.append(tv_demand(check, 1.0, alpha, _df(rows), _two_bin_p0(rows[0]) if len(rows) == 1 else None))
        elif kind == "reject_rate":
            z = float(laws.rejection_mass(sc, rule)[0])
            tested_positions = max(1, int((reached > 0).sum()))  # Bonferroni over the positions with a test
            out += [rate_demand(check, float(f), alpha / tested_positions, z) for f in reached if f > 0]
        elif kind == "row_independence":
            out.append(tv_demand(check, 0.5, alpha, sc.vocab_size**2 - 1))  # the support depends on the seed's drafts
        elif kind == "joint_law":
            law = laws.sequence_law(sc, int(sc.starts[0]), JOINT_TOKENS)
            out.append(tv_demand(check, 1.0, alpha, int((law > 0).sum()) - 1, _two_bin_p0(law)))
    return [d for d in out if d is not None]


__all__ = ["demands"]
