"""The calibration plots: the p-value QQ plot, the power bars and the power curves (PNG, matplotlib)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .analysis import FAMILY_LEVELS, LEVELS

QQ_PNG = "calibration_qq.png"
POWER_PNG = "calibration_power.png"
CURVES_PNG = "calibration_power_curves.png"


def plots(result: dict, out: Path) -> list[str]:
    """The PNG plots, or none (said once) when matplotlib is not installed."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("matplotlib is not installed: skipping the PNG plots (the Markdown and JSON reports are complete)")
        result["plots_skipped"] = "matplotlib not installed"
        return []
    return [str(plot_qq(result, result["p_values"], out)), str(plot_power(result, out)),
            str(plot_curves(result, out))]  # fmt: skip


def plot_curves(result: dict, out: Path) -> Path:
    """One panel per curve: measured detection rate (95% CI) and the design's lower bound against rows."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    items = result.get("curves", [])
    fig, axes = plt.subplots(1, max(1, len(items)), figsize=(3.4 * max(1, len(items)), 3.6), squeeze=False)
    for ax, curve in zip(axes[0], items, strict=False):
        rows = np.array([p["rows"] for p in curve["points"]])
        measured = np.array([p["detected"]["rate"] for p in curve["points"]])
        low = measured - np.array([p["detected"]["ci_low"] for p in curve["points"]])
        high = np.array([p["detected"]["ci_high"] for p in curve["points"]]) - measured
        bound = np.array([p["designed_power_lower_bound"] for p in curve["points"]], dtype=float)
        ax.errorbar(rows, measured, yerr=[low, high], fmt="o-", capsize=3, label="measured (95% CI)")
        ax.plot(rows, bound, "s--", color="tab:red", label="design lower bound")
        ax.set_xscale("log", base=2)
        ax.set(ylim=(-0.03, 1.03), xlabel="rows per seed", title=f"{curve['mutant']}\n{curve['check']}")
        ax.title.set_fontsize(8)
    axes[0][0].set_ylabel("power of the single check")
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    path = out / CURVES_PNG
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_qq(result: dict, p_values: dict[str, dict[str, list[float]]], out: Path) -> Path:
    """Left: QQ of each kind's p-values (first correct engine) with the KS 95% band. Right: -log10 tails."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 6))
    engine = result["null"][0]["engine"]
    tested = {kind: values for kind, values in p_values[engine].items() if values}
    for kind, values in sorted(tested.items()):
        p = np.sort(values)
        expected = (np.arange(1, p.size + 1) - 0.5) / p.size
        left.plot(expected, p, lw=1.2, label=f"{kind} (n={p.size})")
    grid = np.linspace(0, 1, 101)
    left.plot(grid, grid, "k--", lw=0.8)
    if tested:  # a run where every check went untested has no band to draw
        n_band = int(np.median([len(v) for v in tested.values()]))
        band = 1.358 / math.sqrt(n_band)
        left.fill_between(
            grid,
            np.clip(grid - band, 0, 1),
            np.clip(grid + band, 0, 1),
            color="0.85",
            label=f"KS 95% band at the median n={n_band}",
        )
    left.set(xlabel="uniform quantile", ylabel="observed p-value", title=f"{engine}: p-values per check kind")
    left.legend(fontsize=7)
    for name, kinds in p_values.items():
        p = np.sort(np.concatenate([np.asarray(v, dtype=float) for v in kinds.values()]))
        p = np.clip(p, 1e-300, 1)
        expected = (np.arange(1, p.size + 1) - 0.5) / p.size
        right.plot(-np.log10(expected), -np.log10(p), ".", ms=3, label=f"{name}: all kinds (n={p.size})")
    top = -math.log10(0.5 / max(sum(len(v) for v in kinds.values()) for kinds in p_values.values()))
    right.plot([0, top], [0, top], "k--", lw=0.8)
    for level in FAMILY_LEVELS + LEVELS[1:2]:
        right.axhline(-math.log10(level), color="0.7", lw=0.6)
    right.set(xlabel="-log10 expected", ylabel="-log10 observed", title="tails (all kinds pooled)")
    right.legend(fontsize=8)
    fig.tight_layout()
    path = out / QQ_PNG
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_power(result: dict, out: Path) -> Path:
    """Run-level power per biased sampler with its 95% CI; markers: the best designed lower bound of its checks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["power"]
    names = [m["engine"] for m in rows]
    measured = np.array([m["flagged"]["rate"] for m in rows])
    low = measured - np.array([m["flagged"]["ci_low"] for m in rows])
    high = np.array([m["flagged"]["ci_high"] for m in rows]) - measured
    design = []
    for m in rows:
        bounds = [c["designed_power_lower_bound"] for c in m["checks"]]
        bounds = [b for b in bounds if b is not None and math.isfinite(b)]
        design.append(max(bounds) if bounds else math.nan)
    fig, ax = plt.subplots(figsize=(max(6, 1.4 * len(rows)), 4.5))
    x = np.arange(len(rows))
    t2 = np.array([m["flagged_by_t2"]["rate"] for m in rows])
    t2_low = t2 - np.array([m["flagged_by_t2"]["ci_low"] for m in rows])
    t2_high = np.array([m["flagged_by_t2"]["ci_high"] for m in rows]) - t2
    width = 0.38
    bars = [(-1, measured, [low, high], "tab:blue", "measured: runs flagged, T0 + T2 (95% CI)"),
            (1, t2, [t2_low, t2_high], "tab:orange", "measured: T2 checks alone (Holm)")]  # fmt: skip
    for side, values, error, color, label in bars:
        ax.bar(x + side * width / 2, values, width, yerr=error, capsize=3, color=color, label=label)
    ax.plot(x + width / 2, design, "D", color="tab:red", label="design: best lower bound of one T2 check")
    ax.set_xticks(x, names, rotation=20, ha="right", fontsize=8)
    ax.set(ylim=(0, 1.05), ylabel=f"power at run alpha {result['run_alpha']:g}", title="power on biased samplers")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    path = out / POWER_PNG
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
