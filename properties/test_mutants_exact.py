"""Deterministic tests of the mutant catalogue.

Each mutant is shown to carry its bug: on hand-picked inputs with injected uniforms the bug is certain, and the
mutant's output differs from the reference engine's in the way the bug predicts. The lossy rules are shown lossy
(and one-hot verification lossless) by midpoint quadrature over the uniforms. The built-in adapters' own tests are
in test_adapters_exact.py.
"""

from __future__ import annotations

import pytest
import torch

from specref.conformance.chain.adapters import as_adapter, reference_adapter
from specref.mutants import CATALOGUE, block, bugs, core, lossy

pytestmark = pytest.mark.exact

CHECK_NAMES = {
    "t0_shape",
    "t0_padding",
    "t0_prefix_is_drafts",
    "t0_zero_prob_emitted",
    "t0_valid_ids",
    "first_token_law",
    "joint_law",
    "correction_law",
    "bonus_law",
    "reject_rate",
    "accepted_length_law",
    "row_independence",
    "reproducibility",
    "batch_composition",
    "ragged_law",
    "point_mass_law",
    "rare_edge",
}
DESIGN_BUG_CLASSES = {
    "Target law",
    "Draft law",
    "Zero edges",
    "Residual normalisation",
    "Control flow",
    "Randomness",
    "Metrics",
    "Lossy by configuration",
    "Block rule",
    "Vocabulary tail",
}


def _t(rows) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.float64)


def _case(target, draft, tokens, uniforms):
    """One batch row: target [g+1][V], draft [g][V] or None, tokens [g], uniforms [g+1] -> batched tensors."""
    draft_probs = None if draft is None else _t([draft])
    return _t([target]), draft_probs, torch.tensor([tokens]), _t([uniforms])


def _reference(target_probs, draft_probs, draft_tokens, uniforms, **kwargs):
    return reference_adapter().verify(target_probs, draft_probs, draft_tokens, None, uniforms=uniforms, **kwargs)


def _both(mutant, target, draft, tokens, uniforms):
    """(mutant's emitted row, reference's emitted row) on one injected case, as lists without the -1 padding."""
    case = _case(target, draft, tokens, uniforms)
    ours = mutant(*case[:3], None, uniforms=case[3])[0].tolist()
    ref = _reference(*case)[0].tolist()
    return [x for x in ours if x != -1], [x for x in ref if x != -1]


# --- the catalogue ---


def test_catalogue_covers_every_bug_class_and_names_known_checks():
    bug_mutants = [m for m in CATALOGUE.values() if not m.lossy]
    assert len(bug_mutants) >= 12
    assert {m.bug_class for m in CATALOGUE.values()} == DESIGN_BUG_CLASSES
    for mutant in CATALOGUE.values():
        assert mutant.caught_by and set(mutant.caught_by) <= CHECK_NAMES, mutant.name
        assert mutant.description and mutant.reference, mutant.name
        assert mutant.lossy == (mutant.bug_class == "Lossy by configuration"), mutant.name
    lossy_names = {m.name for m in CATALOGUE.values() if m.lossy}
    assert {"typical_acceptance", "lenient_acceptance", "assistant_ensemble"} <= lossy_names


def test_every_mutant_has_a_bug_test_here():
    assert set(CATALOGUE) == set(BUG_TESTS) | set(LOSSY_RULES) | {"drafts_as_one_hot"}


def test_mutant_is_adapter_shaped():
    adapter = as_adapter(CATALOGUE["placeholder_as_index"])
    assert adapter.name == "placeholder_as_index" and adapter.ragged and not adapter.uniforms
    assert as_adapter(CATALOGUE["assistant_ensemble"]).lossy
    assert as_adapter(CATALOGUE["block_token_rule"]).rule == "block" and adapter.rule == "exact"
    assert "Control flow" in adapter.notes


def test_skeleton_with_exact_steps_is_the_reference_token_for_token():
    generator = torch.Generator().manual_seed(20261130)
    batch, gamma, vocab_size = 300, 3, 6
    target = torch.rand(batch, gamma + 1, vocab_size, generator=generator, dtype=torch.float64)
    target[target < 0.3] = 0
    target[..., 0] += 1e-3  # every row keeps some mass
    target /= target.sum(-1, keepdim=True)
    draft = torch.rand(batch, gamma, vocab_size, generator=generator, dtype=torch.float64)
    draft /= draft.sum(-1, keepdim=True)
    tokens = torch.multinomial(draft.view(-1, vocab_size), 1, generator=generator).view(batch, gamma)
    uniforms = torch.rand(batch, gamma + 1, generator=generator, dtype=torch.float64)
    expected = _reference(target, draft, tokens, uniforms)
    assert torch.equal(core.run(target, draft, tokens, uniforms), expected)
    assert torch.equal(core.run(target, None, tokens, uniforms), _reference(target, None, tokens, uniforms))


# --- each bug, made certain by the inputs ---


def _temperature():
    # ratio 0.8 for the engine, 0.36/0.52 / 0.5 = 0.62 after squaring; u = 0.7 lies between.
    ours, ref = _both(bugs.verify_ignores_temperature, [[0.6, 0.4], [0.5, 0.5]], [[0.5, 0.5]], [1], [0.7, 0.1])
    assert ref[0] == 1 and ours == [0]


def _top_k():
    # Token 2 is cut by top-k (p = 0); the untruncated law gives it 0.1/3, so u = 0.01 accepts it.
    ours, ref = _both(bugs.verify_ignores_top_k, [[1, 0, 0], [1, 0, 0]], [[0.2, 0.3, 0.5]], [2], [0.01, 0.5])
    assert ref == [0] and ours == [2, 0]


def _greedy():
    ours, ref = _both(bugs.greedy_verification, [[0.3, 0.7], [0.5, 0.5]], [[0.6, 0.4]], [0], [0.1, 0.9])
    assert ref[0] == 0 and ours == [1]


def _other_logits():
    # p/q = 0.5/0.9 = 0.56 rejects at u = 0.7; p/softmax(q) = 0.5/0.54 = 0.93 accepts.
    ours, ref = _both(bugs.ratio_other_draft_logits, [[0.5, 0.5, 0], [0, 0, 1]], [[0.9, 0.1, 0]], [0], [0.7, 0.5])
    assert ref == [1] and ours == [0, 2]


def _at_drafted_token():
    # Reject d = 0 (ratio 1/3). Residual [0, .1, .3]: u = 0.3 -> token 2; p without d [0, .3, .5]: -> token 1.
    target = [[0.2, 0.3, 0.5], [1, 0, 0]]
    ours, ref = _both(bugs.residual_at_drafted_token, target, [[0.6, 0.2, 0.2]], [0], [0.5, 0.3])
    assert ref == [2] and ours == [1]


def _paired_by_position():
    # Residual [0, .1, .3]: u = 0.1 -> token 1; max(0, p - roll(q)) = [0, 0, .3] -> token 2.
    target = [[0.2, 0.3, 0.5], [1, 0, 0]]
    ours, ref = _both(bugs.residual_paired_by_position, target, [[0.6, 0.2, 0.2]], [0], [0.5, 0.1])
    assert ref == [1] and ours == [2]


def _u_zero():
    # p(d) = 0: the reference never accepts, even at u = 0; the coarse uniform floors 0.001 to 0 and `<=` accepts.
    ours, ref = _both(bugs.u_zero_accepts_zero_prob, [[1, 0], [1, 0]], [[0.5, 0.5]], [1], [0.001, 0.5])
    assert ref == [0] and ours == [1, 0]
    ours_at_zero, ref_at_zero = _both(bugs.u_zero_accepts_zero_prob, [[1, 0], [1, 0]], [[0.5, 0.5]], [1], [0.0, 0.5])
    assert ref_at_zero == [0] and ours_at_zero == [1, 0]


def _accept_le_fp32():
    # p(d) = 0: `u <= 0` accepts at u = 0 exactly (the reference's strict test never does); at u > 0 both reject.
    ours, ref = _both(bugs.accept_le_fp32, [[1, 0], [1, 0]], [[0.5, 0.5]], [1], [0.0, 0.5])
    assert ref == [0] and ours == [1, 0]
    assert _both(bugs.accept_le_fp32, [[1, 0], [1, 0]], [[0.5, 0.5]], [1], [2.0**-24, 0.5]) == ([0], [0])


def _left_search(mutant):
    # Reject d = 0 (p(d) = 0); residual p = (0, 3/8, 5/8, 0). At u = 0 the left search returns token 0 (p = 0);
    # at u = 2^-24 both return token 1. The bonus row (0, 1, 0, 0) after an accept: token 0 again at u = 0.
    target = [[0, 0.375, 0.625, 0], [0, 1.0, 0, 0]]
    ours, ref = _both(mutant, target, [[0.5, 0, 0, 0.5]], [0], [0.5, 0.0])
    assert ref == [1] and ours == [0]
    assert _both(mutant, target, [[0.5, 0, 0, 0.5]], [0], [0.5, 2.0**-24]) == ([1], [1])
    ours, ref = _both(mutant, [[0, 0.375, 0.625, 0], [0, 1.0, 0, 0]], [[0, 0.375, 0.625, 0]], [2], [0.5, 0.0])
    assert ref == [2, 1] and ours == [2, 0]


def _nan_ratio():
    ours, ref = _both(bugs.nan_ratio_accepted, [[1, 0], [1, 0]], [[0.5, 0.5]], [1], [0.9, 0.5])
    assert ref == [0] and ours == [1, 0]


def _empty_residual():
    # Near-equal rows: ratio 0.9998 rejects at u = 0.9999; the residual's mass is 1e-4.
    target = [[0.5001, 0.4999], [0.5, 0.5]]
    ours, ref = _both(bugs.empty_residual_out_of_vocab, target, [[0.5, 0.5]], [1], [0.9999, 0.5])
    assert ref == [0] and ours == [2]


def _whole_tiles():
    # V = 8,193: the residual's mass is on token 8,192 alone, the last partial tile, which the scan never reaches
    vocab = bugs.TILE + 1
    target, draft = [[0.0] * vocab, [1.0] + [0.0] * (vocab - 1)], [[0.0] * vocab]
    target[0][0], target[0][vocab - 1], draft[0][0] = 0.5, 0.5, 1.0
    ours, ref = _both(bugs.recovered_whole_tiles_only, target, draft, [0], [0.9, 0.4])
    assert ref == [vocab - 1] and ours == [0]  # its empty scanned residual falls back to p, and u = 0.4 picks 0
    small = [[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]]  # below one tile, it scans the whole row
    assert _both(bugs.recovered_whole_tiles_only, small, [[1.0, 0.0, 0.0]], [0], [0.9, 0.5]) == ([1], [1])


def _softmax_residual():
    # Residual [0, .5, 0] -> token 1; softmax([0, .5, 0]) puts 0.27 on token 2, which has p = 0.
    ours, ref = _both(bugs.softmax_residual, [[0.5, 0.5, 0], [1, 0, 0]], [[1, 0, 0]], [0], [0.9, 0.9])
    assert ref == [1] and ours == [2]


def _floor():
    # clamp(min=1e-4) gives token 2 (p = 0) the top 1e-4 of the residual's mass; u = 0.99999 lands there.
    ours, ref = _both(bugs.residual_floor_eps, [[0.5, 0.5, 0], [1, 0, 0]], [[1, 0, 0]], [0], [0.9, 0.99999])
    assert ref == [1] and ours == [2]


_CHAIN_TARGET = [[0.5, 0.5], [0.5, 0.5], [1, 0]]
_CHAIN_DRAFT = [[1, 0], [0.5, 0.5]]  # d_1 = 0 is rejected at u = 0.9 (ratio 0.5); d_2 = 0 is always accepted


def _continue_after_reject():
    ours, ref = _both(bugs.continue_after_reject, _CHAIN_TARGET, _CHAIN_DRAFT, [0, 0], [0.9, 0.1, 0.5])
    assert ref == [1] and ours == [1, 0, 0]  # a correction, then a draft: the prefix is not the drafts


def _count_all_accepts():
    ours, ref = _both(bugs.count_all_accepts, _CHAIN_TARGET, _CHAIN_DRAFT, [0, 0], [0.9, 0.1, 0.5])
    assert ref == [1] and ours[0] == 0 and len(ours) == 2  # the rejected d_1 is emitted


def _bonus_wrong_row():
    ours, ref = _both(bugs.bonus_wrong_row, [[1, 0], [0, 1]], [[1, 0]], [0], [0.5, 0.5])
    assert ref == [0, 1] and ours == [0, 0]


def _bonus_missing():
    ours, ref = _both(bugs.bonus_missing, [[1, 0], [0, 1]], [[1, 0]], [0], [0.5, 0.5])
    assert ref == [0, 1] and ours == [0]


def _placeholder():
    target, draft, tokens, uniforms = _case(
        [[1, 0, 0], [0, 0, 1], [0, 1, 0]], [[1, 0, 0], [0, 0, 1]], [0, -1], [0.5] * 3
    )
    num_draft = torch.tensor([1])
    ref = _reference(target, draft, tokens, uniforms, num_draft=num_draft)[0].tolist()
    ours = bugs.placeholder_as_index(target, draft, tokens, None, num_draft=num_draft, uniforms=uniforms)[0].tolist()
    assert ref == [0, 2, -1] and ours == [0, 2, 1]  # 3 tokens from a row with 1 draft


def _point_mass():
    ours, ref = _both(bugs.point_mass_keeps_draft, [[0.5, 0.5], [1, 0]], None, [0], [0.9, 0.1])
    assert ref == [1] and ours == [0]  # the rejected draft comes back as the correction


def _shared_positions():
    ours, ref = _both(bugs.shared_uniform_positions, _CHAIN_TARGET, [[1, 0], [1, 0]], [0, 0], [0.1, 0.9, 0.5])
    assert ref == [0, 1] and ours == [0, 0, 0]


def _equal_rows_case(batch=64, vocab_size=8):
    target = torch.full((batch, 2, vocab_size), 1 / vocab_size, dtype=torch.float64)
    tokens = torch.zeros(batch, 1, dtype=torch.int64)
    return target, target[:, :1].clone(), tokens


def _shared_rows():
    # 64 identical rows; the bonus is uniform over 8 ids. Correct engines repeat a row with probability 8^-63.
    case = _equal_rows_case()
    ours = bugs.shared_uniform_rows(*case, torch.Generator().manual_seed(1))
    ref = reference_adapter().verify(*case, torch.Generator().manual_seed(1))
    assert (ours == ours[:1]).all() and not (ref == ref[:1]).all()


def _seed_ignored():
    # Same seed twice; the mutant's two outputs agree with probability 8^-64 (its seed comes from the OS).
    case = _equal_rows_case()
    first, second = (bugs.seed_ignored(*case, torch.Generator().manual_seed(7)) for _ in range(2))
    ref_first, ref_second = (reference_adapter().verify(*case, torch.Generator().manual_seed(7)) for _ in range(2))
    assert torch.equal(ref_first, ref_second) and not torch.equal(first, second)


def _batch_composition():
    sampled = ([[0.3, 0.7], [0.5, 0.5]], [[0.6, 0.4]], [0], [0.1, 0.9])  # ratio 0.5: u = 0.1 accepts d = 0
    greedy = ([[1, 0], [1, 0]], [[1, 0]], [0], [0.1, 0.9])
    alone = bugs.batch_composition(*_case(*sampled)[:3], None, uniforms=_case(*sampled)[3])
    cases = [_case(*sampled), _case(*greedy)]
    mixed_inputs = [torch.cat([c[i] for c in cases]) for i in range(4)]
    mixed = bugs.batch_composition(*mixed_inputs[:3], None, uniforms=mixed_inputs[3])
    assert alone[0].tolist() == _reference(*_case(*sampled))[0].tolist() == [0, 1]
    assert mixed[0].tolist() == [1, -1]  # the same row, verified greedily because a greedy row joined the batch


def _block_reference(target_probs, draft_probs, draft_tokens, uniforms):
    from specref.conformance.chain.adapters import block_reference_adapter

    return block_reference_adapter().verify(target_probs, draft_probs, draft_tokens, None, uniforms=uniforms)


#: The paper's toy (Sun et al.): p = (1/3, 2/3), q = (2/3, 1/3), drafts (0, 1): b_1 = 1/2, b_2 = 1, so h_2 = 1 and block
#: keeps both drafts whatever the uniforms, while the token rule rejects x_1 when u_0 >= p/q = 1/2.
_TOY = ([[1 / 3, 2 / 3]] * 3, [[2 / 3, 1 / 3]] * 2, [0, 1], [0.7, 0.5, 0.5])


def _block_token_rule():
    case = _case(*_TOY)
    ours = block.block_token_rule(*case[:3], None, uniforms=case[3])
    assert ours.tolist() == _reference(*case).tolist() == [[1, -1, -1]]  # the token rule: reject, correct with 1
    assert _block_reference(*case)[0, :2].tolist() == [0, 1]  # block keeps both drafts


def _block_token_residual():
    gen = torch.Generator().manual_seed(5)
    batch, gamma, v = 400, 3, 4
    target = torch.rand(batch, gamma + 1, v, generator=gen, dtype=torch.float64) + 0.05
    draft = torch.rand(batch, gamma, v, generator=gen, dtype=torch.float64) + 0.05
    target, draft = target / target.sum(-1, keepdim=True), draft / draft.sum(-1, keepdim=True)
    tokens = torch.multinomial(draft.view(-1, v), 1, generator=gen).view(batch, gamma)
    u = torch.rand(batch, gamma + 1, generator=gen, dtype=torch.float64)
    reference = _block_reference(target, draft, tokens, u)
    assert torch.equal(block._block(target, draft, tokens, u, scale_residual=True), reference)  # the skeleton is block
    ours = block.block_token_residual(target, draft, tokens, None, uniforms=u)
    accepted = (ours >= 0).sum(1) - 1
    differs = (ours != reference).any(1)
    assert differs.any() and (accepted[differs] > 0).all()  # only corrections after a kept draft (b_tau < 1) move


BUG_TESTS = {
    "verify_ignores_temperature": _temperature,
    "verify_ignores_top_k": _top_k,
    "greedy_verification": _greedy,
    "ratio_other_draft_logits": _other_logits,
    "residual_at_drafted_token": _at_drafted_token,
    "residual_paired_by_position": _paired_by_position,
    "u_zero_accepts_zero_prob": _u_zero,
    "nan_ratio_accepted": _nan_ratio,
    "accept_le_fp32": _accept_le_fp32,
    "inverse_cdf_left_search": lambda: _left_search(bugs.inverse_cdf_left_search),
    "inverse_cdf_from_first_token": lambda: _left_search(bugs.inverse_cdf_from_first_token),
    "empty_residual_out_of_vocab": _empty_residual,
    "softmax_residual": _softmax_residual,
    "recovered_whole_tiles_only": _whole_tiles,
    "residual_floor_eps": _floor,
    "continue_after_reject": _continue_after_reject,
    "count_all_accepts": _count_all_accepts,
    "bonus_wrong_row": _bonus_wrong_row,
    "bonus_missing": _bonus_missing,
    "placeholder_as_index": _placeholder,
    "point_mass_keeps_draft": _point_mass,
    "shared_uniform_positions": _shared_positions,
    "shared_uniform_rows": _shared_rows,
    "seed_ignored": _seed_ignored,
    "batch_composition": _batch_composition,
    "block_token_rule": _block_token_rule,
    "block_token_residual": _block_token_residual,
}


def test_each_mutant_has_its_bug():
    for name, check in BUG_TESTS.items():
        try:
            check()
        except AssertionError as error:
            raise AssertionError(f"mutant {name} does not show its bug") from error


# --- the law of the first token, by midpoint quadrature over (d_1, u_0, u_1) ---

QUADRATURE_STEPS = 200  # per uniform
# The midpoint rule misplaces each step of an indicator in u by at most 1/(2k); per drafted token the first token
# crosses 1 accept threshold and at most V - 1 draw thresholds, so the TV error is at most V / 400 = 0.0075 at V = 3.
QUADRATURE_TOLERANCE = 0.0075


def _first_token_law(verify, target, draft, vocab_size):
    """Exact-up-to-quadrature law of the first emitted token for g = 1, drafts d ~ q."""
    k = QUADRATURE_STEPS
    mid = (torch.arange(k, dtype=torch.float64) + 0.5) / k
    u0, u1 = torch.meshgrid(mid, mid, indexing="ij")
    uniforms = torch.stack([u0.reshape(-1), u1.reshape(-1)], dim=1)  # [k^2, 2]
    law = torch.zeros(vocab_size, dtype=torch.float64)
    for token in range(vocab_size):
        if draft[0][token] == 0:
            continue
        batch = uniforms.shape[0]
        target_probs = _t([target]).expand(batch, -1, -1)
        draft_probs = _t([draft]).expand(batch, -1, -1)
        tokens = torch.full((batch, 1), token)
        first = verify(target_probs, draft_probs, tokens, None, uniforms=uniforms)[:, 0]
        law += draft[0][token] * torch.bincount(first, minlength=vocab_size).double() / batch
    return law


_P = [[0.5, 0.3, 0.2], [0.2, 0.2, 0.6]]
_Q = [[0.2, 0.2, 0.6]]  # TV(p, q) = 0.4: the rules below change the first-token law by far more than the error

LOSSY_RULES = {
    "typical_acceptance": lossy.typical_acceptance,
    "lenient_acceptance": lossy.lenient_acceptance,
    "assistant_ensemble": lossy.assistant_ensemble,
    "sglang_threshold": lossy.sglang_threshold,
}


def _tv(law, row) -> float:
    return 0.5 * float((law - _t(row)).abs().sum())


def test_quadrature_recovers_p_for_the_exact_skeleton():
    law = _first_token_law(lambda *a, uniforms: core.run(*a[:3], uniforms), _P, _Q, 3)
    assert _tv(law, _P[0]) < QUADRATURE_TOLERANCE


def test_lossy_rules_change_the_first_token_law():
    for name, rule in LOSSY_RULES.items():
        tv = _tv(_first_token_law(rule, _P, _Q, 3), _P[0])
        assert tv > 4 * QUADRATURE_TOLERANCE, (name, tv)


def test_one_hot_verification_keeps_the_law_but_not_the_acceptance_rate():
    law = _first_token_law(bugs.drafts_as_one_hot, _P, _Q, 3)
    assert _tv(law, _P[0]) < QUADRATURE_TOLERANCE
    # Acceptance: sum_x min(p, q) = 0.6 for min(1, p/q); E_q[p(d)] = 0.28 for one-hot verification.
    accept_exact = sum(min(p, q) for p, q in zip(_P[0], _Q[0], strict=True))
    accept_one_hot = sum(p * q for p, q in zip(_P[0], _Q[0], strict=True))
    assert abs(accept_exact - 0.6) < 1e-12 and abs(accept_one_hot - 0.28) < 1e-12
    ours, ref = _both(bugs.drafts_as_one_hot, [[0.5, 0.5], [1, 0]], [[0.5, 0.5]], [0], [0.7, 0.5])
    assert ref == [0, 0] and ours == [1]  # p = q is always accepted; one-hot verification rejects at u > p(d)
