"""Adapters that break the verify contract; the harness must name each problem and keep running."""

from __future__ import annotations

import time

import torch
from torch_vectorised import VERIFIER  # a sibling module: the CLI puts this folder on sys.path


def _good(target_probs, draft_probs, draft_tokens, generator):
    return VERIFIER.verify(target_probs, draft_probs, draft_tokens, generator)


def wrong_shape(target_probs, draft_probs, draft_tokens, generator):
    return _good(target_probs, draft_probs, draft_tokens, generator)[:, :-1]


def wrong_dtype(target_probs, draft_probs, draft_tokens, generator):
    return _good(target_probs, draft_probs, draft_tokens, generator).to(torch.int32)


def ids_out_of_range(target_probs, draft_probs, draft_tokens, generator):
    out = _good(target_probs, draft_probs, draft_tokens, generator)
    out[0, 0] = target_probs.shape[-1]  # id V
    return out


def prefix_differs(target_probs, draft_probs, draft_tokens, generator):
    out = _good(target_probs, draft_probs, draft_tokens, generator)
    vocab = target_probs.shape[-1]
    kept = (out >= 0).sum(1) - 1
    rows = torch.nonzero(kept >= 1)[:, 0]
    out[rows, 0] = (out[rows, 0] + 1) % vocab  # the first emitted token is no longer the draft
    return out


def nan_float_output(target_probs, draft_probs, draft_tokens, generator):
    out = _good(target_probs, draft_probs, draft_tokens, generator).double()
    out[out < 0] = float("nan")  # float tokens, NaN for "no token"
    return out


def raises(target_probs, draft_probs, draft_tokens, generator):
    raise RuntimeError("CUDA error: an illegal memory access was encountered (simulated)")


def hangs(target_probs, draft_probs, draft_tokens, generator):
    time.sleep(3600)
