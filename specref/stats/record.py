"""The result record every check returns, and its JSON form."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np


def json_safe(value: Any) -> Any:
    """Plain JSON types: numpy scalars and arrays become Python numbers and lists; NaN and +-inf become None."""
    if isinstance(value, dict):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [json_safe(item) for item in value]
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else None
    if value is None or isinstance(value, str):
        return value
    return str(value)


@dataclass(frozen=True)
class CheckId:
    """The identity of one check: its kind (a registered check kind) and where it ran (a scenario, or "run").

    Its string form `kind[scenario]` (or `kind` alone) is the `name` of a CheckResult and of report.json's records;
    `parse` is its only inverse."""

    kind: str
    scenario: str | None = None

    def __str__(self) -> str:
        return self.kind if self.scenario is None else f"{self.kind}[{self.scenario}]"

    @classmethod
    def parse(cls, text: str) -> CheckId:
        """From the string form; raises ValueError naming the text when it is not `kind` or `kind[scenario]`."""
        kind, bracket, rest = str(text).partition("[")
        if not kind or (bracket and not rest.endswith("]")):
            raise ValueError(f"check name {text!r} is not 'kind' or 'kind[scenario]'")
        return cls(kind, rest[:-1] if bracket else None)


#: The readings of a check, in the order outputs list them. "not run" is a failure (it could not be computed);
#: "not tested" is neither a pass nor a failure (it could not fail, and spent no alpha); "uninformative" is a check
#: that did not reject but whose detectable distance at its N is above the run's resolution floor
#: (details["uninformative"]): it rules out too little to count as a pass.
STATUSES = ("passed", "failed", "uninformative", "not run", "not tested")


@dataclass(frozen=True)
class CheckResult:
    """One statistical check: what was tested, on how many draws, at which alpha, with which power, and the verdict.

    detectable_tv is the distance the check detects with probability 1 - beta (beta is in details; 1e-3 unless the
    caller chose otherwise) at this n and alpha. Its unit depends on the family:
      * law checks (chi-square, discrete law): TV distance between the observed law and the expected law on the
        merged bins; a deviation hidden inside pooled bins adds up to hidden_mass on top, so the check is guaranteed
        only for TV >= detectable_tv + hidden_mass (the guaranteed_tv property);
      * rate checks (binomial): |p - p0|;
      * mean checks: |mean - expected_mean|, in the unit of the samples.
    Non-finite numbers (a check with no power) appear as None in to_dict().

    tested is False for a check that cannot fail (df = 0 after merging, no observations, a rate of 0 or 1 whose
    violation a T0 invariant already catches): it spends no alpha (alpha 0, left out of Holm), has passed=True so
    that it never fails a run, and must never be counted as a pass; details["not_tested"] says why
    ("not tested (df = 0)", "implied by T0", ...). status gives the three-way reading.
    """

    name: str
    statistic: float
    df: int
    p_value: float
    n: int
    alpha: float
    detectable_tv: float
    passed: bool
    hidden_mass: float = 0.0
    details: dict = field(default_factory=dict)
    tested: bool = True

    @property
    def id(self) -> CheckId:
        """The check's typed identity (kind, scenario), from its name."""
        return CheckId.parse(self.name)

    @property
    def status(self) -> str:
        """One of STATUSES: count passes with status == "passed", never with passed alone. "not run" (tier "not
        run": the check could not be computed) is a failure; "not tested" (it could not fail) is neither."""
        if not self.tested:
            return "not tested"
        if self.passed:
            return "uninformative" if self.details.get("uninformative") else "passed"
        return "not run" if self.details.get("tier") == "not run" else "failed"

    @property
    def guaranteed_tv(self) -> float:
        """Every alternative at least this far away (TV, or |p - p0| for rates) fails with probability >= 1 - beta."""
        return min(1.0, self.detectable_tv + self.hidden_mass)

    def to_dict(self) -> dict:
        record = json_safe(asdict(self))
        record["guaranteed_tv"] = json_safe(self.guaranteed_tv)
        return record

    @classmethod
    def from_dict(cls, record: dict) -> CheckResult:
        """Inverse of to_dict (None in a float field reads back as NaN)."""
        nan = float("nan")
        return cls(
            name=record["name"],
            statistic=nan if record["statistic"] is None else float(record["statistic"]),
            df=int(record["df"]),
            p_value=nan if record["p_value"] is None else float(record["p_value"]),
            n=int(record["n"]),
            alpha=float(record["alpha"]),
            detectable_tv=nan if record["detectable_tv"] is None else float(record["detectable_tv"]),
            passed=bool(record["passed"]),
            hidden_mass=float(record.get("hidden_mass", 0.0)),
            details=dict(record.get("details", {})),
            tested=bool(record.get("tested", True)),
        )

    def summary(self) -> str:
        """One line: verdict, test, statistic, p-value against alpha, and the power statement."""
        if not self.tested:
            return f"NOT TESTED {self.name}: {self.details.get('not_tested', 'no test')} (n={self.n}; no alpha spent)"
        verdict = "PASS" if self.passed else "FAIL"
        beta = self.details.get("beta", 1e-3)
        return (
            f"{verdict} {self.name}: statistic={self.statistic:.4g} df={self.df} p={self.p_value:.3g} "
            f"alpha={self.alpha:.3g} n={self.n}; detects {self.details.get('distance', 'TV')} >= "
            f"{self.guaranteed_tv:.4g} with power {1 - beta:.4g}"
        )

    def explain(self) -> str:
        """summary() plus, on failure, the most over- and under-represented outcomes."""
        lines = [self.summary()]
        for entry in self.details.get("impossible", []):
            lines.append(f"  impossible token {entry['token']} observed {entry['observed']} times (expected 0)")
        for key, label in (("over", "over-represented"), ("under", "under-represented")):
            for entry in self.details.get(key, []):
                lines.append(
                    f"  {label}: token {entry['token']} observed {entry['observed']} expected "
                    f"{entry['expected']:.4g} (residual {entry['residual']:+.2f})"
                )
        return "\n".join(lines)


def not_tested(name: str, reason: str, n: int = 0, details: dict | None = None) -> CheckResult:
    """A check that cannot fail: no alpha, no p-value to speak of (1.0), never a failure and never a pass."""
    return CheckResult(name, 0.0, 0, 1.0, n, 0.0, float("nan"), True, 0.0, {**(details or {}), "not_tested": reason},
                       tested=False)  # fmt: skip


def require(result: CheckResult) -> CheckResult:
    """Return result if it passed; raise AssertionError with result.explain() otherwise."""
    if not result.passed:
        raise AssertionError(result.explain())
    return result
