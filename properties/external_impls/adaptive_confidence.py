"""Adaptive, variable-length verification declared from a file: a verifier that truncates its drafts by a confidence
rule, choosing a draft length per row and per step as vLLM's adaptive verification and TensorRT-LLM's acceptance-rate
threshold do, then verifying the kept drafts by exact speculative sampling (specref's batched engine, ragged rows).

The rule reads what is known before this step's drafts are drawn: the target's law at the prefix, p_0 (in an engine,
the previous step's last target row). Where the target is unsure of the next token (max p_0 < CONFIDENCE) it verifies
only the first draft; elsewhere every draft it was given. The cut never reads the drafts, p beyond the prefix or the
uniforms, so each row is a ragged row with `used` drafts, and the harness holds its laws to those: the verifier
declares `adaptive` (and `ragged`), is called with return_num_draft=True and returns (tokens, used).

A cut that reads the current drafts (say, stop at the first draft with q_i(x_i) < c) also keeps the output law (it is
a stopping time of the drafting), but it is not a ragged verifier: given the cut, the kept drafts are not draws from
q (the cut selected them), so the per-length laws the rule checks test are not the ragged rows' laws.
"""

from __future__ import annotations

import torch

from specref.batched import verify

#: Verify every draft where the target's likeliest next token has at least this probability, else only the first.
CONFIDENCE = 0.3


def drafts_to_verify(target_probs, num_draft, gamma: int) -> torch.Tensor:
    """[B] int64: the drafts verified per row, 1 where max p_0 < CONFIDENCE, else all it was given."""
    given = torch.full((target_probs.shape[0],), gamma, dtype=torch.long) if num_draft is None else num_draft.long()
    confident = target_probs[:, 0].max(-1).values >= CONFIDENCE  # [B]
    return torch.where(confident, given, given.clamp(max=1))


class AdaptiveVerifier:
    name = "adaptive-confidence-from-a-file"
    ragged = True
    adaptive = True

    def verify(self, target_probs, draft_probs, draft_tokens, generator, *, num_draft=None, return_num_draft=False):
        used = drafts_to_verify(target_probs, num_draft, draft_tokens.shape[1])
        tokens = verify(target_probs, draft_probs, draft_tokens, generator, num_draft=used)
        return (tokens, used) if return_num_draft else tokens


VERIFIER = AdaptiveVerifier()
