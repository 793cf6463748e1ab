"""A run's family-wise false-alarm budget, split over its checks by Bonferroni (weights allowed) or Holm."""

from __future__ import annotations

import dataclasses
from numbers import Real

from ._args import check_count, check_level
from .record import CheckResult


class ErrorBudget:
    """The family-wise false-alarm probability of one run (default 1e-3), and how it is spent.

    split() gives each check its Bonferroni alpha (total * weight / sum of weights): the probability that any check
    raises a false alarm is then <= total, whatever the dependence between checks. holm() re-verdicts a finished
    family with Holm's step-down, which keeps the same guarantee and rejects everything Bonferroni rejects.
    """

    def __init__(self, total: float = 1e-3):
        self.total = check_level("total", total)
        self.allocation: dict[str, float] = {}

    def split(self, names_or_weights) -> dict[str, float]:
        """Bonferroni: a list of names gets equal shares; a dict (or pairs) name -> weight gets shares by weight."""
        if isinstance(names_or_weights, dict):
            items = list(names_or_weights.items())
        else:
            items = [(entry, 1.0) if isinstance(entry, str) else tuple(entry) for entry in names_or_weights]
        if not items:
            raise ValueError("names_or_weights is empty; a budget needs at least one check")
        names = [name for name, _ in items]
        if len(set(names)) != len(names):
            raise ValueError(f"names_or_weights repeats a name: {names!r}")
        for name, weight in items:
            if isinstance(weight, bool) or not isinstance(weight, Real) or not weight > 0:
                raise ValueError(f"weight for {name!r} is {weight!r}; weights must be > 0")
        weight_sum = float(sum(weight for _, weight in items))
        self.allocation = {name: self.total * float(weight) / weight_sum for name, weight in items}
        return dict(self.allocation)

    def holm(self, results: list[CheckResult], *, family_size: int) -> list[CheckResult]:
        """Holm step-down over the family at level total; results come back in input order with new verdicts.

        family_size is m, fixed before any data: every check the plan gave alpha. A planned check that could not be
        tested at run time (df = 0 after merging sparse strata, no observations) keeps its slot, as if its p-value
        were 1: m never shrinks with the data, which a data-dependent m would (the guarantee is for a fixed family).
        Sort the tested p-values ascending; the i-th smallest (i = 0..) fails while p_(i) <= total / (m - i); the
        first one that clears its threshold and all after it pass. Each result's alpha becomes its Holm threshold
        (details keep the Bonferroni alpha total / m under holm.bonferroni_alpha); detectable_tv, computed at the
        caller's alpha, stays a valid conservative power statement whenever that alpha was <= total / m.

        Results with tested=False come back unchanged but for alpha 0 and passed=True: they spend nothing and are
        never counted as passes.
        """
        family_size = check_count("family_size", family_size)
        verdicts: list[CheckResult | None] = [
            None if r.tested else dataclasses.replace(r, alpha=0.0, passed=True) for r in results
        ]
        family = [i for i, r in enumerate(results) if r.tested]
        m = family_size
        if len(family) > m:
            raise ValueError(f"family_size={family_size!r} is smaller than the {len(family)} tested results")
        if not family:
            return verdicts  # type: ignore[return-value]
        order = sorted(family, key=lambda i: (results[i].p_value, i))
        stepping = True
        for rank, index in enumerate(order):
            result = results[index]
            threshold = self.total / (m - rank)
            stepping = stepping and result.p_value <= threshold
            holm = {"rank": rank, "family_size": m, "tested": len(family), "threshold": threshold,
                    "bonferroni_alpha": self.total / m}  # fmt: skip
            verdicts[index] = dataclasses.replace(
                result, alpha=threshold, passed=not stepping, details={**result.details, "holm": holm}
            )
        return verdicts  # type: ignore[return-value]

    def __repr__(self) -> str:
        if not self.allocation:
            return f"ErrorBudget(total={self.total:g}, unallocated)"
        shares = ", ".join(f"{name}={alpha:.3g}" for name, alpha in self.allocation.items())
        return f"ErrorBudget(total={self.total:g}: {shares})"
