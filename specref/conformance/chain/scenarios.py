"""Scenarios: the inputs the harness feeds a verifier, with drafts the harness draws from q itself.

A scenario is a small state machine over token laws. Each state s has a target row P[s] and a draft row Q[s];
drafting from state s draws d ~ Q[s] and moves to next_state[s, d]. Context-free scenarios have one state that
never changes; order-1 Markov scenarios move to the state of the drafted token, so target rows differ by
position (the bonus-row and wrong-position bugs only show there). A mixed batch is the disjoint union of several
scenarios' machines, each row starting in its own component.

Every batch is a pure function of (scenario, seed, chunk): `inputs(rows, seed, chunk)` rebuilds it exactly, which
is what failure snippets print.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import torch

from ...errors import BadArgument
from ..engine.precision import as_given
from .columns import rows_sum
from .token_laws import dense, disjoint_pair, large_pair, normalise, one_hot, peaked, seeded_rng, sparse

#: The rare-edge probe (see _build) and the event it is sized for: one fp32 uniform equal to 0 (on CPU; see
#: probe_event_probability for other devices and dtypes).
PROBE = "probe_zero_ratio_g1"
PROBE_EVENT_PROBABILITY = 2.0**-24
PROBE_POWER = 0.99


def probe_event_probability(device="cpu", dtype: torch.dtype | None = torch.float32) -> float | None:
    """P(u = 0) for one uniform of `dtype` drawn by torch on `device`: CPU float32 2^-24, CUDA float32 2^-25, float64
    None (2^-53 on CPU: never in practice, the edge is not reachable). specref.forced.event_probability."""
    from ...forced import event_probability

    return event_probability(device, dtype)


def probe_event_words(device="cpu", dtype: torch.dtype | None = None) -> str:
    """The probe's event in words, for a verifier on `device` drawing `dtype` uniforms (None: not declared)."""
    assumed = dtype is None
    dtype = torch.float32 if assumed else dtype
    event = probe_event_probability(device, dtype)
    kind, name = torch.device(device).type, str(dtype).replace("torch.", "")
    if event is None:
        return (f"a {name} uniform equal to 0 on {kind}: not reachable (float64 uniforms are 0 with probability "
                "2^-53, never in practice)" if dtype == torch.float64
                else f"a {name} uniform equal to 0 on {kind}: its probability is not stated (not read for this "
                "device and dtype)")  # fmt: skip
    note = " (float32 assumed: the verifier does not declare the dtype of its uniforms)" if assumed else ""
    if kind == "cpu" and dtype in (torch.float16, torch.bfloat16):  # read from this torch's rounding (forced.py)
        note += f" (torch {torch.__version__}'s rounding of a float32 uniform)"
    return f"a {name} uniform equal to 0 on {kind}, probability 2^{np.log2(event):.0f} per draw{note}"


def probe_rows_needed(power: float = PROBE_POWER, event: float = PROBE_EVENT_PROBABILITY) -> int:
    """Rows for the probe to see the event at least once with probability `power` (one test per row)."""
    return int(np.ceil(np.log1p(-power) / np.log1p(-event)))


def probe_detection(rows: int, event: float = PROBE_EVENT_PROBABILITY) -> float:
    """P(the event happens at least once in `rows` independent tests)."""
    return float(-np.expm1(rows * np.log1p(-event)))


# --- scenarios --------------------------------------------------------------------------------------------------


@dataclass
class Batch:
    """One verify call's inputs (float64 here; the runner casts to the adapter's dtype)."""

    target_probs: np.ndarray  # [B, g+1, V]
    draft_probs: np.ndarray | None  # [B, g, V]; None for point-mass drafts
    draft_tokens: np.ndarray  # [B, g] int64; -1 past num_draft
    num_draft: np.ndarray  # [B] drafts that count in each row (g unless ragged)
    states: np.ndarray  # [B, g+1] state of each target row (the stratum of its law)

    def __len__(self) -> int:  # the rows B a call carries (the engine's Batch)
        return len(self.draft_tokens)


@dataclass
class Scenario:
    name: str
    description: str
    target: np.ndarray  # [S, V] P[s]
    draft: np.ndarray  # [S, V] Q[s]
    next_state: np.ndarray  # [S, V] state after drafting token x from state s
    gamma: int
    starts: np.ndarray = field(default_factory=lambda: np.zeros(1, dtype=np.int64))  # start state of each component
    context_free: bool = True
    ragged: bool = False  # rows get num_draft ~ Uniform{0..g}; needs the adapter's ragged capability
    point_mass: bool = False  # draft_probs=None; needs the point_mass capability
    identical_rows: bool = False  # every row shares one fixed draft (row-independence scenario)
    probe: bool = False  # a rare-edge probe: T0 only, sized by the event it must make happen (see PROBES)
    joint: bool = False  # the joint-law scenario: the first tokens of each row over repeated cycles (joint.py)
    rows_per_call: int = 4096
    dtype: torch.dtype = torch.float64  # the dtype its rows are exact in (see given)
    _given: dict = field(default_factory=dict, repr=False, compare=False)  # dtype -> this scenario as given
    _batches: dict = field(default_factory=dict, repr=False, compare=False)  # the probe's batch, per (rows, seed)

    @property
    def vocab_size(self) -> int:
        return self.target.shape[1]

    @property
    def row_elements(self) -> int:
        """Probabilities per row of a call: the g+1 target rows."""
        return (self.gamma + 1) * self.vocab_size

    @property
    def features(self) -> list[str]:
        """The declared features that change how the scenario is run and checked (its flags that are set)."""
        flags = {"ragged": self.ragged, "point_mass": self.point_mass, "identical_rows": self.identical_rows,
                 "probe": self.probe, "joint": self.joint, "mixed": len(self.starts) > 1,
                 "context_free": self.context_free}  # fmt: skip
        return [name for name, on in flags.items() if on]

    def given(self, dtype: torch.dtype) -> Scenario:
        """This scenario as a `dtype` verifier is given it: rows rounded to dtype, each summing to exactly 1
        (specref.conformance.precision). Drafts are drawn from the given draft rows and every expected law is
        computed from the given rows, so the law a verifier is held to is the law of what it received."""
        if dtype not in self._given:
            self._given[dtype] = replace(
                self,
                target=as_given(self.target, dtype),
                draft=as_given(self.draft, dtype),
                dtype=dtype,
                _given={},
                _batches={},
            )
        return self._given[dtype]

    def inputs(self, rows: int, seed: int, chunk, start_states: np.ndarray | None = None) -> Batch:
        if self.probe:  # tens of millions of rows: one batch per (rows, seed), every call differs by its generator
            key = (rows, seed)
            if key not in self._batches:
                self._batches.clear()
                self._batches[key] = self._inputs(rows, seed, "probe", start_states)
            return self._batches[key]
        return self._inputs(rows, seed, chunk, start_states)

    def _inputs(self, rows: int, seed: int, chunk, start_states: np.ndarray | None) -> Batch:
        rng = seeded_rng("inputs", seed, self.name, chunk)
        g, v = self.gamma, self.vocab_size
        component = rng.integers(len(self.starts), size=rows)
        states = np.empty((rows, g + 1), dtype=np.int64)
        states[:, 0] = self.starts[component] if start_states is None else start_states
        tokens = np.empty((rows, g), dtype=np.int64)
        if self.identical_rows:
            fixed = seeded_rng("identical", seed, self.name)
            rows_draws = np.broadcast_to(fixed.random(g), (rows, g))
        else:
            rows_draws = rng.random((rows, g))
        cdf = np.cumsum(self.draft, axis=1)  # [S, V]
        if self.draft.shape[0] == 1:  # one state: every position at once (the same draws, the same tokens)
            picked = np.searchsorted(cdf[0], rows_draws * cdf[0, -1], side="right")
            tokens[:] = _positive(self.draft[0], np.minimum(picked, v - 1))
            states[:, 1:] = self.next_state[0, tokens]
        for i in range(g if self.draft.shape[0] > 1 else 0):  # g <= 8: positions, vectorised over rows and states
            if v <= SMALL_V:  # searchsorted(right) is the count of cdf entries <= x: one comparison for every row
                here = states[:, i]
                picked = np.minimum(rows_sum(cdf[here] <= (rows_draws[:, i] * cdf[here, -1])[:, None]), v - 1)
                for row in np.flatnonzero(self.draft[here, picked] <= 0):  # rounding onto a zero: rare
                    picked[row] = _positive(self.draft[here[row]], picked[row : row + 1])[0]
                tokens[:, i] = picked
            else:
                for s in np.unique(states[:, i]):
                    rows_s = np.flatnonzero(states[:, i] == s)
                    picked = np.searchsorted(cdf[s], rows_draws[rows_s, i] * cdf[s, -1], side="right")
                    tokens[rows_s, i] = _positive(self.draft[s], np.minimum(picked, v - 1))
            states[:, i + 1] = self.next_state[states[:, i], tokens[:, i]]
        num_draft = rng.integers(0, g + 1, size=rows) if self.ragged else np.full(rows, g)
        if self.target.shape[0] == 1:  # context-free: broadcast views, no [B, g+1, V] copy (V may be 151936)
            target_probs = np.broadcast_to(self.target[0], (rows, g + 1, v))
            draft_probs = np.broadcast_to(self.draft[0], (rows, g, v))
        else:
            target_probs = self.target[states]  # [B, g+1, V]
            draft_probs = self.draft[states[:, :g]]  # [B, g, V]
        if self.point_mass:
            draft_probs = None
        if self.ragged:
            past = np.arange(g)[None, :] >= num_draft[:, None]  # [B, g]
            tokens[past] = -1  # placeholders: a verifier must never read them, nor the draft rows below
            if draft_probs is not None:
                draft_probs = np.array(draft_probs)  # writable, even when it was a broadcast view
                draft_probs[past] = 0.0
        return Batch(target_probs, draft_probs, tokens, num_draft, states)

    def snippet(self, rows: int, seed: int, chunk) -> str:
        given = "" if self.dtype == torch.float64 else f".given(torch.{str(self.dtype).replace('torch.', '')})"
        return (
            ("import torch\n" if given else "")
            + "from specref.conformance.scenarios import get\n"
            + f"batch = get({self.name!r}){given}.inputs(rows={rows}, seed={seed}, chunk={chunk!r})"
        )


#: Up to this vocabulary a Markov scenario draws its drafts by one [B, V] comparison per position.
SMALL_V = 64


def _positive(row: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """Inverse CDF lands on a zero-probability token only through rounding; step to the next positive one."""
    support = np.flatnonzero(row > 0)
    return support[np.minimum(np.searchsorted(support, tokens), support.size - 1)]


def context_free(name, description, target_row, draft_row, gamma, **kw) -> Scenario:
    """A one-state scenario: the same target and draft rows at every position (public, for your own p/q)."""
    target_row, draft_row = np.asarray(target_row, dtype=np.float64), np.asarray(draft_row, dtype=np.float64)
    if target_row.shape != draft_row.shape or target_row.ndim != 1:
        raise ValueError(f"target_row {target_row.shape} and draft_row {draft_row.shape} must be equal 1-D shapes")
    v = len(target_row)
    kw.setdefault("rows_per_call", int(np.clip(2**24 // (v * (gamma + 1)), 64, 4096)))  # ~128 MB of float64 rows
    return Scenario(
        name, description, target_row[None, :], draft_row[None, :], np.zeros((1, v), dtype=np.int64), gamma, **kw
    )


def markov(name, description, target, draft, gamma, start=0, **kw) -> Scenario:
    """Order-1 Markov scenario: target [V, V] and draft [V, V] rows indexed by the previous token (public)."""
    target, draft = np.asarray(target, dtype=np.float64), np.asarray(draft, dtype=np.float64)
    s, v = target.shape
    if s != v or draft.shape != target.shape:
        raise ValueError(f"target {target.shape} and draft {draft.shape} must both be [V, V]: one row per token")
    next_state = np.broadcast_to(np.arange(v), (v, v)).copy()
    return Scenario(
        name, description, target, draft, next_state, gamma, starts=np.array([start]), context_free=False, **kw
    )


def _mixed(name, description, parts: list[Scenario], **kw) -> Scenario:
    """Disjoint union of the parts' state machines; each row starts in one part, chosen uniformly."""
    gamma = parts[0].gamma
    if any(p.gamma != gamma or p.vocab_size != parts[0].vocab_size for p in parts):
        raise ValueError("parts must share gamma and vocab size to share a batch")
    offsets = np.cumsum([0] + [p.target.shape[0] for p in parts])[:-1]
    return Scenario(
        name,
        description,
        np.concatenate([p.target for p in parts]),
        np.concatenate([p.draft for p in parts]),
        np.concatenate([p.next_state + off for p, off in zip(parts, offsets)]),
        gamma,
        starts=np.concatenate([p.starts + off for p, off in zip(parts, offsets)]),
        context_free=all(p.context_free for p in parts),
        **kw,
    )


def _markov_tables(rng, v, zero_fraction=0.3) -> tuple[np.ndarray, np.ndarray]:
    target = np.stack([sparse(rng, v, zero_fraction) for _ in range(v)])
    draft = np.stack([normalise(0.5 * target[s] + 0.5 * dense(rng, v)) for s in range(v)])
    return target, draft


def _near_equal(name, rng) -> Scenario:
    p = peaked(rng, 12)
    q = normalise(p * (1 + 1e-3 * rng.standard_normal(12)))
    return context_free(name, "q = p perturbed by 1e-3 relative (tiny residuals)", p, q, 4)


def _small_residual(name, rng) -> Scenario:
    # Dyadic rows, exact in bf16, fp16 and fp32: the residual survives every dtype's rounding, whereas the rows of
    # cf_near_equal_g4 round to p == q in bf16. Z = 2^-8 + 2^-9, on tokens 0 and 2 only. No randomness.
    p = np.array([16, 12, 8, 8, 6, 6, 4, 4]) / 64
    q = p + np.array([-4, 0, -2, 0, 0, 4, 0, 2]) / 1024
    return context_free(name, "q moves 3*2^-9 of p's mass (tiny Z, exact in any dtype)", p, q, 4)


def _equal(name, rng) -> Scenario:
    p = peaked(rng, 12)
    return context_free(name, "p == q (Z = 0): every draft accepted, tau = g+1", p, p.copy(), 8)


def _one_hot_draft(name, rng) -> Scenario:
    # the draft is the target's likeliest token (a greedy drafter), so it is accepted often enough that the
    # accepted-count law has power (a one-hot draft on a rare token is almost always rejected)
    p = dense(rng, 10)
    return context_free(name, "dense target, one-hot draft on its likeliest token", p, one_hot(10, int(p.argmax())), 3)


def _mixed_batch(name, rng) -> Scenario:
    parts = [
        context_free("a", "", dense(rng, 10), dense(rng, 10), 3),
        context_free("b", "", one_hot(10, 2), dense(rng, 10), 3),  # all g+1 target rows one-hot
        context_free("c", "", *disjoint_pair(rng, 10), 3),
    ]
    return _mixed(name, "rows of three scenarios interleaved in each call", parts)


def _markov_entry(description, v, gamma, zero_fraction=0.3, **kw):
    return lambda name, rng: markov(name, description, *_markov_tables(rng, v, zero_fraction), gamma, **kw)


def _probe(name, rng) -> Scenario:
    # Every draft has p = 0 (ratio 0) and sits on the first or last token, where the residual is 0 too: a
    # non-strict accept test `u <= p/q`, or an inverse CDF that can return token 0 at u = 0, emits a p = 0 token
    # when u = 0 (probability 2^-24 per fp32 uniform). Exact in every dtype; a correct verifier always emits 1 or 2.
    p, q = np.array([0.0, 0.375, 0.625, 0.0]), np.array([0.5, 0.0, 0.0, 0.5])
    return context_free(name, "rare-edge probe: every accept test has p/q = 0", p, q, 1, probe=True,
                        rows_per_call=1 << 18)  # fmt: skip


#: The catalogue: name -> builder(name, rng). Each scenario draws its rows from its own stream, derived from its name
#: (scenario_rng), so adding, removing or reordering an entry changes no other scenario. Features are the flags the
#: builder sets (ragged, point_mass, identical_rows, joint, probe; mixed: several start states), never the name.
CATALOGUE = {
    "cf_dense_g4": lambda name, rng: context_free(name, "context-free, independent dense p and q, V=16",
                                                  dense(rng, 16), dense(rng, 16), 4),
    "cf_zero_support_g3": lambda name, rng: context_free(name, "60% of tokens have p = 0, q dense (drafts hit p = 0)",
                                                         sparse(rng, 32, 0.6), dense(rng, 32), 3),
    "cf_disjoint_g2": lambda name, rng: context_free(name, "disjoint supports: every draft rejected at position 1",
                                                     *disjoint_pair(rng, 12, cut=5), 2),
    "cf_equal_g8": _equal,
    "cf_near_equal_g4": _near_equal,
    "cf_small_residual_g4": _small_residual,
    "cf_one_hot_target_g3": lambda name, rng: context_free(name, "one-hot target, dense draft", one_hot(10, 3),
                                                           dense(rng, 10), 3),
    "cf_one_hot_draft_g3": _one_hot_draft,
    **{f"markov_g{g}": _markov_entry(f"order-1 Markov, V=6, 30% zeros in p, g={g}", 6, g) for g in (1, 5, 8)},
    "large_v8193_g2": lambda name, rng: context_free(name, "V=8193, p on one token in every 1,024 and "
                                                     "30% on the vocabulary's edge", *large_pair(rng, 8193), 2,
                                                     rows_per_call=512),
    "large_v151936_g1": lambda name, rng: context_free(name, "V=151936 (Qwen vocab), p on one token in every "
                                                       "4,096 and 30% on the edge", *large_pair(rng, 151936), 1,
                                                       rows_per_call=64),
    "mixed_batch_g3": _mixed_batch,
    "ragged_g6": _markov_entry("Markov V=6, num_draft ~ U{0..6}, -1 placeholders", 6, 6, ragged=True),
    "point_mass_g4": _markov_entry("Markov V=6, draft_probs=None", 6, 4, point_mass=True),
    "identical_rows_g2": lambda name, rng: context_free(name, "every row has the same inputs", dense(rng, 8),
                                                        dense(rng, 8), 2, identical_rows=True),
    "joint_markov_g2": _markov_entry("Markov V=5: first 3 tokens over repeated cycles", 5, 2, 0.2, joint=True),
    PROBE: _probe,
}  # fmt: skip


def scenario_rng(name: str) -> np.random.Generator:
    """The random stream a catalogue scenario's rows are drawn from: PCG64 seeded by crc32 of its name."""
    return seeded_rng("scenario", name)


def build(catalogue: dict | None = None) -> dict[str, Scenario]:
    """The scenarios of a catalogue (default CATALOGUE), each built from its own name's stream."""
    return {name: make(name, scenario_rng(name)) for name, make in (catalogue or CATALOGUE).items()}


SCENARIOS: dict[str, Scenario] = build()


def get(name: str) -> Scenario:
    if name not in SCENARIOS:
        raise BadArgument(f"scenarios: {name!r} is unknown; known: {sorted(SCENARIOS)}")
    return SCENARIOS[name]
