"""Two worked cases on a tiny word vocabulary, with exact rational laws.

Target (p) and draft (q) are order-2 Markov tables over words. Rows not listed are uniform.
"""

from __future__ import annotations

from fractions import Fraction as F

from .models import MarkovTable

WORDS = (
    "Under the pale moon a cat dog crossed slept garden Beside silent lake birds began to sing softly loudly fell"
).split()
ID = {w: i for i, w in enumerate(WORDS)}


def encode(text: str) -> tuple[int, ...]:
    return tuple(ID[w] for w in text.split())


def decode(tokens) -> str:
    return " ".join(WORDS[t] for t in tokens)


def _row(**probs) -> tuple:
    row = [F(0)] * len(WORDS)
    for word, prob in probs.items():
        row[ID[word]] = F(prob)
    return tuple(row)


def _table(rows: dict) -> MarkovTable:
    uniform = tuple(F(1, len(WORDS)) for _ in WORDS)
    return MarkovTable(2, {encode(k): v for k, v in rows.items()}, default=uniform)


# Case "reject": accept "a" w.p. 3/4, "cat" w.p. 3/4, reject "crossed" w.p. 2/3, and the residual
# max(0, p - q) / Z at that position is a point mass on "slept".
TARGET = _table(
    {
        "pale moon": _row(a="3/4", the="1/4"),
        "moon a": _row(cat="1/2", dog="1/2"),
        "a cat": _row(slept="2/3", crossed="1/3"),
        "cat crossed": _row(the="1"),
        "crossed the": _row(garden="1"),
        # Case "all accepted": every draft is accepted w.p. 1 except "began" (w.p. 3/4); the bonus row
        # after "to sing" gives "softly" w.p. 3/5.
        "silent lake": _row(birds="1/2", fell="1/2"),
        "lake birds": _row(began="3/4", sing="1/4"),
        "birds began": _row(to="1"),
        "began to": _row(sing="1"),
        "to sing": _row(softly="3/5", loudly="2/5"),
    }
)
DRAFT = _table(
    {
        "pale moon": _row(a="1"),
        "moon a": _row(cat="2/3", dog="1/3"),
        "a cat": _row(crossed="1"),
        "cat crossed": _row(the="1"),
        "crossed the": _row(garden="1"),
        "silent lake": _row(birds="1/2", fell="1/2"),
        "lake birds": _row(began="1"),
        "birds began": _row(to="1"),
        "began to": _row(sing="1"),
        "to sing": _row(softly="1"),
    }
)

REJECT_CASE = dict(
    prefix="Under the pale moon",
    drafts="a cat crossed the garden",
    emitted="a cat slept",
    probability=F(3, 4) * F(3, 4) * F(2, 3),  # accept a, accept cat, reject crossed; residual = {slept: 1}
)
ACCEPT_CASE = dict(
    prefix="Beside the silent lake",
    drafts="birds began to sing",
    emitted="birds began to sing softly",
    probability=F(3, 4) * F(3, 5),  # accept all (began w.p. 3/4), bonus softly w.p. 3/5
)


def rows_for(prefix: str, drafts: str):
    """The verify inputs for a worked case: target rows p_1..p_{g+1}, draft rows q_1..q_g, draft ids."""
    context, tokens = encode(prefix), encode(drafts)
    target_rows = [TARGET(context + tokens[:i]) for i in range(len(tokens) + 1)]
    draft_rows = [DRAFT(context + tokens[:i]) for i in range(len(tokens))]
    return target_rows, draft_rows, list(tokens)
