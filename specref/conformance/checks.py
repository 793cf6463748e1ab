"""The checks: T0 invariants on every verify call, and the T2 laws built from counts accumulated over calls.

T0 (deterministic, a single violation is a certain failure, no false-alarm budget):
  t0_shape              output is a [B, g+1] int64 tensor
  t0_valid_ids          every entry is -1 or a token id in [0, V)
  t0_padding            1..num_draft+1 tokens, left-aligned, then only -1
  t0_prefix_is_drafts   all tokens but the last equal the drafts
  t0_zero_prob_emitted  no emitted token has target probability 0 in its row
  t0_residual_support   a correction lies where max(0, p - q) > 0 (or the residual is numerically empty)
T2 (statistical; alpha from the run's budget), per scenario:
  first_token_law, correction_law, bonus_law, reject_rate, accepted_length_law, mean_tau,
  and on special scenarios batch_composition, ragged_law, point_mass_law, row_independence, joint_law.
Rows that violate a T0 invariant are left out of the T2 counts (their tokens cannot be indexed or are certainly
wrong). That selection can itself move a law, so once a T0 check fails, later T2 failures may be its echo: read a
report's failures most certain first (Report.caught_by orders them so).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..stats import CheckResult, binomial_positions, chisquare_gof, chisquare_strata, mean_ci, not_tested
from . import laws
from .scenarios import Batch, Scenario

#: Floor on Var(tau) in mean_tau: the float rounding of the expected laws (see Tally._mean_tau).
VARIANCE_FLOOR = 1e-12

T0_CHECKS = (
    "t0_shape",
    "t0_valid_ids",
    "t0_padding",
    "t0_prefix_is_drafts",
    "t0_zero_prob_emitted",
    "t0_residual_support",
)

DESCRIPTIONS = {
    "t0_shape": "output is a [B, g+1] int64 tensor",
    "t0_valid_ids": "every entry is -1 or a token id in [0, V)",
    "t0_padding": "1..num_draft+1 tokens, left-aligned, then -1",
    "t0_prefix_is_drafts": "emitted tokens before the last equal the drafts",
    "t0_zero_prob_emitted": "no emitted token has target probability 0",
    "t0_residual_support": "a correction token lies in the support of max(0, p - q)",
    "first_token_law": "law of the first emitted token equals p_1",
    "correction_law": "given a rejection, the correction follows max(0, p - q) / Z (p without d for point mass)",
    "bonus_law": "given all drafts accepted, the bonus follows p_{g+1}",
    "reject_rate": "P(reject at i | reached i) equals Z_i, every position",
    "accepted_length_law": "accepted-count law equals the truncated geometric / exact law",
    "mean_tau": "mean tokens per cycle equals the closed form",
    "batch_composition": "each component of a mixed batch keeps its own first-token law",
    "ragged_law": "with ragged num_draft, the accepted-count law per num_draft is exact",
    "point_mass_law": "point-mass drafts (draft_probs=None): the first-token law equals p_1",
    "row_independence": "identical rows in one call give independent outputs",
    "joint_law": "first n tokens over repeated cycles follow prod p",
    "reproducibility": "same seed gives the same tokens; another seed gives others",
    "coupling": "with injected uniforms, tokens equal the reference engine's, token for token",
    "adapter": "the adapter ran: no exception, no hang, output convertible",
}


def t0_result(name: str, violations: int, n: int, details: dict | None = None) -> CheckResult:
    """A deterministic check as a record: p_value 0 on any violation, no alpha spent."""
    return CheckResult(
        name, float(violations), 0, 0.0 if violations else 1.0, n, 0.0, float("nan"), violations == 0, 0.0,
        {"tier": "T0", **(details or {})},
    )  # fmt: skip


def t2_plan(scenario: Scenario) -> list[str]:
    """The T2 check kinds a scenario runs, fixed before any data (the budget is split over this plan)."""
    if scenario.identical_rows:
        return ["row_independence"]
    if scenario.name.startswith("joint_"):
        return ["joint_law"]
    if len(scenario.starts) > 1:
        return ["batch_composition", "accepted_length_law"]
    if scenario.ragged:
        return ["first_token_law", "ragged_law", "bonus_law"]
    if scenario.point_mass:
        return ["point_mass_law", "correction_law", "accepted_length_law", "bonus_law"]
    plan = ["first_token_law"]
    z = laws.rejection_mass(scenario)
    if (z > 0).any():
        plan.append("correction_law")
    if laws.length_law(scenario, int(scenario.starts[0]), scenario.gamma)[-1] > 0:
        plan.append("bonus_law")
    if scenario.context_free:
        plan.append("reject_rate")
    if 0 < z.max() and z.min() < 1:  # the length law is random
        plan += ["accepted_length_law", "mean_tau"]
    return plan


@dataclass
class Tally:
    """Everything a scenario's checks need, accumulated over verify calls."""

    scenario: Scenario
    seed: int = 0
    rows: int = 0
    seconds: float = 0.0  # time spent inside the adapter
    violations: dict = field(default_factory=lambda: {name: 0 for name in T0_CHECKS})
    examples: dict = field(default_factory=dict)  # first violation of each T0 check
    pairs: np.ndarray | None = None  # row independence: [V, V] first tokens of rows (2j, 2j+1)
    joint: np.ndarray | None = None  # joint law: counts [V^n] of the first n tokens over repeated cycles

    def __post_init__(self):
        s, v, g = *self.scenario.target.shape, self.scenario.gamma
        strata = s * v if self.scenario.point_mass else s
        self.first = np.zeros((s, v), dtype=np.int64)
        self.correction = np.zeros((strata, v), dtype=np.int64)
        self.bonus = np.zeros((s, v), dtype=np.int64)
        self.length = np.zeros((s, g + 1, g + 1), dtype=np.int64)  # [start state, num_draft, accepted]
        self.reached = np.zeros(g, dtype=np.int64)
        self.rejected = np.zeros(g, dtype=np.int64)

    def add(self, batch: Batch, out: np.ndarray, probs_seen: tuple[np.ndarray, np.ndarray | None], where: dict) -> None:
        """T0-check one call's output [B, g+1] and count what the T2 checks need.

        probs_seen: the target and draft rows as the adapter received them (after the cast to its dtype), so
        that support checks use the numbers the adapter saw.
        """
        sc, g, v = self.scenario, self.scenario.gamma, self.scenario.vocab_size
        rows = out.shape[0]
        self.rows += rows
        valid = out >= 0
        in_range = (~valid & (out == -1)) | (valid & (out < v))
        ok_ids = in_range.all(1)
        k = valid.cumprod(1).sum(1)  # leading emitted tokens
        ok_pad = (valid.sum(1) == k) & (k >= 1) & (k <= batch.num_draft + 1)
        self._count("t0_valid_ids", ~ok_ids, batch, out, where)
        self._count("t0_padding", ok_ids & ~ok_pad, batch, out, where)
        good = ok_ids & ok_pad
        accepted = np.clip(k - 1, 0, g)  # A
        positions = np.arange(g + 1)[None, :]
        drafts = np.concatenate([batch.draft_tokens, np.full((rows, 1), -1)], 1)
        prefix_bad = ((positions < accepted[:, None]) & (out != drafts)).any(1)
        self._count("t0_prefix_is_drafts", good & prefix_bad, batch, out, where)
        good &= ~prefix_bad

        target_seen, draft_seen = probs_seen
        safe = np.where(valid & (out < v), out, 0)  # rows with bad ids were counted above
        p_at = np.take_along_axis(target_seen, safe[:, :, None], 2)[:, :, 0]  # [B, g+1]
        zero_hit = (valid & (p_at <= 0)).any(1)
        self._count("t0_zero_prob_emitted", good & zero_hit, batch, out, where)
        good &= ~zero_hit

        last = out[np.arange(rows), accepted]  # the correction or bonus token
        rejected = good & (accepted < batch.num_draft)
        idx = np.flatnonzero(rejected)
        if idx.size:
            pos = accepted[idx]
            p_rows = target_seen[idx, pos]  # [R, V]
            if draft_seen is None:
                q_rows = np.zeros_like(p_rows)
                q_rows[np.arange(idx.size), batch.draft_tokens[idx, pos]] = 1.0
            else:
                q_rows = draft_seen[idx, pos]
            residual = p_rows - q_rows
            empty = ~(residual > 0).any(1)
            outside = ~empty & (residual[np.arange(idx.size), last[idx]] <= 0)
            bad = np.zeros(rows, dtype=bool)
            bad[idx[outside]] = True
            self._count("t0_residual_support", bad, batch, out, where)
            good &= ~bad

        rows_ok = np.flatnonzero(good)
        st, acc, nd = batch.states[rows_ok], accepted[rows_ok], batch.num_draft[rows_ok]
        np.add.at(self.first, (st[:, 0], out[rows_ok, 0]), 1)
        np.add.at(self.length, (st[:, 0], nd, acc), 1)
        rej = acc < nd
        state_at = st[np.arange(rows_ok.size), acc]
        corr_stratum = state_at[rej]
        if sc.point_mass:
            corr_stratum = corr_stratum * v + batch.draft_tokens[rows_ok[rej], acc[rej]]
        np.add.at(self.correction, (corr_stratum, last[rows_ok[rej]]), 1)
        np.add.at(self.bonus, (state_at[~rej], last[rows_ok[~rej]]), 1)
        for i in range(g):
            here = nd > i
            self.reached[i] += int((here & (acc >= i)).sum())
            self.rejected[i] += int((here & (acc == i)).sum())
        if sc.identical_rows:
            half = rows_ok[rows_ok % 2 == 0]
            half = half[np.isin(half + 1, rows_ok)]
            if self.pairs is None:
                self.pairs = np.zeros((v, v), dtype=np.int64)
            np.add.at(self.pairs, (out[half, 0], out[half + 1, 0]), 1)

    def _count(self, name: str, bad: np.ndarray, batch: Batch, out: np.ndarray, where: dict) -> None:
        hits = int(bad.sum())
        if not hits:
            return
        self.violations[name] += hits
        if name not in self.examples:
            row = int(np.flatnonzero(bad)[0])
            self.examples[name] = {
                **where,
                "row": row,
                "output": out[row].tolist(),
                "draft_tokens": batch.draft_tokens[row].tolist(),
                "num_draft": int(batch.num_draft[row]),
            }

    def t0_results(self) -> list[CheckResult]:
        return [
            t0_result(name, self.violations[name], self.rows, {"example": self.examples.get(name)})
            for name in T0_CHECKS
        ]

    def t2_results(self, alphas: dict[str, float]) -> list[CheckResult]:
        """One CheckResult per planned kind; alphas maps kind -> alpha."""
        return [self._t2(kind, alpha) for kind, alpha in alphas.items()]

    def _t2(self, kind: str, alpha: float) -> CheckResult:
        sc = self.scenario
        name = f"{kind}[{sc.name}]"
        if kind in ("first_token_law", "batch_composition"):
            return chisquare_strata(self.first, sc.target, alpha=alpha, name=name)
        if kind == "correction_law":
            residual = laws.point_mass_residuals(sc) if sc.point_mass else laws.residuals(sc)
            return chisquare_strata(self.correction, residual, alpha=alpha, name=name)
        if kind == "point_mass_law":  # the first-token law, under point-mass drafts
            return chisquare_strata(self.first, sc.target, alpha=alpha, name=name)
        if kind == "bonus_law":
            return chisquare_strata(self.bonus, sc.target, alpha=alpha, name=name)
        if kind == "reject_rate":
            z = float(laws.rejection_mass(sc)[0])
            result = binomial_positions(self.rejected, self.reached, z, alpha=alpha, name=name)
            rates = np.divide(self.rejected, self.reached, out=np.full(sc.gamma, np.nan), where=self.reached > 0)
            result.details.update(z=z, rate_by_position=rates.tolist(), reached=self.reached.tolist())
            return result
        if kind in ("accepted_length_law", "ragged_law"):
            observed = self.length.reshape(-1, sc.gamma + 1)
            expected = np.stack(
                [laws.length_law(sc, s, nd) for s in range(self.length.shape[0]) for nd in range(sc.gamma + 1)]
            )
            result = chisquare_strata(observed, expected, alpha=alpha, name=name)
            used = observed.sum(1) > 0
            result.details.update(
                observed=observed[used].sum(0).tolist(), expected=(expected[used].T @ observed[used].sum(1)).tolist()
            )
            return result
        if kind == "mean_tau":
            return self._mean_tau(alpha, name)
        if kind == "row_independence":
            single = _first_token_given_fixed_drafts(sc, self.seed)
            pairs = self.pairs if self.pairs is not None else np.zeros((sc.vocab_size,) * 2, dtype=np.int64)
            return chisquare_gof(pairs.ravel(), np.outer(single, single).ravel(), alpha=alpha, name=name) \
                if pairs.sum() else _no_data(name, alpha)  # fmt: skip
        raise ValueError(f"kind={kind!r} is not a T2 check of a single scenario")

    def _mean_tau(self, alpha: float, name: str) -> CheckResult:
        sc = self.scenario
        counts = self.length[:, sc.gamma, :]  # full-draft rows: [start state, A]
        n = int(counts.sum())
        if n < 2:
            return _no_data(name, alpha)
        tau = np.arange(1, sc.gamma + 2)
        expected_mean, variance = 0.0, 0.0
        for s in np.flatnonzero(counts.sum(1)):
            law = laws.length_law(sc, s, sc.gamma)
            m = float(law @ tau)
            expected_mean += counts[s].sum() * m / n
            variance += counts[s].sum() * float(law @ (tau - m) ** 2) / n
        total = float(counts.sum(0) @ tau)
        total_sq = float(counts.sum(0) @ tau**2)
        # A tau that is certain up to float rounding of the laws (p == q gives Z ~ 1e-16, not 0) has a variance of
        # that order; floor it so rounding is not read as a deviation. A real one moves the mean by >= 1/n >> 1e-6.
        variance = max(variance, VARIANCE_FLOOR)
        result = mean_ci(summary=(n, total, total_sq), expected_mean=expected_mean, alpha=alpha, name=name,
                         known_variance=variance)  # fmt: skip
        result.details["theory"] = "tau = (1 - a^(g+1)) / (1 - a) for context-free laws; exact DP otherwise"
        return result


def _no_data(name: str, alpha: float) -> CheckResult:
    return not_tested(name, "not tested (no observations)", 0, {"note": "no observations"})


def _first_token_given_fixed_drafts(sc: Scenario, seed: int) -> np.ndarray:
    """Law of the first emitted token when every row shares one draft sequence (the identical-rows scenario)."""
    batch = sc.inputs(1, seed, 0)  # the shared drafts depend on the seed only
    p, q, d = sc.target[0], sc.draft[0], batch.draft_tokens[0]
    a1 = min(1.0, p[d[0]] / q[d[0]])
    law = (1 - a1) * laws.residuals(sc)[0]
    law[d[0]] += a1
    return law / law.sum()


def joint_law_result(counts: np.ndarray, sc: Scenario, n: int, alpha: float) -> CheckResult:
    """counts [V^n] of the first n tokens (row-major) over repeated cycles, against prod_i P[state_i, x_i]."""
    expected = laws.sequence_law(sc, int(sc.starts[0]), n)
    return chisquare_gof(counts, expected, alpha=alpha, name=f"joint_law[{sc.name}]")
