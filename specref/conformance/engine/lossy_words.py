"""The words of a lossy adapter's measure (Contract.lossy_measure's record), for the summary and report.md."""

from __future__ import annotations


def lossy_lines(measure: dict) -> list[str]:
    """One line per scenario: "lossy by configuration: TV x [lo, hi] on S, y times the accepted tokens of exact
    sampling" (the sequence law where the scenario has one)."""
    lines = []
    for name, entry in measure.get("scenarios", {}).items():
        tv = entry.get("sequence") or entry.get("first_token")
        if tv is None:
            continue
        law = "whole-sequence law" if "sequence" in entry else "first-token law"
        ratio = entry.get("accepted_ratio")
        against = f"rule {entry['against']!r}" if entry.get("against") else "exact sampling"
        tail = f", {ratio:.3f} times the accepted tokens of {against}" if ratio is not None else ""
        lines.append(f"lossy by configuration: TV {tv['estimate']:.4f} [{tv['low']:.4f}, {tv['high']:.4f}] on {name} "
                     f"({law}){tail}")  # fmt: skip
    return lines


__all__ = ["lossy_lines"]
