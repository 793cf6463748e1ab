"""The lossy built-ins' TV intervals cover the exact TV, and the interval reaches 0 where the true TV is 0.

Statistical tier. Each lossy rule of specref.mutants.lossy_engines, at its built-in's setting, verifies ROWS rows of
cf_dense_g4 for SEEDS seeds; the first-token counts give specref.stats.tv's interval, which must hold the exact TV
of specref.mutants.lossy_laws. Each interval misses with probability at most its alpha (simultaneous Clopper-Pearson
intervals), here alpha_for("lossy", checks) (budget.py), so the test's false-alarm rate is at most the "lossy"
share. By hand (40 seeds x 4,000 rows per rule, alpha 1e-3): 240 of 240 intervals covered (reports/lossy.md).
The exact tier below proves the closed forms where they are known: the exact rule's first-token law is p.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from budget import alpha_for

from specref.builtins import BUILTINS
from specref.conformance.chain.scenarios import get
from specref.mutants import lossy_engines, lossy_laws
from specref.stats.tv import tv_interval

ROWS, SEEDS = 4000, 4
RULES = [(b.args[0], b.args[1:]) for b in BUILTINS if b.factory.endswith("lossy_engines:lossy_adapter")]
ALPHA = alpha_for("lossy", len(RULES) * SEEDS + 2)


def _first_tokens(verify, p, q, gamma, rows, seed) -> np.ndarray:
    gen = torch.Generator().manual_seed(seed)
    drafts = torch.multinomial(torch.tensor(q).expand(rows, -1), gamma, replacement=True, generator=gen)
    target = torch.tensor(p).expand(rows, gamma + 1, -1).contiguous()
    draft = torch.tensor(q).expand(rows, gamma, -1).contiguous()
    return np.bincount(verify(target, draft, drafts, gen)[:, 0].numpy(), minlength=len(p))


@pytest.mark.statistical
@pytest.mark.parametrize("rule, settings", RULES)
def test_interval_covers_the_exact_tv(rule, settings):
    sc = get("cf_dense_g4")
    p, q = sc.target[0], sc.draft[0]
    exact = lossy_laws.tv(lossy_laws.first_token_law(rule, tuple(settings), p, q, sc.gamma), p)
    verify = lossy_engines.RULES[rule][0](*settings)
    for seed in range(SEEDS):
        tv = tv_interval(_first_tokens(verify, p, q, sc.gamma, ROWS, seed), p, ALPHA, seed)
        assert tv.low <= exact <= tv.high, (rule, settings, seed, exact, tv)


@pytest.mark.statistical
def test_interval_reaches_zero_where_the_true_tv_is_zero():
    """Synthetic acceptance on p = q keeps p as the first token's law (kept drafts are draws from q = p): TV 0. The
    interval's lower end is 0 and the estimate sits below the plug-in's upward-biased reading."""
    sc = get("cf_equal_g8")
    p, q = sc.target[0], sc.draft[0]
    assert lossy_laws.tv(lossy_laws.first_token_law("synthetic", (0.7,), p, q, sc.gamma), p) < 1e-12
    tv = tv_interval(_first_tokens(lossy_engines.synthetic(0.7), p, q, sc.gamma, 1000, 0), p, ALPHA, 0)
    assert tv.low == 0 and tv.estimate < tv.plug_in and tv.null_bias > 0, tv


@pytest.mark.exact
def test_exact_rule_first_token_law_is_p():
    for name in ("cf_dense_g4", "cf_small_residual_g4", "cf_near_equal_g4"):
        sc = get(name)
        p, q = sc.target[0], sc.draft[0]
        law = lossy_laws.first_token_law("exact", (), p, q, sc.gamma)
        assert abs(law.sum() - 1) < 1e-12 and lossy_laws.tv(law, p) < 1e-12, name


@pytest.mark.exact
def test_relaxed_acceptance_outside_think_is_exact_sampling_token_for_token():
    """TensorRT-LLM applies relaxed acceptance inside <think> only: in the answer phase the rule is exact."""
    from specref.mutants.core import run as run_steps

    sc = get("cf_dense_g4")
    rows, g = 512, sc.gamma
    gen = torch.Generator().manual_seed(0)
    drafts = torch.multinomial(torch.tensor(sc.draft[0]).expand(rows, -1), g, replacement=True, generator=gen)
    target = torch.tensor(sc.target[0]).expand(rows, g + 1, -1).contiguous()
    draft = torch.tensor(sc.draft[0]).expand(rows, g, -1).contiguous()
    uniforms = torch.rand(rows, g + 1, generator=gen, dtype=torch.float64)
    answer = lossy_engines.relaxed(10, 0.6, "answer")(target, draft, drafts, uniforms=uniforms)
    think = lossy_engines.relaxed(10, 0.6, "think")(target, draft, drafts, uniforms=uniforms)
    assert torch.equal(answer, run_steps(target, draft, drafts, uniforms))
    assert not torch.equal(think, answer)


@pytest.mark.statistical
def test_tree_lossy_interval_covers_the_exact_tv():
    """A lossy tree rule (RSD on top-k children) through the tree harness: its interval on tree_star_cf holds the TV
    of its exact first-token law (specref.exact_tree, in Fractions) from the target's."""
    from specref.conformance.tree import run_tree
    from specref.conformance.tree.scenarios import get as tree_get
    from specref.exact_tree import first_token_law
    from specref.mutants.trees import MUTANTS

    report = run_tree(MUTANTS["topk_rsd"](), seed=0, rows=5000, scenarios=["tree_star_cf"], alpha=ALPHA)
    tv = report.lossy["scenarios"]["tree_star_cf"]["first_token"]
    mutant = MUTANTS["topk_rsd"]()
    sc = tree_get("tree_star_cf").given(mutant.dtype)  # the rows as the verifier was given them
    law = first_token_law(sc.cycle_law(0, "topk", "rsd"))
    exact = 0.5 * sum(abs(float(law.get(y, 0)) - sc.target[0][y]) for y in range(sc.vocab_size))
    assert tv["low"] <= exact <= tv["high"] and tv["low"] > 0, (exact, tv)
    assert "times the accepted tokens of rule 'rsd'" in report.summary()
