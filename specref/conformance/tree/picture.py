"""The tree picture: acceptance per node on the tree shape, observed next to its exact law.

`exact_node_acceptance` enumerates one cycle of the reference engine (lazy drafting, then the walk) and returns
P(node i is accepted) for every node of the layout; the k-th child drawn at a node is the layout's k-th slot there
(iid, without_replacement, topk; not dedup, whose merged children shift). `draw` puts the observed rates (from the
accepted nodes an adapter returns) and the exact ones on the tree, one panel per scenario, into
tree_acceptance.png, and links it from report.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from ...exact import enumerate_law
from ...reference.drafting import DraftedTree
from ...reference.tree import walk
from .scenarios import TreeScenario, layout

PICTURE = "tree_acceptance.png"
#: Schemes whose exact per-node law is cheap to enumerate end to end (no drafting randomness). Under iid or
#: without-replacement drafting the full-cycle enumeration runs to minutes on EAGLE-like trees: not drawn yet.
PICTURED_SCHEMES = ("topk",)


def slot_paths(shape) -> list[tuple[int, ...]]:
    """Sibling-rank paths of the nodes of a shape, in the layout's (breadth-first) order."""
    paths, frontier = [], [((), shape)]
    while frontier:
        nxt = []
        for path, node_shape in frontier:
            for rank, child in enumerate(node_shape):
                paths.append(path + (rank,))
                nxt.append((path + (rank,), child))
        frontier = nxt
    return paths


def exact_node_acceptance(scenario: TreeScenario, shape_index: int, scheme: str, rule: str) -> np.ndarray:
    """[N] P(node i of the layout is accepted in one cycle), exact (floats of Fractions)."""
    if scheme == "dedup":
        raise ValueError("scheme='dedup' merges children: its slots do not follow the layout")
    shape = scenario.shapes[shape_index]
    index = {path: i for i, path in enumerate(slot_paths(shape))}
    target, draft = scenario.models()

    def program(rng):
        tree = DraftedTree(target, draft, (), shape, scheme, rng)
        _, nodes = walk(tree, rule, rng)
        path, out = (), []
        for node in nodes:
            path += (tree.children(tree.parents[node]).index(node),)
            out.append(index[path])
        return tuple(out)

    accepted = np.zeros(len(index))
    for nodes, prob in enumerate_law(program).items():
        for i in nodes:
            accepted[i] += float(prob)
    return accepted


def draw(series: dict, out_dir: str | Path) -> Path | None:
    """series: scenario -> {"parents", "observed", "exact", "rows"}; writes the PNG, returns its path (None when
    matplotlib is absent or nothing to draw)."""
    if not series:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("specref: no tree picture: matplotlib is not installed", file=sys.stderr)
        return None
    cols = min(3, len(series))
    rows = -(-len(series) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.4 * rows), squeeze=False)
    for ax in axes.ravel()[len(series) :]:
        ax.axis("off")
    for ax, (name, s) in zip(axes.ravel(), series.items()):
        parents = s["parents"]
        x, y = _positions(parents)
        for i, parent in enumerate(parents, start=1):
            ax.plot([x[parent], x[i]], [y[parent], y[i]], color="0.7", zorder=1)
        observed, exact = np.asarray(s["observed"]), np.asarray(s["exact"])
        ax.scatter(x[1:], y[1:], c=observed, cmap="viridis", vmin=0, vmax=max(1e-9, exact.max()), s=380, zorder=2)
        ax.scatter([x[0]], [y[0]], color="k", s=80, zorder=2)
        for i in range(len(parents)):
            ax.annotate(f"{observed[i]:.3f}\n{exact[i]:.3f}", (x[i + 1], y[i + 1]), textcoords="offset points",
                        xytext=(0, -24), ha="center", fontsize=7)  # fmt: skip
        ax.set_title(f"{name}\n({s['rows']:,} cycles; observed over exact)", fontsize=8)
        ax.axis("off")
    fig.suptitle("P(node accepted): observed (top) and exact (bottom)", fontsize=9)
    fig.tight_layout()
    path = Path(out_dir) / PICTURE
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _positions(parents: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Leaves spread left to right, each inner node above the mean of its children; the root at the top."""
    n = len(parents)
    kids: list[list[int]] = [[] for _ in range(n + 1)]
    for i, parent in enumerate(parents, start=1):
        kids[parent].append(i)
    x, y = np.zeros(n + 1), np.zeros(n + 1)
    leaf = [0]

    def place(node: int, depth: int) -> float:
        y[node] = -depth
        if not kids[node]:
            x[node] = leaf[0]
            leaf[0] += 1
        else:
            x[node] = float(np.mean([place(c, depth + 1) for c in kids[node]]))
        return x[node]

    place(0, 0)
    return x, y


def series_for(tally, scheme: str, rule: str) -> dict | None:
    """The picture's data for one scenario's tally (single-shape scenarios with returned nodes), or None."""
    sc = tally.scenario
    if sc.joint or len(sc.shapes) != 1 or scheme not in PICTURED_SCHEMES or not tally.node_rows:
        return None
    rows = int(tally.node_rows)
    return {"parents": layout(sc.shapes[0]), "rows": rows, "observed": (tally.node_hits / rows).tolist(),
            "exact": exact_node_acceptance(sc, 0, scheme, rule).tolist()}  # fmt: skip


def add_to_report(report, paths: dict) -> None:
    """Draw the picture of a tree report next to its report.md and link it there (a failed drawing costs only it)."""
    series = {name: s["node_acceptance"] for name, s in report.scenarios.items() if "node_acceptance" in s}
    try:
        path = draw(series, Path(paths["md"]).parent)
    except Exception as error:  # noqa: BLE001 -- a picture may cost its own file, never the report
        print(f"specref: no tree picture: {type(error).__name__}: {error}", file=sys.stderr)
        return
    if path is not None:
        md = Path(paths["md"])
        md.write_text(md.read_text() + f"\n## Acceptance per node\n\nP(node accepted) on each tree: observed (top) "
                      f"and exact (bottom, by enumeration).\n\n![tree acceptance]({path.name})\n")  # fmt: skip
        paths["picture"] = str(path)
