"""How much each lossless rule gains: exact expected tokens per target pass, by rule, tree shape and instance.

`expected_tokens` is E[tokens emitted by one cycle] = 1 + E[accepted drafts], computed exactly (Fractions) from
the law of one cycle (`specref.exact_tree`), so rules compare on the same p/q instances without sampling noise.
Each rule runs under the drafting scheme it assumes; every tree of a row scores the same number of nodes, so the
rules of a row cost the same target pass.

    python -m specref.rules_tau [--out reports]     writes reports/rules.md and rules.json
"""

from __future__ import annotations

import argparse
import json
from fractions import Fraction
from pathlib import Path

from . import exact_tree
from .models import ContextFree, HashedContext
from .reference.drafting import chain_shape, shape_depth, shape_size

#: (label, scheme, rule) of the lossless tree rules; on a chain, mss is token verification.
TREE_RULES = [
    ("MSS, i.i.d. children", "iid", "mss"),
    ("MSS, random sibling order", "iid", "mss:random-order"),
    ("RSD, without replacement", "without_replacement", "rsd"),
    ("RSD, i.i.d. de-duplicated", "dedup", "rsd"),
    ("target-only, top-k children", "topk", "target_only"),
    ("sample-and-match, i.i.d. children", "iid", "sample_match"),
]
CHAIN_RULES = [("token verification", "iid", "mss"), ("sample-and-match", "iid", "sample_match")]

SHAPES = {
    "chain g=1": chain_shape(1),
    "chain g=2": chain_shape(2),
    "chain g=3": chain_shape(3),
    "star K=2": ((), ()),
    "star K=3": ((), (), ()),
    "binary depth 2": (((), ()), ((), ())),
    "EAGLE-like 3+2+1": (((), ()), ((),), ()),
}


def _weights_row(weights):
    total = sum(weights)
    return tuple(Fraction(w, total) for w in weights)


def instances() -> dict:
    """Named (target, draft) pairs: context-free rows at three distances, and a context-dependent pair."""
    p = _weights_row([5, 3, 1, 1])
    return {
        "close": (ContextFree(p), ContextFree(_weights_row([4, 3, 2, 1]))),
        "medium": (ContextFree(p), ContextFree(_weights_row([2, 2, 3, 3]))),
        "far": (ContextFree(p), ContextFree(_weights_row([1, 1, 4, 4]))),
        "context-dependent V=3": (HashedContext(3, 11, zero_fraction=0.0), HashedContext(3, 12, zero_fraction=0.0)),
    }


def expected_tokens(target, draft, prefix, shape, scheme: str, rule: str) -> Fraction:
    """E[tokens per target pass] of one tree cycle, exactly."""
    return 1 + exact_tree.expected_accepted(exact_tree.tree_cycle_law(target, draft, prefix, shape, scheme, rule))


def block_expected_tokens(target, draft, prefix, gamma: int) -> Fraction:
    return 1 + exact_tree.expected_accepted(exact_tree.block_cycle_law(target, draft, prefix, gamma))


def compare(names=None, shapes=None) -> list[dict]:
    """Every instance x shape x lossless rule (or the named ones): exact E[tokens per target pass]."""
    rows = []
    for instance, (target, draft) in instances().items():
        if names is not None and instance not in names:
            continue
        acceptance = sum(min(p_x, q_x) for p_x, q_x in zip(target(()), draft(())))
        for shape_name, shape in SHAPES.items():
            if shapes is not None and shape_name not in shapes:
                continue
            chain = shape_name.startswith("chain")
            row = {"instance": instance, "acceptance": str(acceptance), "shape": shape_name,
                   "nodes": shape_size(shape), "depth": shape_depth(shape), "tau": {}}  # fmt: skip
            for label, scheme, rule in CHAIN_RULES if chain else TREE_RULES:
                row["tau"][label] = expected_tokens(target, draft, (), shape, scheme, rule)
            if chain:
                row["tau"]["block verification"] = block_expected_tokens(target, draft, (), shape_depth(shape))
            rows.append(row)
    return rows


def write_report(rows: list[dict], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    serialisable = [{**row, "tau": {k: str(v) for k, v in row["tau"].items()}} for row in rows]
    (out_dir / "rules.json").write_text(json.dumps(serialisable, indent=2))
    lines = [
        "# Expected tokens per target pass, by rule",
        "",
        "Exact values (rational arithmetic, by enumerating each rule's reference implementation under the drafting "
        "scheme it assumes; `python -m specref.rules_tau`). One cycle emits the accepted drafts plus one token, so "
        "1 is the floor and depth + 1 the ceiling. Context-free instances: p = (5, 3, 1, 1)/10 and q at three "
        "distances (a = sum min(p, q) at the root); the context-dependent pair is a hashed-context model with V = 3. "
        "The p/q instances only: the tiny real models are not enumerable at their vocabulary size.",
        "",
    ]
    for chain in (True, False):
        labels = [label for label, _, _ in (CHAIN_RULES if chain else TREE_RULES)]
        labels += ["block verification"] if chain else []
        header = "| instance | a at the root | shape | nodes | " + " | ".join(labels) + " |"
        lines += [f"## {'Chains' if chain else 'Trees'}", "", header, "|---|---|---|---|" + "---|" * len(labels)]
        for row in rows:
            if row["shape"].startswith("chain") != chain:
                continue
            best = max(row["tau"].values())
            cells = [(f"**{float(row['tau'][k]):.4f}**" if row["tau"][k] == best else f"{float(row['tau'][k]):.4f}")
                     for k in labels]  # fmt: skip
            a = float(Fraction(row["acceptance"]))
            lines.append(
                f"| {row['instance']} | {a:.3f} | {row['shape']} | {row['nodes']} | " + " | ".join(cells) + " |"
            )
        lines.append("")
    lines.append("Bold: the best rule of the row. Exact fractions are in rules.json.")
    (out_dir / "rules.md").write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specref.rules_tau", description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="reports", help="directory for rules.md and rules.json")
    args = parser.parse_args(argv)
    write_report(compare(), Path(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
