"""The report's PNGs are laid out so that nothing overlaps (issue 34): every title, axis label and tick label lies
inside the figure, and the figure's title clears every panel's title. Was: the x labels cut at the bottom edge, and
the figure title printed over the first row's panel titles. Geometry from matplotlib's own renderer (exact)."""

from __future__ import annotations

import pytest

from specref.conformance.report.plots import PLOT_FILES, figure, plot_checks

pytestmark = pytest.mark.exact
plt = pytest.importorskip("matplotlib.pyplot")


def record(panels: int) -> dict:
    scenarios = [f"scenario_{i}_g3" for i in range(panels)]
    checks = [f"{check}[{name}]" for kind in PLOT_FILES for check in plot_checks(kind) for name in scenarios]
    law = {"observed": [30, 50, 20, 0], "expected": [0.3, 0.5, 0.2, 0.0]}
    reject = {"rejected": [40, 20, 5], "reached": [100, 60, 40], "z": 0.4}
    plots = {name: {"first": law, "length": law, "reject": reject} for name in scenarios}
    return {"impl": "a-rather-long-verifier-name.verify", "checks": [{"name": c} for c in checks], "plots": plots}


def boxes(fig) -> tuple[object, list[tuple[str, object]]]:
    """(the figure title's box, [(what, box)] of every panel's title, axis labels and whole drawn extent (its tick
    labels included)), in pixels."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    found = []
    for i, ax in enumerate(a for a in fig.axes if a.axison):
        texts = [("title", ax.title), ("x label", ax.xaxis.label), ("y label", ax.yaxis.label)]
        found += [(f"panel {i} {what}", t.get_window_extent(renderer)) for what, t in texts if t.get_text()]
        found.append((f"panel {i} with its tick labels", ax.get_tightbbox(renderer)))
    return fig._suptitle.get_window_extent(renderer), found


@pytest.mark.parametrize("panels", [3, 6])  # one row (as the demo's), two rows (a title below an x label)
@pytest.mark.parametrize("kind", list(PLOT_FILES))
def test_every_label_lies_inside_the_figure_and_the_title_clears_the_panels(kind, panels):
    fig = figure(record(panels), kind)
    try:
        title, texts = boxes(fig)
        edge = fig.bbox
        for what, box in [("figure title", title), *texts]:
            assert edge.x0 - 0.5 <= box.x0 and box.x1 <= edge.x1 + 0.5, f"{what} cut at a side: {box} in {edge}"
            assert edge.y0 - 0.5 <= box.y0 and box.y1 <= edge.y1 + 0.5, f"{what} cut at the top or bottom: {box}"
        for what, box in texts:
            assert what.endswith("tick labels") or not box.overlaps(title), f"the figure title overprints {what}"
        titles = [(what, box) for what, box in texts if what.endswith("title")]
        labels = [(what, box) for what, box in texts if what.endswith("x label")]
        for a, box_a in titles:
            for b, box_b in labels:
                assert not box_a.overlaps(box_b), f"{a} overlaps {b}"
    finally:
        plt.close(fig)
