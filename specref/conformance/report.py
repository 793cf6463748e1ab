"""The outcome of one conformance run: every check, the verdict, and the data the rendered report plots."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field

import numpy as np

from ..stats import CheckResult, ErrorBudget
from ..stats.record import json_safe
from . import laws
from .adapters import Adapter
from .checks import DESCRIPTIONS

CONFORMING, NON_CONFORMING, LOSSY = "conforming", "non-conforming", "lossy by configuration"
PLOT_MAX_VOCAB = 64


def kind_of(check_name: str) -> str:
    return check_name.split("[", 1)[0]


@dataclass
class Report:
    adapter: Adapter
    seed: int
    budget_seconds: float
    alpha: float
    checks: list[CheckResult] = field(default_factory=list)
    scenarios: dict = field(default_factory=dict)
    plots: dict = field(default_factory=dict)  # scenario -> observed/expected series (small vocabularies)
    wall_seconds: float = 0.0
    verdict: str = ""

    def add_t0(self, scenario: str, results: list[CheckResult]) -> None:
        for r in results:
            name = r.name if "[" in r.name else f"{r.name}[{scenario}]"
            self.checks.append(dataclasses.replace(r, name=name))

    def add_t2(self, scenario: str, results: list[CheckResult], tally=None) -> None:
        for r in results:
            self.checks.append(dataclasses.replace(r, details={**r.details, "tier": "T2"}))
        # identical rows share one fixed draft, so their token laws are not p: nothing to plot against p
        if tally is not None and tally.scenario.vocab_size <= PLOT_MAX_VOCAB and not tally.scenario.identical_rows:
            self.plots[scenario] = _plot_series(tally)

    def finish(self, budget: ErrorBudget, wall_seconds: float) -> None:
        """Holm over the T2 family, then the verdict."""
        t2 = [i for i, r in enumerate(self.checks) if r.details.get("tier") == "T2"]
        for i, r in zip(t2, budget.holm([self.checks[i] for i in t2])):
            self.checks[i] = r
        self.wall_seconds = wall_seconds
        if self.passed:
            self.verdict = CONFORMING
        else:
            self.verdict = LOSSY if self.adapter.lossy else NON_CONFORMING

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.checks)

    @property
    def failures(self) -> list[CheckResult]:
        return [r for r in self.checks if not r.passed]

    def caught_by(self) -> list[str]:
        """Kinds of the failed checks, most certain first (T0, then by p-value)."""
        ordered = sorted(self.failures, key=lambda r: (r.details.get("tier") != "T0", r.p_value))
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
        t0 = [r for r in self.checks if r.details.get("tier") != "T2"]
        t2 = [r for r in self.checks if r.details.get("tier") == "T2"]
        lines = [
            f"{self.adapter.name}: {self.verdict.upper()}  ({len(self.checks) - len(self.failures)}/{len(self.checks)}"
            f" checks passed; T0 {sum(r.passed for r in t0)}/{len(t0)}, T2 {sum(r.passed for r in t2)}/{len(t2)};"
            f" {sum(s['rows'] for s in self.scenarios.values()):,} rows in {self.wall_seconds:.0f} s;"
            f" family-wise alpha {self.alpha:g})"
        ]
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
                    "lossy": a.lossy,
                    "notes": a.notes,
                },
                "caught_by": self.caught_by(),
                "measured_tv": self.measured_tv() if a.lossy else {},
                "scenarios": self.scenarios,
                "checks": [{**r.to_dict(), "description": DESCRIPTIONS.get(kind_of(r.name), "")} for r in self.checks],
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
        expected = sum(length[s].sum() * laws.length_law(sc, s, sc.gamma) for s in range(length.shape[0]))
        series["length"] = {"observed": length.sum(0).tolist(), "expected": np.asarray(expected).tolist()}
    if sc.context_free and tally.reached.sum():
        series["reject"] = {
            "rejected": tally.rejected.tolist(),
            "reached": tally.reached.tolist(),
            "z": float(laws.rejection_mass(sc)[0]),
        }
    return series
