"""The outcome of one conformance run: every check, the verdict, and the data the rendered report plots."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from ..stats import CheckResult, ErrorBudget
from ..stats.record import json_safe
from . import laws, precision
from .adapters import Adapter
from .plan import LAW, RULE, describe, family_of

CONFORMING, NON_CONFORMING, LOSSY = "conforming", "non-conforming", "lossy by configuration"
PLOT_MAX_VOCAB = 64


def lossless(rule: str) -> str:
    """The verdict of a verifier that keeps the target law and follows its declared rule other than exact."""
    return f"lossless (declared rule {rule})"


def kind_of(check_name: str) -> str:
    return check_name.split("[", 1)[0]


def family(result: CheckResult) -> str:
    return result.details.get("family") or family_of(kind_of(result.name))


def tested(result: CheckResult) -> bool:
    """False for a check that could not fail (plan.py): it spent no alpha and is never counted as a pass."""
    return "not_tested" not in result.details


@dataclass
class Report:
    adapter: Adapter
    seed: int
    budget_seconds: float | None  # None: fixed rows, no time cap
    alpha: float
    checks: list[CheckResult] = field(default_factory=list)
    scenarios: dict = field(default_factory=dict)
    plots: dict = field(default_factory=dict)  # scenario -> observed/expected series (small vocabularies)
    wall_seconds: float = 0.0
    verdict: str = ""
    rule_diagnosis: dict = field(default_factory=dict)  # other rules' fit and the acceptance ratio (see runner)
    probe: dict = field(default_factory=dict)  # the rare-edge probe: tests run and detection probability

    def add_t0(self, scenario: str, results: list[CheckResult]) -> None:
        for r in results:
            name = r.name if "[" in r.name else f"{r.name}[{scenario}]"
            self.checks.append(dataclasses.replace(r, name=name))

    def add_t2(self, scenario: str, results: list[CheckResult], tally=None) -> None:
        for r in results:
            tier = "none" if r.details.get("tier") == "none" else "T2"  # "none": planned out (plan.py), no alpha
            self.checks.append(dataclasses.replace(r, details={**r.details, "tier": tier, "family": family(r)}))
        # identical rows share one fixed draft, so their token laws are not p: nothing to plot against p
        if tally is not None and tally.scenario.vocab_size <= PLOT_MAX_VOCAB and not tally.scenario.identical_rows:
            self.plots[scenario] = _plot_series(tally)

    def finish(self, budget: ErrorBudget, wall_seconds: float) -> None:
        """Holm over the T2 family, then the verdict: contract, then law, then rule (plan.py)."""
        t2 = [i for i, r in enumerate(self.checks) if r.details.get("tier") == "T2"]
        for i, r in zip(t2, budget.holm([self.checks[i] for i in t2])):
            self.checks[i] = r
        self.wall_seconds = wall_seconds
        failed = {family(r) for r in self.failures}
        if not failed:
            self.verdict = CONFORMING if self.adapter.rule == "exact" else lossless(self.adapter.rule)
        elif self.adapter.lossy and LAW in failed and failed <= {LAW, RULE}:
            self.verdict = LOSSY  # lossy describes a law: it never excuses a crash or a broken invariant
        else:
            self.verdict = NON_CONFORMING

    @property
    def law_kept(self) -> bool:
        """Only rule checks failed: the output law is the target's, acceptance does not follow the declared rule."""
        failed = {family(r) for r in self.failures}
        return failed == {RULE}

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.checks)

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.checks if not r.passed]

    def caught_by(self) -> list[str]:
        """Kinds of the failed checks, most certain first (T0, then by p-value); checks not run explain nothing."""
        caught = [r for r in self.failures if r.details.get("tier") != "not run"]
        ordered = sorted(caught, key=lambda r: (r.details.get("tier") != "T0", r.p_value))
        return list(dict.fromkeys(kind_of(r.name) for r in ordered))

    def measured_tv(self) -> dict[str, float]:
        """Observed TV between the first-token law and p_1, per scenario that runs first_token_law (lossy verdicts)."""
        checked = {r.name for r in self.checks}
        out = {}
        for name, series in self.plots.items():
            first = series.get("first")
            if first and sum(first["observed"]) and f"first_token_law[{name}]" in checked:
                obs = np.asarray(first["observed"], float)
                exp = np.asarray(first["expected"], float)
                out[name] = float(0.5 * np.abs(obs / obs.sum() - exp / exp.sum()).sum())
        return out

    def summary(self) -> str:
        real = [r for r in self.checks if tested(r)]
        t0 = [r for r in real if r.details.get("tier") != "T2"]
        t2 = [r for r in real if r.details.get("tier") == "T2"]
        lines = [
            f"{self.adapter.name}: {self.verdict.upper()}  ({len(real) - len(self.failures)}/{len(real)}"
            f" checks passed; T0 {sum(r.passed for r in t0)}/{len(t0)}, T2 {sum(r.passed for r in t2)}/{len(t2)};"
            f" {len(self.checks) - len(real)} could not fail and were not tested;"
            f" {sum(s['rows'] for s in self.scenarios.values()):,} rows in {self.wall_seconds:.0f} s;"
            f" family-wise alpha {self.alpha:g})"
        ]
        if self.cut_short:
            lines.append(f"  cut short by the time budget: {self.cut_short}")
        if self.law_kept:
            lines.append(f"  output law kept; acceptance does not follow {self.adapter.rule!r} ({self.rule_words()})")
        for r in self.failures[:12]:
            lines.append("  " + _failure_line(r))
        if len(self.failures) > 12:
            lines.append(f"  ... and {len(self.failures) - 12} more failed checks")
        if self.verdict == LOSSY:
            tv = self.measured_tv()
            if tv:
                lines.append("  measured TV of the first-token law: "
                             + ", ".join(f"{k} {v:.3f}" for k, v in sorted(tv.items())))  # fmt: skip
        return "\n".join(lines)

    @property
    def cut_short(self) -> str:
        """The scenarios that got fewer rows than the fixed N asked for (rows with a budget), or ''."""
        return ", ".join(f"{name} ({s['rows']:,} rows of {s['rows_planned']:,} asked)"
                         for name, s in self.scenarios.items() if "rows_planned" in s)  # fmt: skip

    def rule_words(self) -> str:
        """Which known rule the acceptance matches, and the acceptance ratio against exact speculative sampling."""
        d = self.rule_diagnosis
        matches = [f"it matches rule {name!r} (" + (f"{fit['checks']} certain rule checks" if math.isnan(
                   fit["min_p_value"]) else f"smallest p-value {fit['min_p_value']:.3g} over {fit['checks']} rule "
                   "checks") + ")" for name, fit in d.get("rules", {}).items() if fit["matches"]]  # fmt: skip
        words = matches or ["it matches no rule specref knows"]
        if d.get("acceptance_ratio") is not None:
            against = f"rule {d['against']!r}" if d.get("against") else "exact speculative sampling"
            words.append(f"accepted drafts {d['acceptance_ratio']:.3f}x those of {against}")
        return "; ".join(words)

    def to_dict(self) -> dict:
        a = self.adapter
        return json_safe(
            {
                "impl": a.name,
                "verdict": self.verdict,
                "passed": self.passed,
                "seed": self.seed,
                "budget_seconds": self.budget_seconds,
                "alpha": self.alpha,
                "wall_seconds": self.wall_seconds,
                "adapter": {
                    "kind": a.kind,
                    "ragged": a.ragged,
                    "point_mass": a.point_mass,
                    "uniforms": a.uniforms,
                    "device": str(a.device),
                    "dtype": str(a.dtype),
                    "rule": a.rule,
                    "lossy": a.lossy,
                    "notes": a.notes,
                    **({"scheme": a.scheme, "nodes": a.nodes} if a.kind == "tree" else {}),
                },
                "rows_as_given": precision.describe(a.dtype),
                "law_kept": self.law_kept,
                "rule_diagnosis": self.rule_diagnosis,
                "probe": self.probe,
                "caught_by": self.caught_by(),
                "measured_tv": self.measured_tv() if a.lossy else {},
                "scenarios": self.scenarios,
                "checks": [
                    {
                        **r.to_dict(),
                        "family": family(r),
                        "tested": tested(r),
                        "description": describe(kind_of(r.name), a.kind),
                    }  # fmt: skip
                    for r in self.checks
                ],
                "plots": self.plots,
            }
        )


def _failure_line(r: CheckResult) -> str:
    if r.details.get("tier") == "T2":
        return f"FAIL {r.name}: p={r.p_value:.3g} (alpha {r.alpha:.2g}), statistic {r.statistic:.4g}, n={r.n}"
    detail = r.details.get("error") or r.details.get("example")
    if detail is None:
        detail = {k: v for k, v in r.details.items() if k != "tier"}
    count = "" if math.isnan(r.statistic) else f" ({int(r.statistic)} violations in {r.n} rows)"
    return f"FAIL {r.name}{count}: {detail}"


def _plot_series(tally) -> dict:
    sc = tally.scenario
    series: dict = {}
    first = tally.first.sum(0)
    if first.sum():
        series["first"] = {"observed": first.tolist(), "expected": (sc.target.T @ tally.first.sum(1)).tolist()}
    length = tally.length[:, sc.gamma, :]
    if length.sum():
        expected = sum(length[s].sum() * laws.length_law(sc, s, sc.gamma, tally.rule) for s in range(length.shape[0]))
        series["length"] = {"observed": length.sum(0).tolist(), "expected": np.asarray(expected).tolist()}
    if sc.context_free and tally.reached.sum():
        series["reject"] = {
            "rejected": tally.rejected.tolist(),
            "reached": tally.reached.tolist(),
            "z": float(laws.rejection_mass(sc, tally.rule)[0]),
        }
    return series
