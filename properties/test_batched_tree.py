"""T1: the batched tree and block engines couple with the reference engines, token for token, on float64.

With the same injected uniforms, `specref.batched.tree.verify_tree` emits `specref.reference.tree.verify_tree`'s
tokens and nodes for every rule, and `specref.batched.block.verify_block` emits `specref.reference.block`'s, on
ragged batches with zero probabilities and u = 0 rows. The reference's law is proven in test_exact_tree.py.
"""

from __future__ import annotations

import pytest
import torch

from specref import batched, tree_contract, tree_inputs
from specref.batched import block as batched_block
from specref.batched import kernels
from specref.batched import tree as batched_tree
from specref.randomness import Injected, inverse_cdf
from specref.reference import block, chain, tree

pytestmark = pytest.mark.exact


@pytest.fixture(params=["kernel", "torch"])
def walk(request, monkeypatch):
    """Both engines of the batched rules: the C walk (`specref.batched.kernels`, CPU) and the torch walk (CUDA, or
    no compiler). The C walk must run where it is asked for; the torch walk runs with the kernels off."""
    if request.param == "torch":
        monkeypatch.setattr(kernels, "ENABLED", False)
    elif not kernels.status().startswith("compiled"):
        pytest.skip(f"the C kernel is {kernels.status()}")
    return request.param


def _rows(gen, shape, zeros=0.25, dtype=torch.float64):
    logits = torch.randn(shape, generator=gen, dtype=torch.float64) * 1.5
    logits[torch.rand(shape, generator=gen) < zeros] = float("-inf")
    logits[..., 0] = 0.0  # one positive entry per row
    return torch.softmax(logits, -1).to(dtype)


def _batch(seed, scheme, batch=96, num_nodes=9, vocab_size=6, max_width=3):
    gen = torch.Generator().manual_seed(seed)
    parents = tree_inputs.random_parents(batch, num_nodes, max_width, gen)
    target_probs = _rows(gen, (batch, num_nodes + 1, vocab_size))
    draft_rows = _rows(gen, (batch, num_nodes + 1, vocab_size), zeros=0 if scheme == "without_replacement" else 0.25)
    draft_probs, draft_tokens = tree_inputs.draft_children(draft_rows, parents, scheme, gen)
    if scheme == "topk":  # children of zero draft probability are fine for target_only, and rsd must not see them
        draft_probs = None
    uniforms = torch.rand(batch, num_nodes + 1, generator=gen, dtype=torch.float64)
    uniforms[::7] = 0.0
    return target_probs, draft_probs, draft_tokens, parents, uniforms


def _reference_rows(rule, target_probs, draft_probs, draft_tokens, parents, uniforms):
    for b in range(parents.shape[0]):
        q = None if draft_probs is None else draft_probs[b].tolist()
        rng = tree.uniforms_rng(rule, uniforms[b].tolist())
        yield tree.verify_tree(
            target_probs[b].tolist(), q, draft_tokens[b].tolist(), parents[b].tolist(), rng, rule=rule,
            return_nodes=True,
        )  # fmt: skip


def _unpad(row):
    return [t for t in row.tolist() if t >= 0]


CASES = [(rule, scheme) for rule in batched_tree.RULES for scheme in ("iid", "without_replacement", "topk")
         if rule != "rsd" or scheme == "without_replacement"]  # fmt: skip


@pytest.mark.parametrize("rule, scheme", CASES)
def test_tree_engine_couples_with_reference(walk, rule, scheme):
    """Every rule on every drafting scheme it can take (duplicates included), with draft rows and point masses."""
    inputs = _batch(zlib_seed(rule, scheme), scheme)
    for draft_probs in [None] if inputs[1] is None else [inputs[1], None]:
        args = (inputs[0], draft_probs, *inputs[2:4])
        tokens, nodes = batched_tree.verify_tree(*args, rule=rule, uniforms=inputs[4], return_nodes=True)
        depth = tree_contract.structure(inputs[3]).max_depth
        assert tokens.shape == (inputs[3].shape[0], depth + 1) and nodes.shape == (inputs[3].shape[0], depth)
        for b, (ref_tokens, ref_nodes) in enumerate(_reference_rows(rule, *args, inputs[4])):
            assert _unpad(tokens[b]) == ref_tokens and _unpad(nodes[b]) == ref_nodes, (rule, scheme, b)
            assert bool((tokens[b, len(ref_tokens) :] == -1).all())


def zlib_seed(*names) -> int:
    import zlib

    return zlib.crc32(":".join(names).encode())


@pytest.mark.parametrize("point_mass", [False, True])
def test_block_engine_couples_with_reference(walk, point_mass):
    gen = torch.Generator().manual_seed(11 + point_mass)
    batch, gamma, vocab_size = 300, 4, 5
    target_probs = _rows(gen, (batch, gamma + 1, vocab_size))
    draft_probs = _rows(gen, (batch, gamma, vocab_size))
    draft_tokens = torch.multinomial(draft_probs.view(-1, vocab_size), 1, generator=gen).view(batch, gamma)
    num_draft = torch.arange(batch) % (gamma + 1)
    uniforms = torch.rand(batch, gamma + 1, generator=gen, dtype=torch.float64)
    uniforms[::5] = 0.0
    q = None if point_mass else draft_probs
    tokens = batched_block.verify_block(target_probs, q, draft_tokens, num_draft=num_draft, uniforms=uniforms)
    for b in range(batch):
        n = int(num_draft[b])
        u = uniforms[b, :n].tolist() + [float(uniforms[b, gamma])]  # u_g feeds the final draw for every row
        if n == 0:
            expected = [inverse_cdf(target_probs[b, 0].tolist(), u[-1])]
        else:
            rows = None if q is None else q[b, :n].tolist()
            expected = block.verify_block(target_probs[b, : n + 1].tolist(), rows, draft_tokens[b, :n].tolist(),
                                          Injected(u))  # fmt: skip
        assert _unpad(tokens[b]) == expected, b


def test_chain_verifier_through_the_tree_contract(walk):
    """A chain is parents [0, 1, ..., n-1, -1, ...]: batched.verify through chain_as_tree equals batched.verify, and
    the tree engine's mss (rsd, and target_only for point masses) on chains emits the same tokens."""
    gen = torch.Generator().manual_seed(3)
    batch, gamma, vocab_size = 200, 4, 7
    target_probs = _rows(gen, (batch, gamma + 1, vocab_size))
    draft_probs = _rows(gen, (batch, gamma, vocab_size))
    draft_tokens = torch.multinomial(draft_probs.view(-1, vocab_size), 1, generator=gen).view(batch, gamma)
    num_draft = torch.arange(batch) % (gamma + 1)
    uniforms = torch.rand(batch, gamma + 1, generator=gen, dtype=torch.float64)
    parents = tree_contract.chain_parents(batch, gamma, num_draft)
    expected = batched.verify(target_probs, draft_probs, draft_tokens, num_draft=num_draft, uniforms=uniforms)
    as_tree = tree_contract.chain_as_tree(batched.verify)
    tokens, nodes = as_tree(target_probs, draft_probs, draft_tokens, parents, uniforms=uniforms, return_nodes=True)
    assert torch.equal(tokens, expected)
    accepted = batched.num_emitted(expected) - 1
    assert torch.equal((nodes >= 0).sum(1), accepted)
    for rule in ("mss", "rsd"):
        got = batched_tree.verify_tree(target_probs, draft_probs, draft_tokens, parents, rule=rule, uniforms=uniforms)
        assert torch.equal(_pad_to(got, gamma + 1), expected), rule
    point_mass = batched.verify(target_probs, None, draft_tokens, num_draft=num_draft, uniforms=uniforms)
    got = batched_tree.verify_tree(target_probs, None, draft_tokens, parents, rule="target_only", uniforms=uniforms)
    assert torch.equal(_pad_to(got, gamma + 1), point_mass)
    with pytest.raises(ValueError, match=r"parents\[0\]=\[0, 0, 1, 2\] is not a chain"):
        as_tree(
            target_probs, draft_probs, draft_tokens, torch.tensor([[0, 0, 1, 2]]).expand(batch, -1), uniforms=uniforms
        )
    assert chain.verify is not None  # the list engine is the tree's chain (test_exact_tree.py)


def _pad_to(tokens, width):
    return torch.cat([tokens, tokens.new_full((tokens.shape[0], width - tokens.shape[1]), -1)], 1)


def test_structure_matches_the_reference_children_and_depths():
    gen = torch.Generator().manual_seed(5)
    parents = tree_inputs.random_parents(50, 12, 3, gen)
    structure = tree_contract.structure(parents)
    for b in range(50):
        ref = tree.ArrayTree([None] * 13, None, [0] * 12, parents[b].tolist())
        for node in range(13):
            assert _unpad(structure.children[b, node]) == ref.children(node)
            if node and parents[b, node - 1] >= 0:
                assert structure.depth[b, node] == structure.depth[b, parents[b, node - 1]] + 1
    eagle = tree_contract.structure(torch.tensor([tree_inputs.eagle_like_parents()]))
    assert eagle.max_depth == 6 and eagle.children.shape == (1, 61, 10)


def test_generator_draw_is_the_injected_uniforms_and_low_precision_emits_valid_tokens(walk):
    inputs = _batch(7, "iid", batch=64, num_nodes=8, vocab_size=300)
    target_probs, draft_probs, draft_tokens, parents, _ = inputs
    for dtype in (torch.float32, torch.bfloat16):
        p, q = target_probs.to(dtype), draft_probs.to(dtype)
        for rule in ("mss", "target_only", "sample_match"):
            out = batched_tree.verify_tree(p, q, draft_tokens, parents, torch.Generator().manual_seed(1), rule=rule,
                                           validate=False)  # fmt: skip
            uniforms = batched.draw_uniforms(64, 8, torch.Generator().manual_seed(1), p.device)
            assert torch.equal(out, batched_tree.verify_tree(p, q, draft_tokens, parents, rule=rule, uniforms=uniforms))
            last = out.gather(1, ((out >= 0).sum(1) - 1)[:, None])[:, 0]
            assert bool(((last >= 0) & (last < 300)).all())


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda a: a.update(parents=a["parents"].clone().fill_(2)), r"parents\[0, 0\]=2: a parent must be -1"),
        (lambda a: a.update(rule="typical"), r"rule='typical'"),
        (lambda a: a.update(draft_tokens=a["draft_tokens"] + 100), r"draft_tokens\[0, 0\]=10\d: out of range"),
        (lambda a: a.update(uniforms=a["uniforms"][:, :3]), r"uniforms has shape \(4, 3\)"),
        (lambda a: a.update(draft_tokens=a["draft_tokens"].clone().fill_(1), rule="rsd"), r"repeats a sibling"),
    ],
)
def test_contract_errors_name_the_argument(change, message):
    gen = torch.Generator().manual_seed(0)
    args = {
        "target_probs": _rows(gen, (4, 4, 5), zeros=0),
        "draft_probs": _rows(gen, (4, 3, 5), zeros=0),
        "draft_tokens": torch.tensor([[1, 2, 3]] * 4),
        "parents": torch.tensor([[0, 0, 1]] * 4),
        "uniforms": torch.rand(4, 4, generator=gen, dtype=torch.float64),
        "rule": "mss",
    }
    change(args)
    with pytest.raises(ValueError, match=message):
        batched_tree.verify_tree(**args)


def test_two_level_draw_of_low_precision_weights_follows_the_convention():
    """fp32 weights (V = 1000: a padded last block): the two-level draw is the float64 scan of the same weights,
    except where the threshold lies within 1e-6 of the total from a partial sum (association order); zero weights
    are never drawn and an empty row gives -1."""
    gen = torch.Generator().manual_seed(2)
    weights = _rows(gen, (1500, 1000), zeros=0.5, dtype=torch.float32)
    weights[::97] = 0
    u = torch.rand(1500, generator=gen, dtype=torch.float64)
    u[::13] = 0.0
    drawn = batched_tree.inverse_cdf(weights, u)
    assert bool((drawn[::97] == -1).all())
    cumulative = weights.double().cumsum(-1)
    threshold = u * cumulative[:, -1]
    margin = (cumulative - threshold[:, None]).abs().min(1).values / cumulative[:, -1].clamp(min=1e-300)
    for b in range(1500):
        if b % 97 == 0:
            continue
        assert weights[b, drawn[b]] > 0
        if margin[b] > 1e-6:
            assert int(drawn[b]) == inverse_cdf(weights[b].double().tolist(), float(u[b])), b


@pytest.mark.parametrize("rule", batched_tree.RULES)
def test_roots_alone_and_all_padding_rows(walk, rule):
    """N = 0, and rows whose nodes are all padding: one token, drawn from the root's target row."""
    gen = torch.Generator().manual_seed(8)
    target_probs, draft_probs = _rows(gen, (3, 3, 5)), _rows(gen, (3, 2, 5), zeros=0)
    uniforms = torch.rand(3, 3, generator=gen, dtype=torch.float64)
    parents, tokens = torch.tensor([[-1, -1], [0, -1], [0, 1]]), torch.tensor([[-1, -1], [1, -1], [2, 3]])
    got = batched_tree.verify_tree(target_probs, draft_probs, tokens, parents, rule=rule, uniforms=uniforms)
    ref = list(_reference_rows(rule, target_probs, draft_probs, tokens, parents, uniforms))
    assert [_unpad(row) for row in got] == [r[0] for r in ref] and len(ref[0][0]) == 1
    alone = batched_tree.verify_tree(target_probs[:, :1], draft_probs[:, :0], tokens[:, :0], parents[:, :0], rule=rule,
                                     uniforms=uniforms[:, :1])  # fmt: skip
    assert alone[:, 0].tolist() == [inverse_cdf(target_probs[b, 0].tolist(), float(uniforms[b, 0])) for b in range(3)]


@pytest.mark.parametrize("rule, scheme", CASES)
def test_c_walk_counts_the_rows_it_reads_and_agrees_with_the_torch_walk_at_fp32(monkeypatch, rule, scheme):
    """rows_read (the benchmark's floor) by rule: sample_match reads p once per node it visits, target_only p once
    where it stops, mss and rsd p and each rejected sibling's row at most once per node; and at fp32 the C walk's
    arithmetic (fp32 residuals, double sums) emits the torch walk's tokens on these seeded batches (a difference
    would need a uniform within ~1e-7 of a ratio or partial sum)."""
    if not kernels.status().startswith("compiled"):
        pytest.skip(f"the C kernel is {kernels.status()}")
    target_probs, draft_probs, draft_tokens, parents, uniforms = _batch(zlib_seed(rule, scheme, "fp32"), scheme)
    p, q = target_probs.float(), None if draft_probs is None else draft_probs.float()
    tokens, nodes, rows_read = kernels.tree_walk(p, q, draft_tokens, parents, uniforms, rule)
    emitted = batched.num_emitted(tokens)
    if rule == "sample_match":
        assert torch.equal(rows_read, emitted)
    elif rule == "target_only":
        assert bool((rows_read == 1).all())
    else:
        assert bool((rows_read <= emitted + (parents >= 0).sum(1)).all())  # p per node + one row per sibling
        assert bool((rows_read >= 1).any())
    monkeypatch.setattr(kernels, "ENABLED", False)
    expected, expected_nodes = batched_tree.verify_tree(p, q, draft_tokens, parents, rule=rule, uniforms=uniforms,
                                                        return_nodes=True)  # fmt: skip
    assert torch.equal(tokens, expected) and torch.equal(nodes, expected_nodes)


@pytest.mark.parametrize("rule", ["target_only", "block", "block point masses"])
def test_c_walks_agree_with_torch_at_fp32_across_draw_blocks(monkeypatch, rule):
    """At V = 1000 (four blocks of the two-level draw, the last one partial): target_only's draw from p without the
    tried tokens (block sums of p, the blocks of tried tokens summed again) and block verification's draw from the
    last pass's block sums emit the torch engines' tokens at fp32 (up to a uniform within ~1e-7 of a boundary)."""
    if not kernels.status().startswith("compiled"):
        pytest.skip(f"the C kernel is {kernels.status()}")
    gen = torch.Generator().manual_seed(zlib_seed(rule, "blocks"))
    batch, vocab_size = 200, 1000
    if rule == "target_only":  # sharp rows whose top-k children carry most of the mass: the exclusions matter
        parents = tree_inputs.random_parents(batch, 9, 3, gen)
        target_probs = torch.softmax(torch.randn(batch, 10, vocab_size, generator=gen) * 4, -1)
        _, draft_tokens = tree_inputs.draft_children(target_probs, parents, "topk", gen)
        uniforms = torch.rand(batch, 10, generator=gen, dtype=torch.float64)

        def run():
            return batched_tree.verify_tree(target_probs, None, draft_tokens, parents, rule=rule, uniforms=uniforms)
    else:
        gamma = 5
        target_probs = torch.softmax(torch.randn(batch, gamma + 1, vocab_size, generator=gen) * 3, -1)
        draft_probs = torch.softmax(torch.randn(batch, gamma, vocab_size, generator=gen) * 3, -1)
        draft_tokens = torch.multinomial(draft_probs.view(-1, vocab_size), 1, generator=gen).view(batch, gamma)
        num_draft = torch.arange(batch) % (gamma + 1)
        uniforms = torch.rand(batch, gamma + 1, generator=gen, dtype=torch.float64)
        q = None if rule == "block point masses" else draft_probs

        def run():
            return batched_block.verify_block(target_probs, q, draft_tokens, num_draft=num_draft, uniforms=uniforms)

    tokens = run()
    monkeypatch.setattr(kernels, "ENABLED", False)
    assert torch.equal(tokens, run())


def test_mss_residual_after_k_rejections_of_one_q_is_a_scaled_clamp_exactly():
    """With siblings drawn i.i.d. from one q, the residual after k rejections is r_k = (p - c_k q)_+ / m_k with
    c_1 = 0, m_1 = 1, m_k = sum (p - c_k q)_+ and c_{k+1} = c_k + m_k: a sibling's test needs r_k at its token and
    the scalar m_k only. Exact in Fractions on random rows (zeros included), against the reference's recursion."""
    from fractions import Fraction

    gen = torch.Generator().manual_seed(24)
    for _ in range(40):
        vocab_size = int(torch.randint(2, 9, (1,), generator=gen))
        p = [Fraction(int(v)) for v in torch.randint(0, 6, (vocab_size,), generator=gen)]
        q = [Fraction(int(v)) for v in torch.randint(0, 6, (vocab_size,), generator=gen)]
        p[0], q[-1] = p[0] + 1, q[-1] + 1
        p, q = [v / sum(p) for v in p], [v / sum(q) for v in q]
        r, c, m = p, Fraction(0), Fraction(1)
        for _ in range(6):
            assert r == [max(p_y - c * q_y, 0) / m for p_y, q_y in zip(p, q)]
            weights = [max(r_y - q_y, 0) for r_y, q_y in zip(r, q)]  # the reference's step: norm((r - q)_+)
            if not any(weights):
                break
            r = [w / sum(weights) for w in weights]
            c += m
            m = sum(max(p_y - c * q_y, 0) for p_y, q_y in zip(p, q))


@pytest.mark.parametrize("rule", sorted(set(tree.RULES) - set(batched_tree.RULES)))
def test_rules_the_batched_engine_does_not_run_are_refused_by_name(rule):
    target_probs = torch.full((1, 2, 3), 1 / 3)
    with pytest.raises(ValueError, match=f"rule='{rule}'"):
        batched_tree.verify_tree(target_probs, target_probs[:, 1:], torch.zeros(1, 1, dtype=torch.int64),
                                 torch.zeros(1, 1, dtype=torch.int64), torch.Generator(), rule=rule)  # fmt: skip
