"""The report's words for rare edges (edges/probe.py): report.md's "Rare edges" section, and the snippet that shows
a forced edge in one call, through the chain contract's call or the tree contract's (the probe's rows as one-node
trees).
"""

from __future__ import annotations

from ...forced import GIVEN
from ..edges.probe import FAMILY, ROWS
from ..engine.check_words import detection_words
from ..engine.snippets import load as load_code
from ..pipeline.contract import NOT_SHOWN

_SHOWS = {
    "accept": "[draft, bonus]: the draft has p = 0",
    "correction": "[token, -1]: the correction has p = 0",
    "bonus": "[draft, bonus]: the bonus has p = 0",
}


def snippet(load: str, edge: dict, dtype: str, seed: int, edge_name: str = "accept", tree: bool = False,
            nodes: bool = False) -> str:  # fmt: skip
    """Python that shows the edge in one call: `load` binds `verify` (engine/snippets.load). tree: the tree contract's
    call (the probe's rows as one-node trees; nodes: the adapter returns (tokens, nodes))."""
    dtype = dtype.replace("torch.", "")
    state = (f"state = forced_state([{edge['output']}], seed={edge['generator_seed']})  # output {edge['output']}: "
             "float32 u = 0")  # fmt: skip
    batch = f"probe_batch({edge['batch']!r}, torch.{dtype}, rows={ROWS}, seed={seed}" + (
        ", tree=True)" if tree else ")"
    )
    show = f"print(tokens[{edge['row']}], batch.draft_tokens[{edge['row']}])  # " + _SHOWS.get(
        edge_name, "a token of probability 0"
    )
    own = [rng for rng in edge.get("rngs", {}) if rng != GIVEN]  # reached through an RNG it seeded, forked or made
    verify = "tokens = verify(*args, **kwargs)"
    if own:
        verify = f"with reaching(state):  # {', '.join(own)}: forced too\n    {verify}"
    if not tree:
        call = [
            "from specref.conformance.chain.form import call_inputs",
            f"args, kwargs = call_inputs(batch, {edge['generator_seed']}, dtype=torch.{dtype}, generator_state=state)",
            verify,
        ]
    else:
        call = [
            "from specref.conformance.tree.contract import tree_call_inputs",
            f"args, kwargs = tree_call_inputs(batch, {edge['generator_seed']}, dtype=torch.{dtype}, nodes={nodes}, "
            "generator_state=state)",
            verify + ("[0]  # (tokens, nodes)" if nodes else ""),
        ]
    forced = "from specref.forced import forced_state" + (", reaching" if own else "")
    return "\n".join(["import torch", load, "from specref.conformance.edge_probe import probe_batch", forced,
                      f"batch = {batch}", state, *call, show])  # fmt: skip


# --- report.md ----------------------------------------------------------------------------------------------------


def markdown(record: dict) -> list[str]:
    """The report's "Rare edges" section, from report.json: what the forced probe showed, and the statistical
    probe's detection probability at the event probability of the verifier's device and uniform dtype."""
    probe = record.get("probe") or {}
    forced = next((c["details"]["forced_probe"] for c in record["checks"] if "forced_probe" in c["details"]), None)
    lines = ["", "## Rare edges (u = 0)", ""]
    if forced is None and (record.get("contract") or record["adapter"].get("kind")) == "pipeline":
        # a report.json from before pipelines recorded why
        lines.append(f"- rare edge not shown: {NOT_SHOWN}.")
    elif forced is None:
        lines.append("The forced edge probe did not run (a shard other than the first, or a run that stopped).")
    elif forced.get("edges"):
        others = [c for c in record["checks"] if not c["passed"] and c["details"].get("family") != FAMILY]
        tail = "; output law otherwise exact (every other check passed)" if not others else ""
        tree = record["adapter"].get("kind") == "tree"
        load = load_code(record, "specref.conformance.tree:builtin_tree_adapters" if tree
                     else "specref.conformance:builtin_adapters")  # fmt: skip
        for key, edge in forced["edges"].items():
            if edge.get("natural") or "injected_column" in edge:
                lines += [f"- **{key}**: {edge['words']}.", ""]
                continue
            lines += [
                f"- **{key}**: {edge['words']}{tail}. Shown with one forced generator output (number "
                f"{edge['output']}, low 24 bits 0), row {edge['row']} of the {edge['batch']} batch"
                + (" (one-node trees)" if tree else "")
                + ":",
                "",
                "```python",
                snippet(
                    load,
                    edge,
                    record["adapter"]["dtype"],
                    record["seed"],
                    key,
                    tree=tree,
                    nodes=bool(record["adapter"].get("nodes")),
                ),
                "```",
                "",
            ]
    elif forced.get("not_shown"):
        lines.append(f"- {forced['not_shown']}.")
    elif any(b.get("injected") for b in forced.get("batches", {}).values()):
        lines.append(
            "- No rare edge shown: with a uniform of exactly 0 injected at each accept test and at each final "
            "draw (one column at a time, the others natural), no zero-probability token was emitted."
        )
    else:
        read = ", ".join(f"{name} {b['outputs_read']}" for name, b in forced.get("batches", {}).items())
        rngs = {rng for b in forced.get("batches", {}).values() for rng in b.get("rngs_reached", {})}
        lines.append(f"- No rare edge shown: the verifier read {read} outputs of the forced streams ("
                     f"{', '.join(sorted(rngs)) or 'the generator given'}), and with a float32 u = 0 at each of the "
                     f"first {forced['forced_outputs']} of each no zero-probability token was emitted. Reached: the "
                     "generator given, torch's global RNG, and the torch RNGs the verifier seeded, forked or made "
                     "during the call; an RNG of another library (numpy, an engine's sampler) or a torch.Generator "
                     "made before the call is not.")  # fmt: skip
    for note in (forced or {}).get("not_counted", []):
        lines.append(f"- Not counted: {note}.")
    if not probe.get("scenario"):
        lines.append("- Statistical probe: not in this run's scenarios.")
    else:
        lines.append(f"- Statistical probe ({probe['scenario']}): {probe['accept_tests_with_ratio_0']:,} accept "
                     f"tests with p/q = 0; {probe['event']}; detection probability reached: "
                     f"{detection_words(probe)}.")  # fmt: skip
    return lines
