"""The deterministic edge probe: rare u = 0 edges shown in one call, with forced generator states (specref.forced).

    probe = edge_probe(caller, seed, timeout=lambda: 60.0)
    probe.results   # rare_edge[accept], rare_edge[correction], rare_edge[bonus]: T0 records of family "edge"
    probe.summary   # what was forced, what the verifier read, each edge found (also in the last result's
                    # details["forced_probe"], so report.json and merged shards carry it)

Two batches of ROWS rows, g = 1, each called with a CPU generator whose first FORCEABLE outputs are all float32
zeros (low 24 bits 0, high 8 bits not: float64 and exponential draws stay > 0):
  accept  p = (0, 3/8, 5/8, 0), q = (1/2, 0, 0, 1/2): every accept test has p/q = 0 and the residual is p, whose
          first token has probability 0. `u <= p/q` accepts the draft; a left-side inverse CDF returns token 0.
  bonus   p = q = (0, 3/8, 5/8, 0): every draft is accepted (p/q = 1), and the bonus row starts with a zero:
          a left-side inverse CDF returns token 0 as the bonus.
A correct verifier emits no zero-probability token whatever its uniforms are, so it passes. When a row does emit
one, the edge is confirmed on a single forced output: the forced set is halved until one forced word alone shows
it. One output with its low 24 bits 0 happens in nature with probability 2^-24, so the edge is stated with that
probability; a failure that needs several zeros at once (an event that never happens) is reported, not counted.

Reach. The probe shows an edge only in a verifier that draws its uniforms from the generator it is given (or
copies its state into the RNG it draws from, as the transformers adapter does). The caller reports how many
outputs of the forced stream a call read, and how many seeds it drew from it through adapters.seeds_from; a
verifier that read fewer than one per row (a seed for its own RNG, numpy, an engine's sampler), drew any seed (its
uniforms come from those seeds, however many outputs it read), or runs on CUDA (Philox cannot be forced) gets "rare
edge not shown", and its checks are not tested, never passed. Where the generator cannot be forced but the adapter
declares `uniforms` (CUDA), the same batches are called with a 0 injected in one column at a time (`inject`); so
is a verifier declaring float64 uniforms (the reference engine), whose draws forced float32 zeros never make 0.

Trees: the tree contract (tree/contract.py: TreeContract.edge_probe) runs the same probe on the same rows as
one-node trees (`probe_batch(..., tree=True)`, tree/scenarios.from_chain: N = 1, the single child is the chain's
draft, parents 0), called through its call form; the tokens it returns ([B, N+1] = [B, 2], read with
`caller.contract.tokens`) are the chain's g = 1 layout, so `classify` reads them. A non-strict accept test there is
SGLang's `coin <= prob_acc` (a float32 coin of 0 accepts a child of p = 0). Injected uniforms [B, N+1] follow
specref.reference.tree's convention: u_0 the accept test, u_N the final draw, except that sample_match draws the
root's token (its correction) with u_0. The report's words and snippets: report/edges.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch

from ...forced import FORCEABLE, GIVEN, event_probability, forced_state
from ...stats import CheckResult
from ...stats import not_tested as _not_tested
from ..engine.calls import AdapterFailure, Caller
from ..engine.failure_words import defect_words
from ..engine.passes import derive_seed
from ..engine.registry import EDGE, LAW
from ..engine.results import t0_result
from .locate import locate_edge

ROWS = 64
KIND = "rare_edge"
FAMILY = EDGE
EDGES = ("accept", "correction", "bonus")
_WHAT = {
    "accept": (
        "accepts a zero-probability draft when the float32 uniform of its accept test is exactly 0",
        "accept test",
    ),
    "correction": (
        "draws a zero-probability correction token when the float32 uniform of the residual draw is exactly 0",
        "correction draw",
    ),  # fmt: skip
    "bonus": (
        "draws a zero-probability bonus token when the float32 uniform of the bonus draw is exactly 0",
        "bonus draw",
    ),  # fmt: skip
}


def edge_words(edge: str) -> str:
    """The sentence a verdict gives for an edge found by the probe (CPU float32 uniforms)."""
    what, per = _WHAT[edge]
    return f"{what} (at least 2^-24 per {per} on CPU)"


class ProbeDesign(Protocol):
    """What a contract gives the probe (chain/probe.py; the tree's reuses it as one-node trees)."""

    def batch(self, name: str, dtype: torch.dtype, rows: int, seed: int) -> tuple:
        """(the probe's batch `name` ('accept' or 'bonus') as g = 1 chain rows, the same rows as the contract's call
        takes them)."""

    def classify(self, batch_name: str, batch, out: np.ndarray, target_seen: np.ndarray) -> dict[int, str]:
        """{row: edge} for the rows whose output [B, 2] breaks a T0 check: 'accept', 'correction', 'bonus' or the
        check's name."""

    def correction_column(self, adapter) -> int:
        """The column of injected uniforms [B, 2] the correction draw reads (the accept test reads column 0)."""


@dataclass
class EdgeProbe:
    results: list[CheckResult] = field(default_factory=list)
    summary: dict = field(default_factory=dict)
    seconds: float = 0.0


def edge_probe(caller: Caller, seed: int, timeout: Callable[[], float], design: ProbeDesign,
               inject: bool | None = None) -> EdgeProbe:  # fmt: skip
    """Run the probe through `caller` on the contract's `design` (module docstring); raises AdapterFailure only for
    a hang. inject: give the adapter uniforms with a 0 (it must declare `uniforms`) instead of forcing its
    generator; None: only off CPU."""
    adapter, started = caller.adapter, time.perf_counter()
    probe = EdgeProbe(summary=_summary())
    on_cpu = torch.device(adapter.device).type == "cpu" if inject is None else not inject
    if inject is None and getattr(adapter, "uniform_dtype", None) == torch.float64:
        # forced float32 zeros never make its float64 draws 0: give it a 0 directly where it accepts uniforms
        on_cpu = False
    if not on_cpu and not adapter.uniforms:
        return not_shown(f"the verifier runs on {adapter.device}, whose generator (Philox) cannot be forced"
                         if torch.device(adapter.device).type != "cpu" else "the verifier declares float64 uniforms, "
                         "which forced float32 zeros never make 0, and accepts no injected ones")  # fmt: skip
    shown: dict[str, str | None] = {}  # edge -> None (tested, not found) or the reason it was not shown
    for batch_name in ("accept", "bonus"):
        try:
            if on_cpu:
                _probe_batch(caller, design, probe, batch_name, seed, timeout, shown)
            else:  # CUDA: Philox cannot be forced, but an adapter that accepts uniforms can be given a 0
                _injected_batch(caller, design, probe, batch_name, seed, timeout, shown)
        except AdapterFailure as failure:
            probe.results.append(t0_result(f"{KIND}[{batch_name}_call]", 1, ROWS, {
                "family": FAMILY, "edge": f"the adapter failed under a forced float32 u = 0: {failure}"}))  # fmt: skip
            if failure.kind == "hang":
                raise
    for edge in EDGES:
        name = f"{KIND}[{edge}]"
        found = probe.summary["edges"].get(edge)
        if found:  # a failure of natural draws is a law failure (as t0_zero_prob_emitted); a forced-only one, an edge
            probe.results.append(_found(name, found))
        elif shown.get(edge, "not probed"):
            probe.results.append(_untested(name, shown.get(edge, "not probed")))
        else:
            probe.results.append(t0_result(name, 0, ROWS, {"family": FAMILY}))
    for key, found in probe.summary["edges"].items():  # a finding no edge above names ('bonus:t0_...'): failed too
        if key not in EDGES:
            probe.results.append(_found(f"{KIND}[{key}]", found))
    probe.seconds = time.perf_counter() - started  # wall time, calls and locating included (not in the records:
    # merged shards must equal one run bit for bit)
    probe.results[-1].details["forced_probe"] = probe.summary  # carried by report.json and by shards
    return probe


def _found(name: str, found: dict) -> CheckResult:
    """The failed record of one finding: family "edge" when forced zeros alone show it, "law" when natural draws
    do too."""
    return t0_result(name, 1, ROWS, {"family": LAW if found.get("natural") else FAMILY, "edge": found["words"]})


def not_shown(why: str) -> EdgeProbe:
    """The probe's records where it cannot reach the subject: every edge not tested, with the reason (report.md and
    the terminal say "rare edge not shown: <why>" and give the statistical probe's detection probability)."""
    why = f"rare edge not shown: {why}"
    summary = {**_summary(), "not_shown": why}
    results = [_untested(f"{KIND}[{edge}]", why) for edge in EDGES]
    results[-1].details["forced_probe"] = summary
    return EdgeProbe(results=results, summary=summary)


def _summary() -> dict:
    """What report.json records of the probe (details["forced_probe"]), before any call."""
    return {"rows": ROWS, "forced_outputs": FORCEABLE, "edges": {}, "batches": {}}


def _untested(name: str, why: str) -> CheckResult:
    return _not_tested(name, why, 0, {"tier": "none", "family": FAMILY})


def _probe_batch(caller, design: ProbeDesign, probe: EdgeProbe, batch_name: str, seed: int, timeout,
                 shown: dict) -> None:  # fmt: skip
    batch, called = design.batch(batch_name, caller.adapter.dtype, ROWS, seed)  # called: as the contract's call
    # takes it; its tokens read back as the chain's [B, 2]
    generator_seed = derive_seed("edge", seed, batch_name)
    edges_here = ("accept", "correction") if batch_name == "accept" else ("bonus",)
    memo: dict[tuple, tuple[dict[int, str], int | None, int, dict[str, int]]] = {}

    def call(positions) -> tuple[dict[int, str], int | None, int, dict[str, int]]:
        key = tuple(positions)
        if key not in memo:
            state = forced_state(positions, seed=generator_seed)
            out, seen, _ = caller(called, generator_seed, timeout=timeout(), generator_state=state,
                                  where={"scenario": f"edge_{batch_name}", "rows": ROWS})  # fmt: skip
            found = design.classify(batch_name, batch, caller.contract.tokens(out), seen[0])
            memo[key] = found, caller.outputs_used, caller.seeds_drawn, caller.reached
        return memo[key]

    found, used, seeds, reached = call(range(FORCEABLE))
    # the RNGs it seeded, forked or made during the call started in the forced state too (forced.reaching)
    own = {rng: n for rng, n in reached.items() if rng != GIVEN and n}
    given = FORCEABLE if used is None else used
    read = given + sum(own.values())
    span = min(max([given, *own.values()]), FORCEABLE)  # the forced positions any RNG read
    probe.summary["batches"][batch_name] = {"outputs_read": read, "rows_with_a_zero_probability_token": len(found),
                                            "seeds_drawn": seeds, "rngs_reached": {GIVEN: given, **own}}  # fmt: skip
    if read < ROWS or (seeds and not own):
        why = (
            f"rare edge not shown: the verifier drew {seeds} seed{'s' * (seeds != 1)} from the generator it was "
            "given for RNGs of its own (seeds_from), so the forced zeros landed in seeds, not in its uniforms"
            if seeds
            else f"rare edge not shown: the verifier read {read} outputs of the generator it was given and of the "
            f"torch RNGs it seeded, forked or made during the call, for {ROWS} rows (its uniforms come from "
            "elsewhere: numpy, an engine's sampler, or a torch.Generator made before the call)"
        )
        probe.summary["not_shown"] = why
        shown.update({edge: why for edge in edges_here})
        return
    for edge in edges_here:
        shown.setdefault(edge, None)
    natural = call([])[0] if found else {}  # the same call with no forced zero
    for edge in sorted(set(found.values())):
        key = edge if edge in EDGES else f"{batch_name}:{edge}"
        hits = sum(e == edge for e in natural.values())
        if hits:  # a failure of natural draws: the contract checks judge it; the probe only says so
            probe.summary["edges"][key] = {"words": f"{_WHAT.get(edge, (edge,))[0].split(' when ')[0]} without any "
                                           f"forced zero ({hits} of {ROWS} rows): not only a rare edge",
                                           "batch": batch_name, "natural": True}  # fmt: skip
            continue
        witness = _single(lambda positions, e=edge: e in call(positions)[0].values(), list(range(span)))
        if witness is None:
            probe.summary.setdefault("not_counted", []).append(
                f"{edge} in the {batch_name} batch only with several forced zeros at once (never in nature)"
            )
            continue
        rows = [r for r, e in call([witness])[0].items() if e == edge]
        sites = locate_edge(caller.adapter, called, generator_seed, forced_state([witness], seed=generator_seed),
                            form=caller.form)  # fmt: skip
        words = edge_words(edge) if edge in EDGES else f"breaks {edge} when one float32 uniform is exactly 0"
        rngs = {rng: n for rng, n in call([witness])[3].items() if n}
        own_rngs = [rng for rng in rngs if rng != GIVEN]
        reached = f"; reached through {', '.join(own_rngs)}, started forced during the call" if own_rngs else ""
        probe.summary["edges"][key] = {
            "words": words + reached + (f"; at {sites[0]}" + defect_words(f"at {sites[0]}") if sites else ""),
            "batch": batch_name,
            "output": witness,
            "row": rows[0],
            "generator_seed": generator_seed,
            "sites": sites,
            "event_probability": event_probability("cpu", torch.float32),
            "rngs": rngs,  # {RNG: outputs read}: where the forced uniform reached it (GIVEN alone: the generator)
        }
    if batch_name == "accept" and "accept" in probe.summary["edges"] and "correction" not in probe.summary["edges"]:
        shown["correction"] = "not shown: the forced rows were accepted (the accept failure), so none drew a correction"


def _injected_batch(caller, design: ProbeDesign, probe: EdgeProbe, batch_name: str, seed: int, timeout,
                    shown: dict) -> None:  # fmt: skip
    """The probe through injected uniforms [B, g+1] (an adapter declaring `uniforms`): one column 0 at a time, the
    other natural, so each row has one zero, as in nature. The event's probability is that of the adapter's device
    and uniform dtype (CUDA float32: 2^-25); None (float64) makes a finding not counted."""
    adapter = caller.adapter
    batch, called = design.batch(batch_name, adapter.dtype, ROWS, seed)
    rng = np.random.Generator(np.random.PCG64(derive_seed("edge-injected", seed, batch_name)))
    natural = rng.uniform(2.0**-20, 1 - 2.0**-20, size=(ROWS, 2))  # [B, g+1]
    event = event_probability(adapter.device, adapter.uniform_dtype or torch.float32)

    memo: dict[int, dict[int, str]] = {}

    def call(uniforms) -> dict[int, str]:
        out, seen, _ = caller(called, 0, timeout=timeout(), uniforms=uniforms,
                              where={"scenario": f"edge_{batch_name}", "rows": ROWS})  # fmt: skip
        return design.classify(batch_name, batch, caller.contract.tokens(out), seen[0])

    baseline = None
    columns = {"bonus": 1} if batch_name == "bonus" else {"accept": 0, "correction": design.correction_column(adapter)}
    for edge, column in columns.items():
        shown[edge] = None
        if column not in memo:
            uniforms = natural.copy()
            uniforms[:, column] = 0.0
            memo[column] = call(uniforms)
        rows = [r for r, e in memo[column].items() if e == edge]
        if not rows:
            continue
        baseline = call(natural) if baseline is None else baseline
        hits = sum(e == edge for e in baseline.values())
        if hits:  # a failure of natural uniforms: a law failure, as in the forced probe
            probe.summary["edges"][edge] = {"words": f"{_WHAT[edge][0].split(' when ')[0]} with no zero uniform "
                                            f"({hits} of {ROWS} rows): not only a rare edge", "batch": batch_name,
                                            "natural": True}  # fmt: skip
            continue
        if event is None:
            probe.summary.setdefault("not_counted", []).append(
                f"{edge} with an injected uniform of 0, which its {adapter.uniform_dtype} uniforms never are in "
                "practice (2^-53)")  # fmt: skip
            continue
        exponent = f"2^{np.log2(event):.0f}"
        words = edge_words(edge).replace("2^-24", exponent).replace("on CPU", f"on {adapter.device}")
        probe.summary["edges"][edge] = {
            "words": words + " (shown with an injected uniform of 0)",
            "batch": batch_name,
            "injected_column": column,
            "row": rows[0],
            "event_probability": event,
        }
    probe.summary["batches"][batch_name] = {"injected": True}


def _single(shows: Callable[[list[int]], bool], positions: list[int]) -> int | None:
    """One forced position that shows the edge alone, or None; `shows(positions)` is known True. Prefixes of 1, 2,
    4, ... positions first (a row-0 edge costs a call or two), then halving inside the first prefix that shows."""
    size = 1
    while size < len(positions) and not shows(positions[:size]):
        size *= 2
    positions = positions[:size]
    while len(positions) > 1:
        half = len(positions) // 2
        for part in (positions[half:], positions[:half]):  # the prefix without the upper half did not show
            if shows(part):
                positions = part
                break
        else:
            return None
    return positions[0] if positions and shows(positions) else None
