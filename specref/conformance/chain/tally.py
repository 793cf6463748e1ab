"""The chain tally: T0 invariants on every verify call, and the counts the T2 laws are tested on.

Each kind's family, plan predicate (why some cannot fail) and test are declared in the check registry
(engine/registry.py, kinds.py); the tally counts what they read (its arrays are the counters the kinds declare,
and what a shard carries).
T0 (deterministic, a single violation is a certain failure, no false-alarm budget):
  t0_valid_ids          every entry is -1 or a token id in [0, V)
  t0_padding            1..num_draft+1 tokens, left-aligned, then only -1
  t0_prefix_is_drafts   all tokens but the last equal the drafts
  t0_zero_prob_emitted  no emitted token has target probability 0
  t0_residual_support   a correction lies where the declared rule can put it (a rule check)
(The output's shape and dtype are checked on every call before any of these: a malformed output fails `adapter`.)
T2 (statistical; alpha from the run's budget), per scenario: the chain kinds of tier T2 in kinds.py.
Rows that break a contract check (bad ids or padding, a prefix that is not the drafts, a token of probability 0)
are left out of the T2 counts: their tokens cannot be indexed or are certainly wrong, and the verdict is already
non-conforming. A rule check never removes rows, so law checks stay unbiased whatever rule a verifier follows.
Counts do not depend on the rule, only expected laws do: `t2_results(alphas, rule)` evaluates them under any rule.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

import numpy as np

from ...stats import CheckResult
from ...stats.record import CheckId
from ..engine import registry
from ..engine.counts import Counts
from ..engine.registry import CHAIN
from ..engine.results import t0_result
from . import laws
from .columns import rows_all, rows_any, rows_sum
from .plan import plan_for
from .scenarios import Batch, Scenario

#: The T0 kinds every call is checked for (engine/registry.py), in the order a row is charged to the first it breaks.
T0_CHECKS = ("t0_valid_ids", "t0_padding", "t0_prefix_is_drafts", "t0_zero_prob_emitted", "t0_residual_support")


def t0_violations(
    batch: Batch, out: np.ndarray, target_seen: np.ndarray, vocab: int
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The rule-free T0 checks of one call's output [B, g+1]: ({check: [B] rows that break it}, accepted counts [B]).

    Ids, padding, the prefix and zero probability hold for every lossless rule; the rule's residual support is not
    here, so no law count (first token, joint law) ever drops a row because of the rule a verifier follows.
    """
    width = out.shape[1]
    g = width - 1
    emitted = out >= 0
    in_vocab = out < vocab
    ok_ids = rows_all((out >= -1) & in_vocab)  # -1, or a token in [0, V)
    count = rows_sum(emitted)
    k = (~emitted).argmax(1)  # leading emitted tokens: the first -1 (argmax of a bool row stops at its first True)
    k[count == width] = width
    ok_pad = (count == k) & (k >= 1) & (k <= batch.num_draft + 1)
    accepted = np.clip(k - 1, 0, g)  # A
    prefix_bad = rows_any((np.arange(g)[None, :] < accepted[:, None]) & (out[:, :g] != batch.draft_tokens))
    valid = emitted & in_vocab
    safe = np.where(valid, out, 0)  # bad ids are charged to t0_valid_ids
    if target_seen.strides[0] == 0 and len(out):  # a context-free batch: one [g+1, V] table read at every row
        p_at = target_seen[0][np.arange(width)[None, :], safe]  # [B, g+1]
    else:
        p_at = np.take_along_axis(target_seen, safe[:, :, None], 2)[:, :, 0]  # [B, g+1]
    zero_hit = rows_any(emitted & (p_at <= 0))
    return {
        "t0_valid_ids": ~ok_ids,
        "t0_padding": ~ok_pad,
        "t0_prefix_is_drafts": prefix_bad,
        "t0_zero_prob_emitted": zero_hit,
    }, accepted


@functools.cache
def _position_masks(g: int) -> tuple[np.ndarray, np.ndarray]:
    """[g, g+1, g+1] int64 masks over (position i, num_draft, accepted): reached[i] counts rows with num_draft > i
    and A >= i, rejected[i] those with A == i < num_draft, so both are sums of a call's length counts."""
    position, drafted, accepted = np.ogrid[:g, : g + 1, : g + 1]
    reach = ((drafted > position) & (accepted >= position)).astype(np.int64)
    reject = ((drafted > position) & (accepted == position)).astype(np.int64)
    return reach, reject


def _bump_flat(table: np.ndarray, flat: np.ndarray) -> None:
    """Add 1 at each flat index of a C-contiguous count table: one bincount over the table where the call's rows
    are many against its size (np.add.at is an order of magnitude slower per row), np.add.at where they are few
    (a bincount of a [151936] table zeroes 1.2 MB for 64 rows)."""
    if not flat.size:
        return
    if flat.size * 16 < table.size:
        np.add.at(table.reshape(-1), flat, 1)
        return
    table += np.bincount(flat, minlength=table.size).reshape(table.shape).astype(table.dtype, copy=False)


def t2_plan(scenario: Scenario, rule: str = "exact") -> list[str]:
    """The T2 kinds a scenario tests (plan.plan_for(...).tested): the budget is split over these."""
    return plan_for(scenario, rule).tested


@dataclass
class Tally(Counts):
    """Everything a scenario's checks need, accumulated over verify calls. `rule` is the declared rule: it decides
    the T0 residual-support check; the counts themselves are rule-free."""

    scenario: Scenario
    seed: int = 0
    rule: str = "exact"
    rows: int = 0
    seconds: float = 0.0  # time spent inside the adapter
    violations: dict = field(default_factory=lambda: {name: 0 for name in T0_CHECKS})
    examples: dict = field(default_factory=dict)  # first violation of each T0 check
    support_violations: dict = field(default_factory=lambda: {rule: 0 for rule in laws.RULES})  # under each rule
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

    def add(self, batch: Batch, out: np.ndarray, probs_seen: tuple[np.ndarray, np.ndarray | None],
            where: dict) -> np.ndarray:  # fmt: skip
        """T0-check one call's output [B, g+1] and count what the T2 checks need; returns the [B] rows that pass the
        rule-free T0 checks (the joint loop follows only those).

        probs_seen: the target and draft rows as the adapter received them (after the cast to its dtype), so
        that support checks use the numbers the adapter saw.
        """
        if isinstance(out, tuple):  # an adaptive verifier: its laws are those of the drafts it used (form.py)
            out, used = out
            kept = np.arange(batch.draft_tokens.shape[1])[None, :] < used[:, None]
            batch = replace(batch, num_draft=used, draft_tokens=np.where(kept, batch.draft_tokens, -1))
        sc, g, v = self.scenario, self.scenario.gamma, self.scenario.vocab_size
        rows = out.shape[0]
        self.rows += rows
        if sc.probe and self._probe_clean(batch, out, probs_seen[0]):
            return np.ones(rows, dtype=bool)  # the probe's rows are all right: nothing more to count (_probe_clean)
        violations, accepted = t0_violations(batch, out, probs_seen[0], v)
        good = np.ones(rows, dtype=bool)
        for name, bad in violations.items():  # each row is charged to the first check it breaks
            self._count(name, good & bad, batch, out, where)
            good &= ~bad

        if sc.probe:  # a probe is sized in tens of millions of rows and has no T2 check: T0 is all it needs
            return good
        last = out[np.arange(rows), accepted]  # the correction or bonus token
        self._residual_support(good & (accepted < batch.num_draft), accepted, last, batch, out, probs_seen, where)

        rows_ok = np.flatnonzero(good)
        st0, acc, nd = batch.states[rows_ok, 0], accepted[rows_ok], batch.num_draft[rows_ok]
        width = g + 1
        _bump_flat(self.first, st0 * v + out[rows_ok, 0])
        length = np.bincount((st0 * width + nd) * width + acc, minlength=self.length.size)
        self.length += length.reshape(self.length.shape)
        by_draft = length.reshape(self.length.shape).sum(0)  # [num_draft, accepted] of this call
        reach_mask, reject_mask = _position_masks(g)
        self.reached += np.tensordot(reach_mask, by_draft, 2)
        self.rejected += np.tensordot(reject_mask, by_draft, 2)
        rej = acc < nd
        state_at = batch.states[rows_ok, acc]
        last_ok = last[rows_ok]
        corr_stratum = state_at[rej]
        if sc.point_mass:
            corr_stratum = corr_stratum * v + batch.draft_tokens[rows_ok[rej], acc[rej]]
        if rej.any() and "rejection" not in self.examples:  # the example a certain reject_rate failure shows
            self._count("rejection", np.isin(np.arange(rows), rows_ok[rej]), batch, out, where)
        _bump_flat(self.correction, corr_stratum * v + last_ok[rej])
        _bump_flat(self.bonus, state_at[~rej] * v + last_ok[~rej])
        if sc.identical_rows:
            pairs = rows - rows % 2
            half = 2 * np.flatnonzero(good[0:pairs:2] & good[1:pairs:2])  # rows 2j with 2j and 2j+1 counted
            if self.pairs is None:
                self.pairs = np.zeros((v, v), dtype=np.int64)
            _bump_flat(self.pairs, out[half, 0] * v + out[half + 1, 0])
        return good

    @staticmethod
    def _probe_clean(batch: Batch, out: np.ndarray, target_seen: np.ndarray) -> bool:
        """The probe (g = 1, every draft of probability 0) has one right output per row: [t, -1] with p(t) > 0.
        True when every row has it, in a few passes; otherwise the full checks below find and count the culprits."""
        first = out[:, 0]
        support = target_seen[0, 0] > 0  # context-free: one target row
        return bool(((first >= 0) & (first < support.size)).all() and support[first.clip(0, support.size - 1)].all()
                    and (out[:, 1] == -1).all() and (batch.num_draft == 1).all())  # fmt: skip

    def _residual_support(self, rejected, accepted, last, batch, out, probs_seen, where) -> None:
        """T0 under every known rule (the declared one is the check; the others serve the rule diagnosis)."""
        idx = np.flatnonzero(rejected)
        if not idx.size:
            return
        target_seen, draft_seen = probs_seen
        pos = accepted[idx]
        d = batch.draft_tokens[idx, pos]
        allowed = laws.may_correct_at(target_seen, draft_seen, idx, pos, d, last[idx])  # {rule: [R]}
        for rule in laws.RULES:
            bad = np.zeros(len(rejected), dtype=bool)
            bad[idx[~allowed[rule]]] = True
            self.support_violations[rule] += int(bad.sum())
            if rule == self.rule:
                fresh = "t0_residual_support" not in self.examples
                self._count("t0_residual_support", bad, batch, out, where)
                if fresh and "t0_residual_support" in self.examples:  # the offending token, with its p and q
                    i = int(np.flatnonzero(bad[idx])[0])
                    token, drafted = int(last[idx[i]]), int(d[i])
                    p_row = target_seen[idx[i], pos[i]]
                    q_row = None if draft_seen is None else draft_seen[idx[i], pos[i]]
                    q, q_drafted = (None, None) if q_row is None else (float(q_row[token]), float(q_row[drafted]))
                    self.examples["t0_residual_support"].update(
                        position=int(pos[i]), token=token, p=float(p_row[token]), q=q, drafted=drafted,
                        p_drafted=float(p_row[drafted]), q_drafted=q_drafted)  # fmt: skip

    def _count(self, name: str, bad: np.ndarray, batch: Batch, out: np.ndarray, where: dict) -> None:
        hits = int(bad.sum())
        if not hits:
            return
        if name in self.violations:
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

    def counts(self) -> dict:
        return {**super().counts(), "support_violations": self.support_violations}

    def absorb(self, part: dict) -> None:
        super().absorb(part)
        for rule_name, count in part["support_violations"].items():
            self.support_violations[rule_name] += count

    def t0_kinds(self) -> tuple[str, ...]:
        """The T0 kinds of every call (listed as not run when the scenario got no rows)."""
        return T0_CHECKS

    def t0_results(self) -> list[CheckResult]:
        return [
            t0_result(name, self.violations[name], self.rows, {"example": self.examples.get(name)})
            for name in T0_CHECKS
        ]

    def t2_results(self, alphas: dict[str, float], rule: str | None = None) -> list[CheckResult]:
        """One CheckResult per planned kind, under `rule` (default: the declared one); alphas maps kind -> alpha."""
        return [self._t2(kind, alpha, rule or self.rule) for kind, alpha in alphas.items()]

    def certain_results(self, kinds: list[str], rule: str | None = None) -> list[CheckResult]:
        """Checks decided by one counter-example (plan.certain): a reject rate of exactly 0."""
        sc, out = self.scenario, []
        for kind in kinds:
            if kind != "reject_rate":
                raise ValueError(f"kind={kind!r} is not a certain check")
            rejected = int(self.rejected.sum())
            details = {"z": 0.0, "rejections": rejected, "why": "Z = 0 under the rule: a single rejection is wrong",
                       "example": self.examples.get("rejection")}  # fmt: skip
            out.append(t0_result(str(CheckId(kind, sc.name)), rejected, int(self.reached.sum()), details))
        return out

    def _t2(self, kind: str, alpha: float, rule: str | None = None) -> CheckResult:
        """The registered test of `kind` (engine/registry.py, chain form) on this tally's counts, under `rule`."""
        form = registry.get(kind).forms.get(CHAIN)
        if form is None or form.evaluate is None:
            raise ValueError(f"kind={kind!r} is not a T2 check of a single scenario")
        return form.evaluate(self, alpha, rule or self.rule, str(CheckId(kind, self.scenario.name)))

    def mean_accepted(self, rule: str = "exact") -> tuple[float, float]:
        """(observed, expected under `rule`) total accepted drafts over the counted rows."""
        observed = expected = 0.0
        for s, nd in zip(*np.nonzero(self.length.sum(2))):
            counts = self.length[s, nd]
            accepted = np.arange(self.scenario.gamma + 1)
            observed += float(counts @ accepted)
            expected += counts.sum() * float(laws.length_law(self.scenario, s, nd, rule) @ accepted)
        return observed, expected
