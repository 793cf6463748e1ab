"""Lossy by configuration: rules that trade the target law for acceptance on purpose. The harness reports their
measured TV, not a bug. Each follows the verify contract; `uniforms=` is accepted for deterministic tests.
"""

from __future__ import annotations

import torch

from .core import Steps, run, uniforms_for

#: Medusa's typical acceptance defaults (posterior_threshold, posterior_alpha).
TYPICAL_EPSILON = 0.09
TYPICAL_DELTA = 0.3
#: Lenience l in min(1, p / (l q)).
LENIENCE = 0.8
#: transformers' assistant_ensemble_weight w: v = w p + (1 - w) q.
ENSEMBLE_WEIGHT = 0.5
#: SGLang's threshold_acc: accept a (point-mass) draft when coin <= p(d) / threshold_acc.
SGLANG_THRESHOLD_ACC = 0.5


def typical_acceptance(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """Medusa: accept d when p(d) > min(eps, delta * exp(-H(p))); after the first failure, draw from p."""
    gamma = draft_tokens.shape[1]
    p = target_probs[:, :gamma].double()  # [B, g, V]
    entropy = -(p * p.clamp(min=1e-300).log()).sum(-1)  # [B, g]
    threshold = torch.minimum(torch.full_like(entropy, TYPICAL_EPSILON), TYPICAL_DELTA * torch.exp(-entropy))
    steps = Steps(accept=lambda u, p_at_draft, q_at_draft: p_at_draft > threshold, residual=lambda p_row, q, d: p_row)
    return run(target_probs, draft_probs, draft_tokens, uniforms_for(uniforms, generator, draft_tokens), steps)


def lenient_acceptance(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """Accept with min(1, p / (l q)); the residual is max(0, p - l q)."""
    steps = Steps(
        accept=lambda u, p_at_draft, q_at_draft: u < p_at_draft / (LENIENCE * q_at_draft),
        residual=lambda p_row, q_row, drafted: (p_row - LENIENCE * q_row).clamp(min=0),
    )
    return run(target_probs, draft_probs, draft_tokens, uniforms_for(uniforms, generator, draft_tokens), steps)


def assistant_ensemble(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """transformers' assistant_ensemble_weight w: accept with min(1, 1 - w + w p/q); residual max(0, p - q)."""
    w = ENSEMBLE_WEIGHT
    steps = Steps(accept=lambda u, p_at_draft, q_at_draft: u < 1 - w + w * p_at_draft / q_at_draft)
    return run(target_probs, draft_probs, draft_tokens, uniforms_for(uniforms, generator, draft_tokens), steps)


def sglang_threshold(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
    """SGLang's target-only rule with threshold_acc < 1: point-mass drafts, accept when u <= p(d) / threshold_acc."""
    steps = Steps(accept=lambda u, p_at_draft, q_at_draft: u <= p_at_draft / SGLANG_THRESHOLD_ACC)
    return run(target_probs, None, draft_tokens, uniforms_for(uniforms, generator, draft_tokens), steps)
