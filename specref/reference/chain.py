"""The minimal reference engine: exact speculative sampling for one sequence, written as the math.

Notation (Leviathan et al. 2023; Chen et al. 2023). A cycle drafts g tokens d_1..d_g, with d_i ~ q_i, where
q_i = draft(prefix + d_<i); the target scores every draft position at once, p_i = target(prefix + d_<i), for
i = 1..g+1. Verification then

  * accepts d_i with probability min(1, p_i(d_i) / q_i(d_i)), for i = 1, 2, ... in order;
  * on the first rejection, emits a correction drawn from p'_i = max(0, p_i - q_i) / Z_i and stops;
  * after g acceptances, emits a bonus token drawn from p_{g+1}.

Rows are plain sequences of Fractions or floats; all randomness flows through `specref.randomness`, so that
`specref.exact` can enumerate this very code. In code, rows are 0-indexed: target_probs[i] is p_{i+1}.

Empty residual. With exact arithmetic Z_i = 0 means p_i == q_i, and then d_i is always accepted, so a
correction is never needed. Float rounding can still reject with a residual that is numerically all zero;
in that case the correction is drawn from p_i itself, the limit of p'_i as q_i -> p_i. It never yields NaN,
an out-of-range id or a token with p_i = 0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..randomness import Randomness
from ..validation import check_context, check_distribution, check_gamma, check_token

Row = Sequence  # a length-V probability row of Fractions or floats
Model = Callable[[tuple[int, ...]], Row]  # context (token ids) -> next-token distribution


def verify(
    target_probs: Sequence[Row],  # [g+1][V]  p_1 .. p_{g+1}
    draft_probs: Sequence[Row] | None,  # [g][V]  q_1 .. q_g; None for point-mass drafts
    draft_tokens: Sequence[int],  # [g]  d_1 .. d_g
    rng: Randomness,
    *,
    validate: bool = True,
) -> list[int]:
    """Verify g drafts; return the 1..g+1 emitted tokens."""
    gamma = len(draft_tokens)
    if draft_probs is None:
        draft_probs = [_point_mass(len(target_probs[0]), d) for d in draft_tokens]
    if validate:
        _check_step(target_probs, draft_probs, draft_tokens)

    emitted = []
    for i, token in enumerate(draft_tokens):
        p, q = target_probs[i], draft_probs[i]
        if rng.accept(p[token] / q[token]):  # accept with min(1, p(x)/q(x))
            emitted.append(token)
            continue
        residual = [max(0, p_x - q_x) for p_x, q_x in zip(p, q)]  # Z * p'; categorical normalises
        if not any(residual):  # numerically empty: see module docstring
            residual = list(p)
        emitted.append(rng.categorical(residual))
        return emitted
    emitted.append(rng.categorical(target_probs[gamma]))  # bonus token from p_{g+1}
    return emitted


def draw_drafts(draft: Model, context: Sequence[int], gamma: int, rng: Randomness) -> tuple[list[int], list[Row]]:
    """Draw d_1..d_g autoregressively from the draft model; return the drafts and the rows q_1..q_g."""
    tokens, rows = [], []
    for _ in range(gamma):
        q = _row(draft, "draft", tuple(context) + tuple(tokens))
        rows.append(q)
        tokens.append(rng.categorical(q))
    return tokens, rows


def cycle(target: Model, draft: Model, prefix: Sequence[int], gamma: int, rng: Randomness) -> list[int]:
    """One speculative cycle: draft g tokens, score g+1 target rows, verify. Returns the emitted tokens."""
    check_gamma(gamma)
    prefix = tuple(prefix)
    tokens, draft_rows = draw_drafts(draft, prefix, gamma, rng)
    target_rows = [_row(target, "target", prefix + tuple(tokens[:i])) for i in range(gamma + 1)]
    if len(target_rows[0]) != len(draft_rows[0]):
        raise ValueError(f"target has vocab size {len(target_rows[0])} but draft has {len(draft_rows[0])}")
    # Rows were checked as they were produced, and drafts drawn from q have q(d) > 0.
    return verify(target_rows, draft_rows, tokens, rng, validate=False)


def generate(target: Model, draft: Model, prefix: Sequence[int], n: int, gamma: int, rng: Randomness) -> list[int]:
    """The first n tokens after prefix, over repeated cycles."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n={n!r}: the number of tokens to generate must be an integer >= 1")
    vocab_size = len(target(tuple(prefix)))
    context = list(check_context("prefix", prefix, vocab_size))
    out: list[int] = []
    while len(out) < n:
        emitted = cycle(target, draft, context, gamma, rng)
        out.extend(emitted)
        context.extend(emitted)
    return out[:n]


def _row(model: Model, name: str, context: tuple[int, ...]) -> Row:
    """model(context), checked unless the model vouches for its rows (`model.validated`)."""
    row = model(context)
    if not getattr(model, "validated", False):
        check_distribution(f"{name}({context!r})", row)
    return row


def _point_mass(vocab_size: int, token: int) -> list[int]:
    check_token("draft_tokens entry", token, vocab_size)
    return [1 if x == token else 0 for x in range(vocab_size)]


def _check_step(target_probs, draft_probs, draft_tokens) -> None:
    gamma = check_gamma(len(draft_tokens))
    if len(target_probs) != gamma + 1:
        raise ValueError(f"target_probs has {len(target_probs)} rows; expected g+1 = {gamma + 1} for g = {gamma}")
    if len(draft_probs) != gamma:
        raise ValueError(f"draft_probs has {len(draft_probs)} rows; expected g = {gamma}")
    vocab_size = len(target_probs[0])
    for i, row in enumerate(target_probs):
        check_distribution(f"target_probs[{i}]", row, vocab_size)
    for i, (row, token) in enumerate(zip(draft_probs, draft_tokens)):
        check_distribution(f"draft_probs[{i}]", row, vocab_size)
        check_token(f"draft_tokens[{i}]", token, vocab_size)
        if row[token] == 0:
            raise ValueError(
                f"draft_tokens[{i}]={token} has draft probability 0 in draft_probs[{i}]; such a draft is impossible"
            )
