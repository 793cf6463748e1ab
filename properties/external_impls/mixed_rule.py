"""Exact speculative sampling everywhere, except sample-and-match on rows whose draft equals the target (p == q).

Lossless (each row follows a lossless rule), but it follows no single rule: on p == q rows exact sampling never
rejects (Z = 0), sample-and-match rejects with probability 1 - sum p^2; elsewhere it accepts as exact sampling does.
`verify` declares nothing (rule "exact"), `MATCH_DECLARED` declares "match"; the rule diagnosis must say of both
that no known rule fits.
"""

from __future__ import annotations

import torch
from sample_and_match import verify as match_verify

from specref.conformance.chain.adapters import Adapter, batched_adapter

_EXACT = batched_adapter().verify


def verify(target_probs, draft_probs, draft_tokens, generator):
    gamma = draft_tokens.shape[1]
    equal = (target_probs[:, :gamma] == draft_probs).flatten(1).all(1)  # [B] rows with p == q at every position
    exact = _EXACT(target_probs, draft_probs, draft_tokens, generator)
    if not equal.any():
        return exact
    match = match_verify(target_probs, draft_probs, draft_tokens, generator)
    return torch.where(equal[:, None], match, exact)


MATCH_DECLARED = Adapter("mixed-rule-declared-match", verify, rule="match")
