"""Calling a tree adapter through the chain harness's Caller (worker process, hang and crash handling, casts).

The Caller speaks the chain contract: verify(target, draft, draft_tokens [B, M], generator, **kw) -> [B, M+1] int64.
A tree call is carried inside it: `packed_adapter` wraps the tree adapter so that its draft_tokens argument is
[draft_tokens | parents] ([B, 2N]) and its output is [tokens | nodes] ([B, 2N+1]: the tokens padded to N+1
columns, then the accepted nodes padded to N, or -2 throughout when the adapter returns no nodes). The wrapper runs
inside the Caller, so a tree adapter that raises, hangs, crashes or returns a malformed result is a verdict there.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from ..adapters import Adapter
from ..calls import AdapterFailure, Caller, call_inputs
from ..scenarios import Batch
from .adapters import TreeAdapter
from .scenarios import TreeBatch

NO_NODES = -2


def packed_adapter(tree: TreeAdapter) -> Adapter:
    def verify(target_probs, draft_probs, packed, generator=None, **kwargs):  # kwargs: uniforms, when declared
        n = packed.shape[1] // 2
        draft_tokens, parents = packed[:, :n], packed[:, n:]
        if tree.nodes:
            kwargs["return_nodes"] = True
        out = tree.verify(target_probs, draft_probs, draft_tokens, parents, generator, **kwargs)
        tokens, nodes = out if tree.nodes else (out, None)
        return _pack(tokens, nodes, packed.shape[0], n)

    return Adapter(tree.name, verify, device=tree.device, dtype=tree.dtype, rule=tree.rule, lossy=tree.lossy,
                   notes=tree.notes)  # fmt: skip


def packed_batch(batch: TreeBatch) -> Batch:
    """The tree batch as the chain Caller carries it: draft_tokens [B, 2N] = [draft_tokens | parents]."""
    rows, n = batch.draft_tokens.shape
    packed = np.concatenate([batch.draft_tokens, batch.parents], 1)
    return Batch(batch.target_probs, batch.draft_probs, packed, np.full(rows, 2 * n), batch.states)


def _pack(tokens, nodes, batch: int, n: int) -> torch.Tensor:
    for what, value, most in (("tokens", tokens, n + 1), ("nodes", nodes, n)):
        if value is None:
            continue
        if not isinstance(value, torch.Tensor) or value.dim() != 2 or value.shape[0] != batch:
            raise AdapterFailure("malformed", f"{what}: returned {type(value).__name__} of shape "
                                 f"{tuple(getattr(value, 'shape', ()))}, expected [B={batch}, <= {most}]")  # fmt: skip
        if value.dtype != torch.int64:
            raise AdapterFailure("malformed", f"{what}: returned dtype {value.dtype}, expected torch.int64")
        if value.shape[1] > most or (what == "tokens" and value.shape[1] < 1):
            raise AdapterFailure("malformed", f"{what}: returned {value.shape[1]} columns, expected 1..{most}")
    out = torch.full((batch, 2 * n + 1), -1, dtype=torch.int64)
    out[:, : tokens.shape[1]] = tokens.detach().cpu()
    if nodes is None:
        out[:, n + 1 :] = NO_NODES
    else:
        out[:, n + 1 : n + 1 + nodes.shape[1]] = nodes.detach().cpu()
    return out


class TreeCaller:
    """Caller for one tree adapter: (tokens [B, N+1], nodes [B, N] or None, (target, draft) as seen, seconds)."""

    def __init__(self, tree: TreeAdapter, limits=None):
        self.adapter = tree
        self.caller = Caller(packed_adapter(tree), limits=limits)

    def __enter__(self) -> TreeCaller:
        return self

    def __exit__(self, *exc) -> None:
        self.caller.close()

    def __call__(self, batch: TreeBatch, generator_seed: int, *, timeout: float | None = None,
                 where: dict | None = None, uniforms: np.ndarray | None = None,
                 dtype: torch.dtype | None = None):  # fmt: skip
        n = batch.draft_tokens.shape[1]
        out, seen, seconds = self.caller(packed_batch(batch), generator_seed, timeout=timeout, where=where,
                                         uniforms=uniforms, dtype=dtype)  # fmt: skip
        tokens, nodes = out[:, : n + 1], out[:, n + 1 :]
        return tokens, (None if (nodes == NO_NODES).all() else nodes), seen, seconds


def in_dtype(tree: TreeAdapter, dtype: torch.dtype) -> TreeAdapter:
    return replace(tree, dtype=dtype)


def tree_call_inputs(batch: TreeBatch, generator_seed: int, *, dtype: torch.dtype = torch.float32,
                     device: str = "cpu", nodes: bool = False) -> tuple[tuple, dict]:  # fmt: skip
    """(args, kwargs) of the tree contract exactly as the harness passes them for this batch (reproduce snippets
    call this): (target_probs, draft_probs, draft_tokens, parents, generator), return_nodes=True where declared."""
    n = batch.draft_tokens.shape[1]
    args, kwargs = call_inputs(packed_batch(batch), generator_seed, dtype=dtype, device=device)
    target, draft, tokens, generator = args
    if nodes:
        kwargs["return_nodes"] = True
    return (target, draft, tokens[:, :n], tokens[:, n:], generator), kwargs
