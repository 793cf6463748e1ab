"""Adapters that hang, raise, crash or emit contract-breaking rows; the harness must give each a named verdict.

A correct core (specref's batched engine) with one misbehaviour each. RECORD_DIR (environment variable), when set,
makes `recording` save every call's inputs there, so a test can compare what a reproduce snippet rebuilds with what
the harness really sent.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import numpy as np
import torch

from specref.conformance.chain.adapters import batched_adapter

_GOOD = batched_adapter().verify
PROBE_ROWS = (256, 512)  # the harness's probe and reproducibility batches


def good(target_probs, draft_probs, draft_tokens, generator):
    return _GOOD(target_probs, draft_probs, draft_tokens, generator)


def hangs_after_probe(target_probs, draft_probs, draft_tokens, generator):
    """Answers the probe calls, then hangs in Python on the first call of another size (the main pass)."""
    if draft_tokens.shape[0] not in PROBE_ROWS:
        time.sleep(3600)
    return good(target_probs, draft_probs, draft_tokens, generator)


def hangs_in_torch(target_probs, draft_probs, draft_tokens, generator):
    """Never returns, and spends its time inside torch ops (the GIL released, in C++)."""
    a = torch.randn(700, 700)
    while True:
        a = torch.tanh(a @ a)


def all_minus_one(target_probs, draft_probs, draft_tokens, generator):
    """Emits nothing: every row all -1 (a padding violation that would stall a loop waiting for tokens)."""
    return torch.full((draft_tokens.shape[0], draft_tokens.shape[1] + 1), -1, dtype=torch.int64)


def emits_id_v(target_probs, draft_probs, draft_tokens, generator):
    """The first token of every row is V, one past the last id."""
    out = good(target_probs, draft_probs, draft_tokens, generator)
    out[:, 0] = target_probs.shape[-1]
    return out


def even_rows_bad_id(target_probs, draft_probs, draft_tokens, generator):
    """Correct on odd rows; even rows end in -2 (not an id, not the -1 padding), their other tokens kept."""
    out = good(target_probs, draft_probs, draft_tokens, generator)
    out[0::2, -1] = -2
    return out


def _check_inputs(target_probs):
    raise ValueError(f"rejected a batch of {target_probs.shape[0]} rows")  # the raising line the report must name


def raises_in_helper(target_probs, draft_probs, draft_tokens, generator):
    return _check_inputs(target_probs)


def crashes_on_v16(target_probs, draft_probs, draft_tokens, generator):
    """The process dies (SIGKILL on itself) on V=16 batches; correct elsewhere."""
    if target_probs.shape[-1] == 16:
        os.kill(os.getpid(), 9)
    return good(target_probs, draft_probs, draft_tokens, generator)


def reports_threads(target_probs, draft_probs, draft_tokens, generator):
    """Raises with torch's intra-op thread count where it runs, after a parallel op (it must not deadlock)."""
    (torch.randn(1 << 20) + 1).sum()
    raise RuntimeError(f"threads={torch.get_num_threads()}")


def recording(target_probs, draft_probs, draft_tokens, generator):
    """First token always argmax(p_1 - q_1) (T0-clean, law wrong); saves each call's inputs under RECORD_DIR."""
    folder = os.environ.get("RECORD_DIR")
    if folder:
        name = Path(folder) / f"call_{time.perf_counter_ns()}_{os.getpid()}.npz"
        np.savez(name, target=target_probs.double().numpy(), draft=draft_probs.double().numpy(),
                 tokens=draft_tokens.numpy(), seed=np.int64(generator.initial_seed()))  # fmt: skip
    residual = (target_probs[:, 0] - draft_probs[:, 0]).argmax(-1)  # [B]
    out = torch.full((draft_tokens.shape[0], draft_tokens.shape[1] + 1), -1, dtype=torch.int64)
    out[:, 0] = residual
    return out


def _reference_hanging_on(call: int):
    """specref's reference engine (a Python row loop), which stops answering (sleeps forever) on call `call`."""
    from specref.conformance.chain.adapters import reference_adapter

    inner = reference_adapter()
    calls = []  # in the worker process, which lives until a hang kills it

    def verify(target_probs, draft_probs, draft_tokens, generator=None, *, num_draft=None, uniforms=None):
        calls.append(1)
        if len(calls) == call:
            time.sleep(10**6)
        return inner.verify(target_probs, draft_probs, draft_tokens, generator, num_draft=num_draft, uniforms=uniforms)

    return dataclasses.replace(inner, name=f"reference_hangs_on_call_{call}", verify=verify)


#: The reference engine, hung on its 17th call (issue: no verdict after 25 minutes of a 60 s run).
reference_hangs_on_17th = _reference_hanging_on(17)
