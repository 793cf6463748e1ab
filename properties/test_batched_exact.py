"""T0 checks of the batched engine: token-for-token coupling with the reference, zero edges, bad inputs, dtypes.

Everything here is deterministic: the uniforms are injected or drawn from seeded torch.Generators, so a failure
is a certain bug, never a false alarm (no share of the error budget).
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specref import batched, randomness
from specref import strategies as sst
from specref.conformance.chain.adapters import reference_adapter

pytestmark = pytest.mark.exact

ODD_VOCABS = (1, 2, 3, 5, 7, 31, 257)


def reference_tokens(target_probs, draft_probs, draft_tokens, uniforms, num_draft) -> list[list[int]]:
    """The reference engine, row by row, on the same float64 rows and uniforms (u_g feeds the final draw)."""
    tokens = reference_adapter().verify(target_probs, draft_probs, draft_tokens, None, uniforms=uniforms,
                                        num_draft=num_draft)  # fmt: skip
    return emitted(tokens)


def emitted(tokens: torch.Tensor) -> list[list[int]]:
    counts = batched.num_emitted(tokens)
    return [row[: int(n)] for row, n in zip(tokens.tolist(), counts, strict=True)]


@st.composite
def batches(draw, max_batch=3, max_gamma=6, vocab=None):
    """Float64 inputs with per-position (p, q) relations from specref.strategies, ragged counts and edge uniforms."""
    vocab_size = vocab if vocab is not None else draw(st.one_of(st.integers(1, 12), st.sampled_from(ODD_VOCABS)))
    batch, gamma = draw(st.integers(1, max_batch)), draw(st.integers(1, max_gamma))
    rng = np.random.Generator(np.random.PCG64(draw(sst.seeds(), label="seed")))
    target = np.zeros((batch, gamma + 1, vocab_size))
    draft = np.zeros((batch, gamma, vocab_size))
    for b in range(batch):
        for i in range(gamma + 1):
            p, q = draw(sst.pairs(vocab_size))
            target[b, i] = p
            if i < gamma:
                draft[b, i] = q
    tokens = np.array([[rng.choice(vocab_size, p=draft[b, i]) for i in range(gamma)] for b in range(batch)])
    num_draft = rng.integers(0, gamma + 1, size=batch) if draw(st.booleans()) else np.full(batch, gamma)
    for b in range(batch):
        tokens[b, num_draft[b] :] = -1  # placeholders past the row's draft count
    uniforms = rng.random((batch, gamma + 1))
    edge = rng.random((batch, gamma + 1))
    uniforms[edge < 0.15] = 0.0
    uniforms[edge > 0.9] = np.nextafter(1.0, 0.0)
    return (
        torch.tensor(target),
        torch.tensor(draft),
        torch.tensor(tokens, dtype=torch.int64),
        torch.tensor(uniforms),
        torch.tensor(num_draft, dtype=torch.int64),
    )


@settings(max_examples=40)
@given(batches(max_batch=6), st.booleans())
def test_coupled_with_reference_token_for_token(inputs, point_mass):
    target_probs, draft_probs, draft_tokens, uniforms, num_draft = inputs
    if point_mass:
        draft_probs = None
    tokens = batched.verify(target_probs, draft_probs, draft_tokens, num_draft=num_draft, uniforms=uniforms)
    assert tokens.shape == (target_probs.shape[0], target_probs.shape[1]) and tokens.dtype == torch.int64
    assert emitted(tokens) == reference_tokens(target_probs, draft_probs, draft_tokens, uniforms, num_draft)
    # T0 structure: a non-empty prefix of ids, then only -1; the token at position i has p_{i+1} > 0.
    counts = batched.num_emitted(tokens)
    positions = torch.arange(tokens.shape[1])
    assert torch.equal(tokens >= 0, positions < counts[:, None]) and bool((counts >= 1).all())
    p_at_tokens = target_probs.gather(2, tokens.clamp(min=0)[..., None]).squeeze(-1)  # [B, g+1]
    assert bool((p_at_tokens[tokens >= 0] > 0).all())


def random_rows(rng: np.random.Generator, shape: tuple[int, ...], zeros: float) -> np.ndarray:
    """Float64 rows with a share of exact zeros and a wide spread of magnitudes."""
    rows = rng.random(shape) ** 3
    rows[rng.random(shape) < zeros] = 0
    rows[..., rng.integers(shape[-1])] += 1e-3  # at least one positive entry per row
    return rows / rows.sum(-1, keepdims=True)


@pytest.mark.parametrize("vocab_size", [1, 2, 5, 31, 257, 8193])
@pytest.mark.parametrize("gamma", [1, 3, 6])
def test_coupled_with_reference_bulk(vocab_size, gamma):
    """Many rows per case (seeded numpy), ragged, pairwise and point-mass, uniforms with exact 0 and 1-eps."""
    rng = np.random.Generator(np.random.PCG64(vocab_size * 10 + gamma))
    batch = 40 if vocab_size < 8193 else 8
    target_probs = random_rows(rng, (batch, gamma + 1, vocab_size), zeros=0.3)
    draft_probs = random_rows(rng, (batch, gamma, vocab_size), zeros=0.3)
    near = rng.random(batch) < 0.25  # some rows with q close to p: long accepted runs, small residuals
    draft_probs[near] = 0.9 * target_probs[near, :gamma] + 0.1 * draft_probs[near]
    draft_tokens = np.array([[rng.choice(vocab_size, p=row) for row in draft_probs[b]] for b in range(batch)])
    num_draft = rng.integers(0, gamma + 1, size=batch)
    draft_tokens[np.arange(gamma)[None, :] >= num_draft[:, None]] = -1
    uniforms = rng.random((batch, gamma + 1))
    uniforms[rng.random(uniforms.shape) < 0.1] = 0.0
    inputs = [torch.tensor(x) for x in (target_probs, draft_probs, draft_tokens, uniforms, num_draft)]
    for q in (inputs[1], None):
        args = (inputs[0], q, inputs[2])
        tokens = batched.verify(*args, num_draft=inputs[4], uniforms=inputs[3])
        assert emitted(tokens) == reference_tokens(*args, inputs[3], inputs[4])
    # placeholder draft rows (past num_draft) are never read: NaN there changes nothing
    poisoned = inputs[1].clone()
    poisoned[torch.arange(gamma)[None, :] >= inputs[4][:, None]] = float("nan")
    tokens = batched.verify(inputs[0], inputs[1], inputs[2], num_draft=inputs[4], uniforms=inputs[3])
    assert batched.verify(inputs[0], poisoned, inputs[2], num_draft=inputs[4], uniforms=inputs[3]).equal(tokens)


@settings(max_examples=15)
@given(batches(max_batch=4, max_gamma=3))
def test_rows_do_not_depend_on_the_rest_of_the_batch(inputs):
    target_probs, draft_probs, draft_tokens, uniforms, num_draft = inputs
    whole = batched.verify(target_probs, draft_probs, draft_tokens, num_draft=num_draft, uniforms=uniforms)
    for b in range(target_probs.shape[0]):
        one = batched.verify(
            target_probs[b : b + 1], draft_probs[b : b + 1], draft_tokens[b : b + 1],
            num_draft=num_draft[b : b + 1], uniforms=uniforms[b : b + 1],
        )  # fmt: skip
        assert one[0].tolist() == whole[b].tolist()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("u", [0.0, float(np.nextafter(np.float32(1), np.float32(0)))])
def test_zero_probability_draft_is_never_accepted_nor_emitted(dtype, u):
    vocab_size, gamma = 6, 3
    target_probs = torch.zeros(2, gamma + 1, vocab_size, dtype=dtype)
    target_probs[..., 1:] = 0.2  # p(0) = 0 at every position
    draft_probs = torch.full((2, gamma, vocab_size), 1 / vocab_size, dtype=dtype)
    draft_tokens = torch.zeros(2, gamma, dtype=torch.int64)  # every draft is the p = 0 token
    uniforms = torch.full((2, gamma + 1), u, dtype=dtype)
    for q in (draft_probs, None):
        tokens = batched.verify(target_probs, q, draft_tokens, uniforms=uniforms)
        assert batched.num_emitted(tokens).tolist() == [1, 1]  # rejected at once
        assert bool((tokens[:, 0] != 0).all()) and bool((tokens[:, 0] < vocab_size).all())


@pytest.mark.parametrize("vocab_size", [8193, 151936])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("u", [0.0, 0.5, float(np.nextafter(np.float32(1), np.float32(0)))])
def test_empty_residual_draws_from_target_row(vocab_size, dtype, u):
    """p == q but the draft is rejected (u >= ratio = 1 is impossible, so force it with p(d) < q(d) by one ulp)."""
    gen = torch.Generator().manual_seed(vocab_size)
    target_probs = torch.softmax(torch.randn(1, 2, vocab_size, generator=gen, dtype=torch.float64), -1).to(dtype)
    target_probs[0, 0, :100] = 0  # zero tokens at the start, where "token 0 by accident" would land
    target_probs[0, 0, -100:] = 0  # and at the end, where an id == V would come from
    draft_probs = target_probs[:, :1].clone()
    draft_token = int(target_probs[0, 0].argmax())
    target_probs[0, 0, draft_token] = torch.nextafter(target_probs[0, 0, draft_token], torch.tensor(0, dtype=dtype))
    # The residual max(0, p - q) is now numerically all zero; u = 1-eps rejects the ratio just below 1.
    uniforms = torch.tensor([[float(np.nextafter(1.0, 0.0)), u]], dtype=torch.float64)  # 1.0 once cast to fp32
    tokens = batched.verify(target_probs, draft_probs, torch.tensor([[draft_token]]), uniforms=uniforms, validate=False)
    final = int(tokens[0, 0])
    assert tokens[0, 1] == -1 and 0 <= final < vocab_size
    assert float(target_probs[0, 0, final]) > 0
    expected = randomness.inverse_cdf(target_probs[0, 0].double().tolist(), float(uniforms[0, 1].to(torch.float32)))
    if dtype == torch.float64:
        assert final == expected


@pytest.mark.parametrize("vocab_size", [8193, 151936])
def test_large_vocab_disjoint_supports_and_equal_rows(vocab_size):
    """Disjoint supports never accept; p == q always accepts; the bonus row is p_{g+1}."""
    gen = torch.Generator().manual_seed(1)
    gamma, batch = 2, 8
    base = torch.softmax(torch.randn(batch, gamma + 1, vocab_size, generator=gen), -1)
    half = vocab_size // 2
    target_probs = base.clone()
    target_probs[..., half:] = 0
    target_probs /= target_probs.sum(-1, keepdim=True)
    draft_probs = base[:, :gamma].clone()
    draft_probs[..., :half] = 0
    draft_probs /= draft_probs.sum(-1, keepdim=True)
    draft_tokens = torch.multinomial(draft_probs.view(-1, vocab_size), 1, generator=gen).view(batch, gamma)
    tokens = batched.verify(target_probs, draft_probs, draft_tokens, gen)
    assert batched.num_emitted(tokens).tolist() == [1] * batch and bool((tokens[:, 0] < half).all())
    same = batched.verify(target_probs, target_probs[:, :gamma], draft_tokens.clamp(max=half - 1), gen)
    assert batched.num_emitted(same).tolist() == [gamma + 1] * batch


def test_point_mass_residual_removes_the_draft():
    target_probs = torch.tensor([[[0.5, 0.5, 0.0], [0.2, 0.3, 0.5]]], dtype=torch.float64)
    draft_tokens = torch.tensor([[1]])
    for u in (0.0, 0.3, 0.99):  # reject the draft (u_0 = 0.6 >= p(1) = 0.5); the correction must avoid token 1
        tokens = batched.verify(
            target_probs, None, draft_tokens, uniforms=torch.tensor([[0.6, u]], dtype=torch.float64)
        )
        assert tokens.tolist() == [[0, -1]]
    tokens = batched.verify(target_probs, None, draft_tokens, uniforms=torch.tensor([[0.4, 0.99]], dtype=torch.float64))
    assert tokens.tolist() == [[1, 2]]  # accepted (0.4 < 0.5), bonus from p_2


def test_ragged_rows_with_placeholders_and_zero_drafts():
    vocab_size, gamma = 5, 4
    gen = torch.Generator().manual_seed(3)
    target_probs = torch.softmax(torch.randn(3, gamma + 1, vocab_size, generator=gen), -1)
    draft_probs = target_probs[:, :gamma].clone()  # p == q: every active draft is accepted
    draft_tokens = torch.tensor([[1, 2, -1, -1], [-1, -1, -1, -1], [0, 1, 2, 3]])
    num_draft = torch.tensor([2, 0, 4])
    tokens = batched.verify(target_probs, draft_probs, draft_tokens, gen, num_draft=num_draft)
    assert batched.num_emitted(tokens).tolist() == [3, 1, 5]
    assert tokens[0, :2].tolist() == [1, 2] and tokens[0, 3:].tolist() == [-1, -1]
    assert tokens[1, 1:].tolist() == [-1] * gamma and tokens[2, :4].tolist() == [0, 1, 2, 3]


def test_generator_is_the_only_randomness():
    gen = torch.Generator().manual_seed(11)
    target_probs = torch.softmax(torch.randn(64, 5, 100, generator=gen), -1)
    draft_probs = torch.softmax(torch.randn(64, 4, 100, generator=gen), -1)
    draft_tokens = torch.multinomial(draft_probs.view(-1, 100), 1, generator=gen).view(64, 4)
    runs = [batched.verify(target_probs, draft_probs, draft_tokens, torch.Generator().manual_seed(5)) for _ in "ab"]
    assert torch.equal(runs[0], runs[1])
    uniforms = batched.draw_uniforms(64, 4, torch.Generator().manual_seed(5), "cpu")
    assert torch.equal(runs[0], batched.verify(target_probs, draft_probs, draft_tokens, uniforms=uniforms))
    other = batched.verify(target_probs, draft_probs, draft_tokens, torch.Generator().manual_seed(6))
    assert not torch.equal(runs[0], other)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_low_precision_inputs_return_valid_ids(dtype):
    gen = torch.Generator().manual_seed(7)
    vocab_size = 8193
    target_probs = torch.softmax(torch.randn(32, 4, vocab_size, generator=gen) * 4, -1)
    target_probs[..., ::2] = 0  # even ids impossible under the target
    target_probs /= target_probs.sum(-1, keepdim=True)
    draft_probs = torch.softmax(torch.randn(32, 3, vocab_size, generator=gen) * 4, -1)
    draft_tokens = torch.multinomial(draft_probs.view(-1, vocab_size), 1, generator=gen).view(32, 3)
    tokens = batched.verify(target_probs.to(dtype), draft_probs.to(dtype), draft_tokens, gen)
    counts = batched.num_emitted(tokens)
    final = tokens.gather(1, (counts - 1)[:, None])[:, 0]
    assert bool((final % 2 == 1).all()) and bool((final < vocab_size).all())  # the final draw is never p = 0
    accepted = [row[: n - 1] for row, n in zip(tokens.tolist(), counts.tolist(), strict=True)]
    assert all(t % 2 == 1 for row in accepted for t in row)  # an accepted draft has p > 0


def test_verify_logits_matches_verify_on_softmax():
    gen = torch.Generator().manual_seed(2)
    target_logits = torch.randn(16, 4, 50, generator=gen, dtype=torch.float64)
    draft_logits = torch.randn(16, 3, 50, generator=gen, dtype=torch.float64)
    draft_logits[..., :5] = float("-inf")
    draft_tokens = torch.multinomial(torch.softmax(draft_logits, -1).view(-1, 50), 1, generator=gen).view(16, 3)
    uniforms = torch.rand(16, 4, generator=gen, dtype=torch.float64)
    for temperature in (1.0, 0.7):
        from_logits = batched.verify_logits(
            target_logits, draft_logits, draft_tokens, temperature=temperature, uniforms=uniforms
        )
        target_probs = torch.softmax(target_logits / temperature, -1)
        draft_probs = torch.softmax(draft_logits / temperature, -1)
        assert torch.equal(from_logits, batched.verify(target_probs, draft_probs, draft_tokens, uniforms=uniforms))


def _good():
    target_probs = torch.full((2, 3, 4), 0.25)
    draft_probs = torch.full((2, 2, 4), 0.25)
    return dict(target_probs=target_probs, draft_probs=draft_probs, draft_tokens=torch.zeros(2, 2, dtype=torch.long))


def _with(**changes):
    args = _good()
    args.update(changes)
    return args


BAD_INPUTS = [
    ("target_probs has shape", _with(target_probs=torch.full((3, 4), 0.25))),
    ("target_probs has dtype", _with(target_probs=torch.ones(2, 3, 4, dtype=torch.int64))),
    ("draft_probs has shape", _with(draft_probs=torch.full((2, 3, 4), 0.25))),
    ("draft_tokens has shape", _with(draft_tokens=torch.zeros(2, 3, dtype=torch.long))),
    ("draft_tokens has dtype", _with(draft_tokens=torch.zeros(2, 2))),
    ("draft_tokens[1, 0]=4 is out of range", _with(draft_tokens=torch.tensor([[0, 0], [4, 0]]))),
    ("draft_tokens[0, 1]=-1 is out of range", _with(draft_tokens=torch.tensor([[0, -1], [0, 0]]))),
    ("target_probs[0, 2, 1]=nan is not finite", "nan"),
    ("target_probs[1, 0, 3]=-0.25 is negative", "negative"),
    ("draft_probs[1, 1] sums to", "unnormalised"),
    ("has draft probability 0", "q_zero"),
    ("num_draft[1]=3 must lie in [0, g=2]", "num_draft"),
    ("uniforms[0, 2]=1.0 must lie in [0, 1)", "uniforms"),
    ("generator=None and uniforms=None", "no_randomness"),
]


@pytest.mark.parametrize("message, bad", BAD_INPUTS)
def test_bad_inputs_raise_value_errors_naming_the_argument(message, bad):
    kwargs = {"generator": torch.Generator().manual_seed(0)}
    if isinstance(bad, dict):
        args = bad
    else:
        args = _good()
        if bad == "nan":
            args["target_probs"][0, 2, 1] = float("nan")
        elif bad == "negative":
            args["target_probs"][1, 0] = torch.tensor([0.5, 0.25, 0.5, -0.25])
        elif bad == "unnormalised":
            args["draft_probs"][1, 1] = 0.3
        elif bad == "q_zero":
            args["draft_probs"][0, 1] = torch.tensor([0.0, 0.5, 0.25, 0.25])
            args["draft_tokens"][0, 1] = 0
        elif bad == "num_draft":
            kwargs["num_draft"] = torch.tensor([1, 3])
        elif bad == "uniforms":
            kwargs = {"uniforms": torch.tensor([[0.5, 0.5, 1.0], [0.0, 0.1, 0.2]])}
        elif bad == "no_randomness":
            kwargs = {}
    with pytest.raises(ValueError, match=_escape(message)):
        batched.verify(args["target_probs"], args["draft_probs"], args["draft_tokens"], **kwargs)


def test_placeholders_past_num_draft_are_not_validated_as_tokens():
    args = _good()
    args["draft_tokens"][0, 1] = -1
    tokens = batched.verify(**args, num_draft=torch.tensor([1, 2]), generator=torch.Generator().manual_seed(0))
    assert tokens.shape == (2, 3)


def test_bad_logits_and_temperature():
    logits = torch.zeros(1, 2, 3)
    with pytest.raises(ValueError, match="temperature=0"):
        batched.verify_logits(logits, logits[:, :1], torch.zeros(1, 1, dtype=torch.long), temperature=0)
    bad = logits.clone()
    bad[0, 1, 2] = float("nan")
    with pytest.raises(ValueError, match=_escape("target_logits[0, 1, 2]=nan")):
        batched.verify_logits(bad, logits[:, :1], torch.zeros(1, 1, dtype=torch.long), torch.Generator())


def _escape(text: str) -> str:
    return re.escape(text)


def test_bench_smoke_on_a_tiny_case(tmp_path):
    """The benchmark's baselines run and report finite ratios (timings themselves are not asserted)."""
    from specref.batched import bench

    timer = bench.Timer(torch.device("cpu"), repeats=3)
    case = bench.bench_case(4, 2, 300, "bf16", torch.device("cpu"), timer, hf_rows=2)
    assert case["transformers_extrapolated_from_rows"] == 2
    assert all(np.isfinite(list(case["ratios"].values())))
    bench.write_reports([case], bench.environment(torch.device("cpu"), 1), tmp_path)
    assert "| 4 | 2 | 300 | bf16 |" in (tmp_path / "bench.md").read_text()
    target, draft, tokens = bench.make_inputs(8, 3, 50, torch.float32, torch.device("cpu"))
    out = bench.naive_verify(target, draft, tokens, torch.Generator().manual_seed(0))
    counts = batched.num_emitted(out)
    assert bool(((counts >= 1) & (counts <= 4)).all()) and bool((out[:, 0] < 50).all())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_bonus_ignores_a_nan_placeholder_draft_row(dtype):
    # one draft of three, accepted; draft row 1 is a placeholder holding NaN. The bonus comes from p_2 (uniform):
    # inverse CDF at u = 0.5 over [0.2] * 5 is token 2.
    target_probs = torch.full((1, 4, 5), 0.2, dtype=dtype)
    draft_probs = torch.full((1, 3, 5), 0.2, dtype=dtype)
    draft_probs[0, 1, 3] = float("nan")
    uniforms = torch.tensor([[0.1, 0.5, 0.5, 0.5]], dtype=dtype)
    tokens = batched.verify(target_probs, draft_probs, torch.tensor([[2, -1, -1]]), num_draft=torch.tensor([1]),
                            uniforms=uniforms)  # fmt: skip
    assert tokens.tolist() == [[2, 2, -1, -1]]
