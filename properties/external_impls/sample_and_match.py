"""Sample-and-match verification (MLX-LM, llama.cpp's server): lossless, but it accepts less than exact sampling.

The target samples its own token at every position; drafts are kept while they equal those samples; the first
differing sample, or the bonus after all matches, is emitted. `VERIFIER` declares the rule, `verify` does not.
"""

from __future__ import annotations

import torch


def verify(target_probs, draft_probs, draft_tokens, generator):
    batch, gamma = draft_tokens.shape
    rows = target_probs.reshape(-1, target_probs.shape[-1]).double()
    samples = torch.multinomial(rows, 1, generator=generator).view(batch, gamma + 1)  # y_i ~ p_i
    matched = (samples[:, :gamma] == draft_tokens).long().cumprod(1).sum(1)  # drafts kept
    out = torch.where(torch.arange(gamma + 1)[None, :] <= matched[:, None], samples, -1)
    return out  # kept drafts equal the samples, then the first differing sample (or the bonus)


class MatchVerifier:
    name = "sample-and-match"
    rule = "match"

    def verify(self, target_probs, draft_probs, draft_tokens, generator):
        return verify(target_probs, draft_probs, draft_tokens, generator)


VERIFIER = MatchVerifier()
