"""The PNG plots of a report: observed against expected inside pointwise 99.9% bands (expected +- 3.29 binomial
standard deviations), one panel per scenario with a small vocabulary: the first-token law, the accepted-length law,
and the reject rate by position against Z. Which checks a plot group draws is each kind's `plot`
(engine/registry.py)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ...stats.record import CheckId
from ..contracts import every_kind

#: Half-width of the plots' pointwise bands, in binomial standard deviations (two-sided 99.9%).
BAND_Z = 3.29
#: Scenarios per plot grid; the rest are left out of the PNGs (report.json keeps every series).
PLOT_MAX_PANELS = 16
PLOT_FILES = {"first": "first_token.png", "length": "accepted_length.png", "reject": "reject_rate.png"}


def plot_checks(group: str) -> tuple[str, ...]:
    """The kinds whose law a plot group draws (engine/registry.py: each kind's plot)."""
    return tuple(k.name for k in every_kind().values() if k.plot == group)


def write_plots(record: dict, out: Path) -> dict[str, Path]:
    """The three PNG grids (one panel per scenario with small vocabulary); returns {kind: path} for those drawn."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = {}
    for kind, filename in PLOT_FILES.items():
        fig = figure(record, kind)
        if fig is None:
            continue
        path = out / filename
        fig.savefig(path, dpi=80)
        plt.close(fig)
        paths[f"png_{kind}"] = path
    return paths


def figure(record: dict, kind: str):
    """One plot group's grid as a matplotlib Figure (None when no scenario has a panel), on fixed margins (MARGINS):
    the figure title above the panels' titles, tick and axis labels inside the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    checked = {c["name"] for c in record["checks"]}
    # a panel only where its law is the one a check tests (not, e.g., for rows sharing one fixed draft)
    panels = [
        (name, series[kind])
        for name, series in record["plots"].items()
        if kind in series and any(str(CheckId(check, name)) in checked for check in plot_checks(kind))
    ][:PLOT_MAX_PANELS]
    if not panels:
        return None
    cols = min(4, len(panels))
    rows = math.ceil(len(panels) / cols)
    width, height = 4.2 * cols, 0.8 + 2.8 * rows
    fig, axes = plt.subplots(
        rows, cols, figsize=(width, height), squeeze=False, gridspec_kw=_margins(width, height, rows, cols)
    )
    for ax, (name, data) in zip(axes.flat, panels, strict=False):
        if kind == "reject":
            _reject_panel(ax, data)
        else:
            _law_panel(ax, data, "token" if kind == "first" else "accepted drafts")
        ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=7)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in list(axes.flat)[len(panels) :]:
        ax.axis("off")
    title = {"first": "first emitted token: observed vs p_1", "length": "accepted drafts per cycle: observed vs law",
             "reject": "reject rate by position vs Z"}[kind]  # fmt: skip
    fig.suptitle(f"{record['impl']}: {title} (bands: +-{BAND_Z} sd)", fontsize=11)
    return fig


#: Fixed margins in inches: room for the tick and axis labels (fontsize 7-8), each panel's title, and the figure's
#: title above the first row. Fixed rather than matplotlib's constrained layout, which measures every text of the
#: figure: without it a 16-panel report's plots took 5.0 s of CPU instead of 7.3 (test_plot_layout holds the same
#: geometry).
MARGINS = {"left": 0.5, "right": 0.15, "bottom": 0.45, "top": 0.75, "between_columns": 0.55, "between_rows": 0.7}


def _margins(width: float, height: float, rows: int, cols: int) -> dict:
    """The subplot grid's parameters (figure fractions; gaps as fractions of a panel) for MARGINS, in inches."""
    m = MARGINS
    panel_width = (width - m["left"] - m["right"] - (cols - 1) * m["between_columns"]) / cols
    panel_height = (height - m["top"] - m["bottom"] - (rows - 1) * m["between_rows"]) / rows
    return {"left": m["left"] / width, "right": 1 - m["right"] / width, "bottom": m["bottom"] / height,
            "top": 1 - m["top"] / height, "wspace": m["between_columns"] / panel_width,
            "hspace": m["between_rows"] / panel_height}  # fmt: skip


def _law_panel(ax, data: dict, xlabel: str) -> None:
    observed = np.asarray(data["observed"], float)
    expected = np.asarray(data["expected"], float)
    n = observed.sum()
    law = expected / expected.sum() if expected.sum() else expected
    x = np.arange(observed.size)
    band = BAND_Z * np.sqrt(law * (1 - law) / max(n, 1))
    ax.bar(x, law, color="#c6dbef", label="expected")
    ax.errorbar(x, law, yerr=band, fmt="none", ecolor="#3182bd", capsize=2, lw=1)
    ax.plot(x, observed / max(n, 1), "o", color="#d62728", ms=3, label="observed")
    ax.set_xlabel(xlabel, fontsize=8)
    ax.legend(fontsize=7)


def _reject_panel(ax, data: dict) -> None:
    rejected = np.asarray(data["rejected"], float)
    reached = np.asarray(data["reached"], float)
    z = data["z"]
    x = np.arange(1, rejected.size + 1)
    rate = np.divide(rejected, reached, out=np.full(rejected.size, np.nan), where=reached > 0)
    band = BAND_Z * np.sqrt(z * (1 - z) / np.maximum(reached, 1))
    ax.axhline(z, color="#3182bd", lw=1, label=f"Z = {z:.3g}")
    ax.fill_between(x, z - band, z + band, color="#c6dbef", step="mid")
    ax.plot(x, rate, "o", color="#d62728", ms=4, label="observed")
    ax.set_xlabel("draft position", fontsize=8)
    ax.set_ylim(-0.05, 1.05)
    ax.legend(fontsize=7)
