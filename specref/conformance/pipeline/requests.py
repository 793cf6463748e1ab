"""The pipeline contract's request-level checks: what a serving engine owes each request beyond the law of its rows.

A pipeline declares what it exposes (specref.hf.pipelines.PipelineAdapter; docs/pipelines.md, "Requests"):
  unseeded        generate(prompts, n_new, None) is an unseeded request (the engine's own seeding);
  request_seeds   generate(prompts, n_new, [s_0, ..., s_{B-1}]) seeds each row on its own (an int or None);
  counters        counters() -> the last call's acceptance counters, one dict per row: drafted, accepted, steps;
  eos_token_id    where rows end (the counters count nothing past it).

Checks, each a kind of the registry (pipeline/kinds.py), run after the main pass on the run's first prompt:
  unseeded_independence (T2, law)   serial unseeded requests are independent: REQUEST_CALLS calls of REQUEST_ROWS
      rows, paired (2j, 2j+1) row by row; the first tokens of a pair, binned by the target's law into categories
      of about equal mass (at most MAX_CATEGORIES, at least MIN_EXPECTED pairs per cell on average), go into a
      Pearson chi-square test of independence (scipy.stats.chi2_contingency, no continuity correction) at the
      alpha the run's plan gives it. Under H0 (independent requests, iid rows) its false-alarm rate is alpha
      (asymptotically); a stream reused by every request makes the table diagonal (X^2 = n (c - 1)).
  seeded_request (run, contract)    a request with seed s gives the same tokens alone, beside other requests in
      one batch, and after other requests: SEEDED seeds, each alone before and again after the unseeded calls,
      and all in one batch between unseeded rows. Certain: one differing row fails it.
  acceptance_counters (run, contract) on every request call, each row's counters agree with the tokens it
      returned. With L its returned tokens up to and including its first EOS (else n_new), A accepted, D drafted,
      S steps: 0 <= A <= D and S >= 1; a row that ended at EOS emitted A + S tokens, or A + S - 1 when the EOS was
      an accepted draft, so A + S - 1 <= L <= A + S; a row without EOS emitted at least n_new, and before its last
      step fewer than n_new, so n_new <= A + S <= n_new + D. Certain.
A pipeline that does not declare a capability gets the kinds needing it planned out, with the reason.
"""

from __future__ import annotations

import numpy as np

from ...stats import CheckResult
from ...stats.power import min_detectable_tv_chisquare
from ..engine.calls import AdapterFailure
from ..engine.passes import derive_seed
from ..engine.results import failure_details, not_run, t0_result

#: Unseeded request calls (paired 2j, 2j+1) and rows per call; seeded requests; binning of the first token.
REQUEST_CALLS, REQUEST_ROWS, SEEDED = 6, 64, 8
MAX_CATEGORIES, MIN_EXPECTED = 6, 5.0
#: The scenario (the pipeline's first prompt) the request-level checks run on.
ON = "prompt0"
INDEPENDENCE, SEEDED_KIND, COUNTERS = "unseeded_independence", "seeded_request", "acceptance_counters"
#: What each kind needs the pipeline to declare.
NEEDS = {INDEPENDENCE: "unseeded", SEEDED_KIND: "request_seeds", COUNTERS: "counters"}


def _declares(pipeline, capability: str) -> bool:
    return bool(getattr(pipeline, capability, None))


def plan(pipeline) -> tuple[list[str], list[str], dict[str, str]]:
    """(T2 kinds tested, run-level kinds run, {kind: why not}) for a pipeline's declarations."""
    tested, run, skipped = [], [], {}
    for kind, capability in NEEDS.items():
        needs = capability if kind != COUNTERS else "unseeded and counters"
        ok = _declares(pipeline, capability) and (kind != COUNTERS or _declares(pipeline, "unseeded"))
        if not ok:
            skipped[kind] = f"the pipeline does not declare {needs} (docs/pipelines.md, Requests)"
        elif kind == INDEPENDENCE:
            tested.append(kind)
        else:
            run.append(kind)
    return tested, run, skipped


class _Requests:
    """The calls of the request-level checks, each through the hang-safe caller, counters checked after each."""

    def __init__(self, caller, scenario, seed: int, counting: bool, batch):
        self.caller, self.scenario, self.seed, self.batch = caller, scenario, seed, batch
        self.pipeline = caller.adapter.pipeline
        self.counting = counting
        self.calls = 0
        self.counter_rows = self.counter_violations = 0
        self.counter_example: dict | None = None

    def __call__(self, rows: int, seeds) -> np.ndarray:
        batch = self.batch(
            np.tile(np.asarray(self.scenario.prompt, dtype=np.int64), (rows, 1)), seeds=seeds, request=True
        )
        where = {"scenario": self.scenario.name, "seed": self.seed, "chunk": f"requests{self.calls}", "rows": rows,
                 "request_seeds": "unseeded" if seeds is None else list(seeds)}  # fmt: skip
        self.calls += 1
        out = self.caller(batch, derive_seed("requests", self.seed, self.calls), where=where)[0]
        if self.counting:
            self._count(out, where)
        return out

    def _count(self, out: np.ndarray, where: dict) -> None:
        counters = list(self.pipeline.counters())
        n_new, eos = out.shape[1], getattr(self.pipeline, "eos_token_id", None)
        for row, tokens in enumerate(out):
            self.counter_rows += 1
            why = counter_violation(tokens, counters[row] if row < len(counters) else None, n_new, eos)
            if why:
                self.counter_violations += 1
                if self.counter_example is None:
                    self.counter_example = {**where, "row": row, "output": tokens.tolist(), "why": why,
                                            "counters": counters[row] if row < len(counters) else None}  # fmt: skip


def counter_violation(tokens: np.ndarray, counts: dict | None, n_new: int, eos: int | None) -> str | None:
    """Why a row's counters disagree with its tokens (module docstring), or None when they agree."""
    if not isinstance(counts, dict) or not {"drafted", "accepted", "steps"} <= set(counts):
        return f"counters() gave {counts!r} for this row, not a dict of drafted, accepted, steps"
    drafted, accepted, steps = (int(counts[k]) for k in ("drafted", "accepted", "steps"))
    if not 0 <= accepted <= drafted or steps < 1:
        return f"accepted={accepted}, drafted={drafted}, steps={steps}: needs 0 <= accepted <= drafted, steps >= 1"
    ended = eos is not None and eos in tokens.tolist()
    length = tokens.tolist().index(eos) + 1 if ended else n_new
    if ended and not accepted + steps - 1 <= length <= accepted + steps:
        return (f"the row ended at EOS after {length} tokens, but accepted + steps = {accepted + steps} "
                "(a row emits accepted + steps tokens, one less when the EOS was an accepted draft)")  # fmt: skip
    if not ended and not n_new <= accepted + steps <= n_new + drafted:
        return f"the row returned {n_new} tokens, but accepted + steps = {accepted + steps} (needs n_new..n_new+D)"
    return None


def categories(first_law: np.ndarray, pairs: int) -> np.ndarray:
    """[V] category of each token: tokens in decreasing probability, cut into bins of about equal mass, at most
    MAX_CATEGORIES and at most sqrt(pairs / MIN_EXPECTED) of them (at least 2)."""
    count = int(max(2, min(MAX_CATEGORIES, np.floor(np.sqrt(pairs / MIN_EXPECTED)))))
    order = np.argsort(-first_law, kind="stable")
    cumulative = np.cumsum(first_law[order]) - first_law[order]  # the mass before each token
    out = np.empty(len(first_law), dtype=np.int64)
    out[order] = np.minimum((cumulative * count).astype(np.int64), count - 1)
    return out


def independence_result(first: np.ndarray, second: np.ndarray, first_law: np.ndarray, alpha: float,
                        name: str) -> CheckResult:  # fmt: skip
    """Pearson chi-square test of independence of paired first tokens first [n], second [n]."""
    from scipy.stats import chi2_contingency

    bins = categories(first_law, len(first))
    count = int(bins.max()) + 1
    table = np.zeros((count, count), dtype=np.int64)
    np.add.at(table, (bins[first], bins[second]), 1)
    table = table[table.sum(1) > 0][:, table.sum(0) > 0]  # a category never seen has no margin to test
    details = {"tier": "T2", "family": "law", "pairs": int(len(first)), "table": table.tolist(),
               "identical_pairs": int((first == second).sum())}  # fmt: skip
    if min(table.shape) < 2:
        why = {"not_tested": "not tested (one category seen)"}
        return CheckResult(name, 0.0, 0, 1.0, len(first), 0.0, float("nan"), True, details={**details, **why},
                           tested=False)  # fmt: skip
    statistic, p_value, df, _ = chi2_contingency(table, correction=False)
    detectable = min_detectable_tv_chisquare(len(first), alpha, 1e-3, int(df))
    return CheckResult(name, float(statistic), int(df), float(p_value), len(first), alpha, detectable,
                       bool(p_value > alpha), details={**details, "beta": 1e-3})  # fmt: skip


def run_requests(caller, scenario, alphas: dict[str, float], kinds: list[str], seed: int,
                 batch) -> list[CheckResult]:  # fmt: skip
    """The request-level checks `kinds` on `scenario` (module docstring); batch(prompts, seeds=, request=True) is the
    contract's PromptBatch. Raises AdapterFailure from a call."""
    requests = _Requests(caller, scenario, seed, COUNTERS in kinds, batch)
    results = []
    seeds = [int(derive_seed("request-seed", seed, i)) for i in range(SEEDED)] if SEEDED_KIND in kinds else []
    alone = [requests(1, [s])[0] for s in seeds]  # [SEEDED][n]
    if INDEPENDENCE in kinds or COUNTERS in kinds:
        outs = [requests(REQUEST_ROWS, None) for _ in range(REQUEST_CALLS)]  # serial unseeded requests
        if INDEPENDENCE in kinds:
            first = np.concatenate([outs[j][:, 0] for j in range(0, REQUEST_CALLS, 2)])
            second = np.concatenate([outs[j + 1][:, 0] for j in range(0, REQUEST_CALLS, 2)])
            first_law = scenario.law.reshape(scenario.vocab_size, -1).sum(1)
            name = f"{INDEPENDENCE}[{scenario.name}]"
            results.append(independence_result(first, second, first_law, alphas[name], name))
    if seeds:
        mixed = [s for pair in zip([None] * SEEDED, seeds, strict=True) for s in pair] + [None]  # seeded between
        beside = requests(len(mixed), mixed)[1::2][:SEEDED]
        after = [requests(1, [s])[0] for s in seeds]  # alone again, after the other requests
        differs = {"beside": 0, "after": 0}
        for i in range(SEEDED):
            differs["beside"] += int(not np.array_equal(beside[i], alone[i]))
            differs["after"] += int(not np.array_equal(after[i], alone[i]))
        same = [np.array_equal(beside[i], alone[i]) and np.array_equal(after[i], alone[i]) for i in range(SEEDED)]
        example = next(({"seed": seeds[i], "alone": alone[i].tolist(), "beside": beside[i].tolist(),
                         "after": after[i].tolist()} for i in range(SEEDED) if not same[i]), None)  # fmt: skip
        results.append(t0_result(f"{SEEDED_KIND}[{scenario.name}]", sum(differs.values()), 2 * SEEDED,
                                 {"differing": differs, "example": example}))  # fmt: skip
    if COUNTERS in kinds:
        results.append(t0_result(f"{COUNTERS}[{scenario.name}]", requests.counter_violations, requests.counter_rows,
                                 {"example": requests.counter_example}))  # fmt: skip
    return results


def run_checks(caller, plan_, seed: int, stopped: str | None, batch) -> tuple[list, list]:
    """(results, not run) of the request-level checks on the run's first scenario."""
    scenario = next((s for s in plan_.scenarios if s.name == ON), None)
    if scenario is None:
        return [], []
    tested, run, _ = plan(caller.adapter.pipeline)
    kinds = [k for k in NEEDS if k in tested + run]
    names = [f"{kind}[{scenario.name}]" for kind in kinds]
    if not kinds:
        return [], []
    if stopped:
        return [], [not_run(name, stopped) for name in names]
    try:
        return run_requests(caller, scenario, plan_.alphas, kinds, seed, batch), []
    except AdapterFailure as failure:
        why = f"a request call failed ({failure.kind})"
        return [t0_result("adapter[requests]", 1, 0, failure_details(failure))], [not_run(n, why) for n in names]


__all__ = [
    "COUNTERS",
    "INDEPENDENCE",
    "NEEDS",
    "SEEDED_KIND",
    "counter_violation",
    "independence_result",
    "plan",
    "run_checks",
]
