"""The sampling contract's scenarios: raw logits, draft laws, per-row parameters and histories, and, once bound to the
law an adapter declares, the chain scenario of the processed target laws that the chain's checks read.

A scenario is a set of components, each one request: SamplingParams, a History before the step, raw logits (the same
at every position) and a draft law q. Rows draw their component uniformly, so one call mixes greedy rows beside
sampled ones, seeded beside unseeded. A component without penalties has one state; one with penalties has a state
per drafted path d_1..d_j (j <= g, over q's support): the history at that state holds the path, so its processed
law differs by path (penalty_draft_law tests exactly those states). Bound to a law L (`bound`), the state machine
becomes a chain Scenario (chain/scenarios.py) whose target row at a state is L(logits, params, history + path): the
chain's law checks then hold the processed law at every position and at the bonus row.

The logits a scenario hands over are exact in the adapter's dtype (rounded first, the laws computed from the rounded
numbers), and its draft rows are as that dtype gives them (engine/precision.py).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, replace

import numpy as np
import torch

from ...errors import BadArgument
from ...reference.processors import History, SamplingParams
from ..chain.scenarios import Batch as ChainBatch
from ..chain.scenarios import Scenario as ChainScenario
from ..engine.precision import as_given

PENALTIES = ("repetition_penalty", "presence_penalty", "frequency_penalty")


@dataclass(frozen=True)
class Component:
    """One request of a scenario."""

    params: SamplingParams
    history: History
    logits: np.ndarray  # [V] raw logits at every position
    draft: np.ndarray  # [V] q at every position

    @property
    def penalised(self) -> bool:
        return bool(self.params.set_names() & set(PENALTIES))


@dataclass
class SamplingBatch:
    """One call's inputs: what the subject gets (raw logits as `target_probs`, which the call form casts and hands
    over first; drafts; per-row parameters and histories) and `chain`, the processed rows the tally checks."""

    target_probs: np.ndarray  # [B, g+1, V] raw logits
    draft_probs: np.ndarray | None  # [B, g, V]
    draft_tokens: np.ndarray  # [B, g]
    params: list  # [B] SamplingParams
    histories: list  # [B] History before this step
    chain: ChainBatch  # its target_probs: the processed law [B, g+1, V]

    def __len__(self) -> int:
        return len(self.draft_tokens)

    @property
    def num_draft(self) -> np.ndarray:
        return self.chain.num_draft


@dataclass
class Scenario:
    name: str
    description: str
    components: tuple[Component, ...]
    gamma: int
    point_mass: bool = False
    rows_per_call: int = 2048
    # the state machine (built once from the components): state -> component, the drafted path to it, its children
    component_of: np.ndarray = field(init=False, repr=False)
    paths: list = field(init=False, repr=False)
    next_state: np.ndarray = field(init=False, repr=False)
    starts: np.ndarray = field(init=False, repr=False)
    # once bound (`bound`): the processed chain scenario, the raw logits and the law's key
    chain: ChainScenario | None = field(default=None, repr=False)
    logits: np.ndarray | None = field(default=None, repr=False)  # [S, V] as the adapter's dtype gives them
    law_key: object = None
    joint, probe, identical_rows = False, False, False
    _bound: dict = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self):
        v = self.vocab_size
        component_of, paths, children, starts = [], [], [], []
        for c, comp in enumerate(self.components):
            if comp.logits.shape != (v,) or comp.draft.shape != (v,):
                raise BadArgument(f"scenario {self.name!r}: component {c} has logits {comp.logits.shape} and draft "
                                  f"{comp.draft.shape}; expected [{v}]")  # fmt: skip
            starts.append(len(paths))
            frontier = [()]
            support = np.flatnonzero(comp.draft > 0) if comp.penalised else []
            index = {}
            while frontier:
                path = frontier.pop(0)
                index[path] = len(paths)
                component_of.append(c)
                paths.append(path)
                if len(path) < self.gamma:
                    frontier += [path + (int(x),) for x in support]
            for path in index:
                children.append({x: index[path + (x,)] for x in map(int, support) if path + (x,) in index})
        self.component_of, self.paths, self.starts = np.array(component_of), paths, np.array(starts)
        self.next_state = np.tile(np.arange(len(paths))[:, None], (1, v))  # a leaf or unpenalised state stays
        for s, kids in enumerate(children):
            for x, child in kids.items():
                self.next_state[s, x] = child

    @property
    def vocab_size(self) -> int:
        return self.components[0].logits.shape[0]

    @property
    def row_elements(self) -> int:
        return (self.gamma + 1) * self.vocab_size

    @property
    def depth(self) -> np.ndarray:
        """[S] drafts on the path to each state."""
        return np.array([len(p) for p in self.paths])

    @property
    def target(self) -> np.ndarray:  # the processed laws (a shard's plan fingerprint digests them)
        return self.chain.target

    @property
    def draft(self) -> np.ndarray:
        return self.chain.draft

    @property
    def greedy(self) -> np.ndarray:
        """[S] states whose request is greedy (temperature 0)."""
        return np.array([self.components[c].params.greedy for c in self.component_of])

    @property
    def names(self) -> frozenset[str]:
        """The parameters its components set."""
        return frozenset().union(*(c.params.set_names() for c in self.components))

    def supported(self, supports: frozenset[str]) -> Scenario | None:
        """This scenario with only the components whose parameters an adapter supports (None: none left)."""
        kept = tuple(c for c in self.components if c.params.set_names() <= supports)
        if len(kept) == len(self.components):
            return self
        return replace(self, components=kept, _bound={}) if kept else None

    def raw_law(self) -> np.ndarray:
        """[S, V] softmax of the raw logits (what raw logprobs are the log of)."""
        x = self.logits
        finite = np.isfinite(x)
        e = np.where(finite, np.exp(np.where(finite, x, 0) - np.where(finite, x, -np.inf).max(1, keepdims=True)), 0)
        return e / e.sum(1, keepdims=True)

    def given(self, dtype: torch.dtype) -> Scenario:
        """Itself: a sampling scenario is given to an adapter by binding it to the adapter's law (`bound`), which the
        contract does with the adapter in hand (contract.SamplingContract.bind)."""
        return self

    def bound(self, law, key, dtype: torch.dtype) -> Scenario:
        """This scenario bound to `law(logits, params, history) -> [V]` (cached per key and dtype): the logits
        rounded to dtype, the draft rows as dtype gives them, the processed target row of every state."""
        if self.chain is not None:
            return self
        if (key, dtype) not in self._bound:
            raw = np.stack([self.components[c].logits for c in self.component_of])
            logits = torch.from_numpy(raw).to(dtype).to(torch.float64).numpy()
            draft = as_given(np.stack([self.components[c].draft for c in self.component_of]), dtype)
            target = np.stack([law(logits[s], self.components[c].params, self.components[c].history.extended(path))
                               for s, (c, path) in enumerate(zip(self.component_of, self.paths))])  # fmt: skip
            chain = ChainScenario(self.name, self.description, target, draft, self.next_state, self.gamma,
                                  starts=self.starts, context_free=len(self.paths) == 1, point_mass=self.point_mass,
                                  rows_per_call=self.rows_per_call, dtype=dtype)  # fmt: skip
            self._bound[(key, dtype)] = replace(self, chain=chain, logits=logits, law_key=key, _bound={})
        return self._bound[(key, dtype)]

    def inputs(self, rows: int, seed: int, chunk, start_states=None) -> SamplingBatch:
        if self.chain is None:
            raise ValueError(f"scenario {self.name!r} is not bound to a law: call bound(law, key, dtype) first")
        batch = self.chain.inputs(rows, seed, chunk)
        if len(self.paths) == 1:  # one state: one row of logits, broadcast (the call form ships it once)
            logits = np.broadcast_to(self.logits[0], batch.target_probs.shape)
        else:
            logits = self.logits[batch.states]
        component = self.component_of[batch.states[:, 0]]
        params = [self.components[c].params for c in component]
        histories = [self.components[c].history for c in component]
        return SamplingBatch(logits, batch.draft_probs, batch.draft_tokens, params, histories, batch)


# --- the catalogue ---------------------------------------------------------------------------------------------------


def _rng(name: str) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64(zlib.crc32(f"sampling:{name}".encode())))


def _logits(rng, v, scale=1.5) -> np.ndarray:
    """Normal logits on a 2^-16 grid, all distinct: exact in float32 (|x| < 128), and no two tokens tie at a top-k,
    top-p or min-p cut (a tie there has no single law: engines break it by an unstable sort)."""
    x = rng.normal(0, scale, v)
    order = np.argsort(x)
    grid = np.round(x[order] * 2**16) - np.arange(v)
    x[order] = (np.maximum.accumulate(grid) + np.arange(v)) / 2**16
    return x


def _dense(rng, v) -> np.ndarray:
    w = rng.gamma(1.0, size=v) + 1e-2
    return w / w.sum()


def _on(v, tokens, rng) -> np.ndarray:
    q = np.zeros(v)
    q[list(tokens)] = rng.gamma(2.0, size=len(tokens)) + 0.1
    return q / q.sum()


def _component(rng, v, history=None, draft=None, logits=None, **params) -> Component:
    return Component(SamplingParams(**params), history or History(), _logits(rng, v) if logits is None else logits,
                     _dense(rng, v) if draft is None else draft)  # fmt: skip


def _mixed_params(name, rng):
    v = 12
    parts = (
        _component(rng, v, temperature=0.0),
        _component(rng, v, temperature=0.8, top_k=6),
        _component(rng, v, temperature=1.0, top_p=0.9, seed=7),
        _component(rng, v, min_p=0.1, logit_bias=((3, 1.5),), seed=11),
        _component(rng, v, temperature=1.3),
        _component(
            rng, v, temperature=0.0, repetition_penalty=1.3, history=History((1, 2), (5,)), draft=_on(v, (1, 5, 7), rng)
        ),
    )
    return Scenario(name, "one batch of six requests: greedy and sampled, seeded and unseeded, mixed parameters",
                    parts, 3)  # fmt: skip


def _masked(name, rng):
    v = 16
    logits = _logits(rng, v)
    logits[rng.permutation(v)[:6]] = -np.inf
    parts = (_component(rng, v, logits=logits, temperature=0.9),
             _component(rng, v, logits=logits.copy(), allowed_token_ids=tuple(range(0, v, 2))))  # fmt: skip
    return Scenario(name, "-inf-masked logits (6 of 16) and an allowed-ids list: drafts land on excluded tokens",
                    parts, 3)  # fmt: skip


def _top_k_one(name, rng):
    v = 10
    parts = (_component(rng, v, top_k=1), _component(rng, v, top_k=3, temperature=0.7))
    return Scenario(name, "top-k 1 (a sampled request that is one-hot) beside top-k 3", parts, 3)


def _top_p_one(name, rng):
    v = 10
    logits = _logits(rng, v)
    logits[int(np.argmax(logits))] += 3.0
    parts = (_component(rng, v, logits=logits, top_p=0.5), _component(rng, v, top_p=0.85))
    return Scenario(name, "a top-p that keeps one token beside a top-p 0.85", parts, 3)


def _min_p_bias(name, rng):
    v = 12
    logits = _logits(rng, v)
    parts = (_component(rng, v, logits=logits, min_p=0.15, logit_bias=((int(np.argmin(logits)), 4.0), (2, -2.0))),)
    return Scenario(name, "min_p and a logit bias on every row (what vLLM #42744 skipped on verified rows)", parts, 2)


def _top_k_top_p(name, rng):
    v = 12
    logits = np.sort(_logits(rng, v, 1.0))[::-1].copy()
    parts = (_component(rng, v, logits=logits, top_k=4, top_p=0.7, temperature=0.9),)
    return Scenario(name, "top-k 4 with top-p 0.7: renormalising over the top-k before top-p keeps other tokens",
                    parts, 3)  # fmt: skip


def _bias_argmax(name, rng):
    v = 12
    logits = _logits(rng, v)
    low = int(np.argsort(logits)[3])
    bias = ((low, float(logits.max() - logits[low]) + 0.75),)
    parts = (_component(rng, v, logits=logits, temperature=0.0, logit_bias=bias),
             _component(rng, v, logits=logits.copy(), temperature=0.7, logit_bias=bias))  # fmt: skip
    return Scenario(name, "a logit bias that moves the argmax, greedy and sampled", parts, 3)


def _penalties(name, rng):
    v = 6
    drafted = (0, 1, 2)
    logits = np.array([1.0, 0.875, 0.75, 0.5, 0.25, 0.0])
    history = History(prompt=(3, 4), output=(4,))
    parts = (
        _component(rng, v, logits=logits, history=history, draft=_on(v, drafted, rng), repetition_penalty=1.6,
                   frequency_penalty=0.5, presence_penalty=0.4),
        _component(rng, v, logits=logits.copy(), history=history, draft=_on(v, drafted, rng), temperature=0.0,
                   frequency_penalty=0.3),
        _component(rng, v, logits=logits.copy(), history=history, draft=_on(v, drafted, rng), repetition_penalty=2.0),
    )  # fmt: skip
    return Scenario(name, "penalties whose history holds the drafts: the law at position i counts d_1..d_{i-1}",
                    parts, 2)  # fmt: skip


def _point_mass(name, rng):
    v = 8
    parts = (_component(rng, v, temperature=0.8, top_k=5), _component(rng, v, temperature=0.0, logit_bias=((1, 1.0),)))
    return Scenario(name, "point-mass drafts (draft_probs=None) with top-k and a greedy row", parts, 3,
                    point_mass=True)  # fmt: skip


def _large(name, rng):
    v = 32768
    logits = _logits(rng, v)
    sharp = np.exp((logits - logits.max()) / 0.7)
    draft = 0.5 * sharp / sharp.sum() + 0.5 / v  # near the processed law on its support, so drafts are accepted
    parts = (_component(rng, v, logits=logits, draft=draft, temperature=0.7, top_k=40, top_p=0.9),)
    return Scenario(name, "V = 32768, top-k 40 and top-p 0.9 at T = 0.7", parts, 2, rows_per_call=256)


CATALOGUE = {
    "mixed_params_g3": _mixed_params,
    "masked_logits_g3": _masked,
    "top_k_one_g3": _top_k_one,
    "top_p_one_g3": _top_p_one,
    "min_p_bias_g2": _min_p_bias,
    "top_k_top_p_g3": _top_k_top_p,
    "bias_argmax_g3": _bias_argmax,
    "penalties_drafts_g2": _penalties,
    "point_mass_g3": _point_mass,
    "large_v32768_g2": _large,
}
SCENARIOS: dict[str, Scenario] = {name: make(name, _rng(name)) for name, make in CATALOGUE.items()}


def get(name: str) -> Scenario:
    if name not in SCENARIOS:
        raise BadArgument(f"scenarios: {name!r} is unknown; known: {sorted(SCENARIOS)}")
    return SCENARIOS[name]


__all__ = ["CATALOGUE", "PENALTIES", "SCENARIOS", "Component", "SamplingBatch", "Scenario", "get"]
