"""Exact laws, by enumerating the reference engine's own random choices.

`enumerate_law(program)` runs `program(rng)` once per path through its random choices. The replaying `rng`
answers each `accept` / `categorical` call along a fixed path, records the exact probability of that path,
and reports the branches not yet taken. With Fraction rows every probability stays a Fraction, so the laws
below are proofs, not estimates. Branches of probability zero are never taken.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from fractions import Fraction

from . import reference
from .reference import Model, Row
from .validation import check_distribution, check_gamma

Law = dict  # outcome -> probability


class _Replay:
    """A Randomness that follows `path` and then takes the first possible option at each new choice. With `defer`,
    a categorical draw that is new on this path returns DEFERRED instead of a token: enumerate_law expands it."""

    def __init__(self, path: Sequence[int], defer: bool = False):
        self.path = list(path)
        self.taken: list[int] = []
        self.alternatives: list[list[int]] = []  # options not taken, for each new choice
        self.probability = Fraction(1)
        self.defer, self.deferred = defer, None  # the deferred draw's (weights, total)

    def _choose(self, weights: Sequence, total=1) -> int:
        """Option j with probability weights[j] / total."""
        if self.deferred is not None:
            raise _Unfinished  # a choice after the deferred draw: that draw was not the program's last
        depth = len(self.taken)
        if depth < len(self.path):
            choice = self.path[depth]
        else:
            options = [j for j, w in enumerate(weights) if w > 0]
            choice = options[0]
            self.alternatives.append(options[1:])
        self.taken.append(choice)
        self.probability *= weights[choice] if total == 1 else weights[choice] / total
        return choice

    def accept(self, ratio) -> bool:
        a = min(1, ratio)
        return self._choose([a, 1 - a]) == 0

    def categorical(self, weights: Sequence):
        total = sum(weights)
        if self.defer and len(self.taken) >= len(self.path) and self.deferred is None:
            self.deferred = (weights, total)
            return DEFERRED
        return self._choose(weights, total)


class _Unfinished(BaseException):
    """A deferred draw was read, or followed by another choice (a BaseException: no `except Exception` hides it)."""


class _Deferred:
    """The token of a program's last draw, not drawn: any use of it but returning it raises _Unfinished."""

    __slots__ = ()

    def _read(self, *args):
        raise _Unfinished

    __eq__ = __ne__ = __lt__ = __le__ = __gt__ = __ge__ = __hash__ = __bool__ = __index__ = __int__ = _read
    __float__ = __repr__ = __str__ = __format__ = __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = _read
    __rmul__ = __getitem__ = __len__ = __iter__ = __contains__ = _read


DEFERRED = _Deferred()


class _Checked:
    """Memoises a model's rows and checks each once: enumeration asks for the same contexts many times."""

    validated = True

    def __init__(self, model: Model, name: str):
        self.model, self.name, self.rows = model, name, {}

    def __call__(self, context: tuple[int, ...]) -> Row:
        if context not in self.rows:
            row = self.model(context)
            if not getattr(self.model, "validated", False):
                check_distribution(f"{self.name}({context!r})", row)
            self.rows[context] = row
        return self.rows[context]


def enumerate_law(program: Callable[[object], Hashable], *, final_draw: bool = False) -> Law:
    """The exact law of program(rng) over every path through its random choices.

    final_draw=True: a program that returns a tuple ending in the token of its last draw (a categorical the program
    does not read) has that draw expanded at once, one outcome per possible token, instead of one replay of the whole
    program per token. A run that reads the token, draws again after it, or returns it elsewhere is run again
    without the shortcut, and so is the rest of the enumeration: the law is the same either way.
    """
    law: dict = defaultdict(Fraction)
    stack: list[tuple[int, ...]] = [()]
    while stack:
        path = stack.pop()
        rng = _Replay(path, defer=final_draw)
        try:
            outcome = program(rng)
            if rng.deferred is not None and not _ends_in_deferred(outcome):
                raise _Unfinished
        except _Unfinished:
            final_draw = False
            rng = _Replay(path)
            outcome = program(rng)
        if rng.deferred is None:
            law[outcome] += rng.probability
        else:
            weights, total = rng.deferred
            for token, weight in enumerate(weights):
                if weight > 0:
                    law[outcome[:-1] + (token,)] += rng.probability * (weight if total == 1 else weight / total)
        for offset, options in enumerate(rng.alternatives):
            prefix = tuple(rng.taken[: len(path) + offset])
            stack.extend(prefix + (alt,) for alt in options)
    return dict(law)


def _ends_in_deferred(outcome) -> bool:
    """outcome is a tuple whose last entry, and no other, is DEFERRED (compared by identity: nothing is read)."""
    return isinstance(outcome, tuple) and sum(x is DEFERRED for x in outcome) == 1 and outcome[-1] is DEFERRED


def verify_law(target_probs: Sequence[Row], draft_probs: Sequence[Row] | None, draft_tokens: Sequence[int]) -> Law:
    """Law of the emitted tokens of one verify step with the drafts held fixed."""
    return enumerate_law(lambda rng: tuple(reference.verify(target_probs, draft_probs, draft_tokens, rng)),
                         final_draw=True)  # fmt: skip


def cycle_law(target: Model, draft: Model, prefix: Sequence[int], gamma: int) -> Law:
    """Law of the tokens one reference cycle emits (drafting included)."""
    check_gamma(gamma)
    target, draft = _Checked(target, "target"), _Checked(draft, "draft")
    return enumerate_law(lambda rng: tuple(reference.cycle(target, draft, prefix, gamma, rng)), final_draw=True)


def sequence_law(
    target: Model, draft: Model, prefix: Sequence[int], n: int, gamma: int, *, method: str = "cycles"
) -> Law:
    """Law of the first n tokens over repeated reference cycles.

    method="cycles" (default) enumerates each cycle with `cycle_law` and chains the cycles: a cycle uses fresh
    randomness and depends only on its context, so the law of `generate` is the composition of cycle laws.
    method="replay" enumerates every random choice of `reference.generate` end to end; it is exponentially
    slower and exists to cross-check the composition on small cases.
    """
    check_gamma(gamma)
    target, draft = _Checked(target, "target"), _Checked(draft, "draft")
    if method == "replay":
        return enumerate_law(lambda rng: tuple(reference.generate(target, draft, prefix, n, gamma, rng)))
    if method != "cycles":
        raise ValueError(f"method={method!r}; expected 'cycles' or 'replay'")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n={n!r}: the number of tokens to generate must be an integer >= 1")
    cycles: dict[tuple[int, ...], Law] = {}

    def law_after(context: tuple[int, ...], remaining: int) -> Law:
        if context not in cycles:
            cycles[context] = cycle_law(target, draft, context, gamma)
        out: dict = defaultdict(Fraction)
        for emitted, prob in cycles[context].items():
            if len(emitted) >= remaining:
                out[emitted[:remaining]] += prob
            else:
                for rest, rest_prob in law_after(context + emitted, remaining - len(emitted)).items():
                    out[emitted + rest] += prob * rest_prob
        return out

    return dict(law_after(tuple(prefix), n))


def accepted_length_law(target: Model, draft: Model, prefix: Sequence[int], gamma: int) -> dict[int, Fraction]:
    """P(A = k), k = 0..g, for the number A of drafts accepted in one cycle (a cycle emits A + 1 tokens)."""
    law = {k: Fraction(0) for k in range(gamma + 1)}
    for tokens, prob in cycle_law(target, draft, prefix, gamma).items():
        law[len(tokens) - 1] += prob
    return law


def reject_probabilities(target: Model, draft: Model, prefix: Sequence[int], gamma: int) -> list:
    """P(reject at position i | position i reached), i = 1..g (0-indexed in the list); None if unreachable."""
    length = accepted_length_law(target, draft, prefix, gamma)
    out = []
    for i in range(gamma):
        reached = sum(length[k] for k in range(i, gamma + 1))
        out.append(length[i] / reached if reached else None)
    return out


def expected_tau(target: Model, draft: Model, prefix: Sequence[int], gamma: int):
    """E[tau], the expected number of tokens one cycle emits."""
    return sum((k + 1) * prob for k, prob in accepted_length_law(target, draft, prefix, gamma).items())
