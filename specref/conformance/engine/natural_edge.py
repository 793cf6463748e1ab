"""A rare edge met in nature: whether the zero-probability tokens a run emitted are no more than the edge the forced
probe named explains (a one-sided Poisson test), and what extra rate of such tokens the rule would still flag."""

from __future__ import annotations

from scipy.stats import chi2, poisson

from ...stats import CheckResult
from ...stats.record import CheckId
from . import registry
from .check_words import family, kind_of

#: The T0 checks a token of the rare edge fails: target probability 0, or a correction where the rule cannot put one.
EDGE_TOKENS = ("t0_zero_prob_emitted", "t0_residual_support")


def natural_edge_words(tokens: int, draws: int, event: float, p_value: float, flagged: float | None = None) -> str:
    power = ""
    if flagged is not None:
        power = (f"; extra zero-probability tokens at {flagged:.3g} per draw or more ({flagged / event:.3g}x the "
                 f"edge's rate) would have been flagged with probability {EDGE_POWER:g}")  # fmt: skip
    return (
        f"the {tokens} zero-probability or out-of-support token(s) emitted in the run are the named edge met "
        f"naturally: {draws:,} draws where the edge acts, at {event:.3g} each, explain them (one-sided Poisson "
        f"p = {p_value:.3g}; no scenario holds more than its own draws explain){power}"
    )


#: The power at which the natural-edge rule states the extra rate of zero-probability tokens it flags.
EDGE_POWER = 0.999


def edge_draws(scenario: dict, edges: dict) -> int:
    """The draws of one scenario (report.json's record: rows, gamma) on which the forced probe's named edges act:
    rows x g accept tests for the accept edge, one final draw (correction or bonus) per row for any other."""
    rows, gamma = scenario["rows"], scenario.get("gamma") or 0
    accept, final = "accept" in edges, any(key != "accept" for key in edges)
    return rows * (gamma * accept + final)


def edge_power(draws: int, event: float, alpha: float, power: float = EDGE_POWER) -> float:
    """The extra rate per draw of zero-probability tokens, on top of the edge's `event`, that the one-sided Poisson
    test at `alpha` flags with probability `power`: the critical count c (the least with P(X >= c) <= alpha at
    draws x event), then the rate whose P(X >= c) is `power` (P(X >= c; m) = P(chi^2_2c <= 2m))."""
    expected = draws * event
    critical = int(poisson.isf(alpha, expected)) + 1
    while critical > 1 and poisson.sf(critical - 2, expected) <= alpha:
        critical -= 1
    while poisson.sf(critical - 1, expected) > alpha:
        critical += 1
    return float(chi2.ppf(power, 2 * critical) / 2 / draws - event)


def explained_by_edge(failures: list[CheckResult], scenarios: dict, forced_probe: dict, alpha: float) -> dict | None:
    """When the forced probe named an edge and every other failure is a token the edge makes, whether those
    tokens are no more than the named edge explains in nature. A token the edge makes fails a T0 token check
    (EDGE_TOKENS: a zero-probability token; a correction the rule cannot put there, as a left-side inverse CDF's
    zero-weight token), and may fail a statistical check of the same scenario as an impossible outcome: such a
    check counts only if its possible outcomes alone pass (p_asymptotic above its alpha).

    The edge acts on the draws it names (edge_draws: the accept tests for the accept edge, one final draw per
    row for the others), each with the edge's event probability. The tokens are the edge's, and the verdict stays
    "rare edge", only if (1) their count passes a one-sided Poisson test at the run's alpha against the run's
    expected count, and (2) no scenario holds more than its own draws explain (the same test per scenario with
    tokens, at alpha over their number): where one does, a second cause is more likely there than the edge, and
    the verdict stays "non-conforming". What the rule could still absorb is stated (edge_power): the rate of
    extra zero-probability tokens per draw it flags with probability 0.999. None where the failures are not all
    the edge's, or are more than it explains."""
    others = [r for r in failures if family(r) != registry.EDGE]
    tokens = [r for r in others if kind_of(r.name) in EDGE_TOKENS]
    where = {CheckId.parse(r.name).scenario for r in tokens}
    impossible = [r for r in others if r.details.get("impossible_observed") and CheckId.parse(r.name).scenario
                  in where and r.details.get("p_asymptotic", 0.0) > r.alpha]  # fmt: skip
    if not tokens or len(tokens) + len(impossible) != len(others):
        return None
    edges = forced_probe.get("edges", {})
    events = [e.get("event_probability") or 0.0 for e in edges.values()]
    if not events or not max(events) > 0:
        return None
    event = max(events)
    draws = {name: edge_draws(s, edges) for name, s in scenarios.items()}
    total = sum(draws.values())
    count = sum(int(r.statistic) for r in tokens)  # an impossible outcome of a T2 check is one of these tokens
    p_value = float(poisson.sf(count - 1, total * event))
    per_scenario = {}
    for r in tokens:
        name = CheckId.parse(r.name).scenario
        per_scenario[name] = per_scenario.get(name, 0) + int(r.statistic)
    second = {name: float(poisson.sf(k - 1, draws.get(name, 0) * event)) for name, k in per_scenario.items()}
    if p_value <= alpha or min(second.values()) <= alpha / len(second):
        return None
    power = edge_power(total, event, alpha)
    return {"tokens": count, "draws": total, "event_probability": event, "p_value": p_value,
            "per_scenario_p_values": second, "flagged_extra_rate": power, "checks": [r.name for r in others],
            "words": natural_edge_words(count, total, event, p_value, power)}  # fmt: skip
