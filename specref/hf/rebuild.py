"""Reproducibility: a fresh build must equal the cached model bit for bit (same torch version)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from .tiny import CORPUS, CorpusSpec, ModelSpec, load_or_build


def same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def rebuild_matches(spec: ModelSpec, corpus: CorpusSpec = CORPUS, *, cache: Path | None = None) -> bool:
    """Build spec in an empty temporary cache and compare it with the (possibly cached) model in `cache`."""
    cached = load_or_build(spec, corpus, cache=cache)
    with tempfile.TemporaryDirectory() as tmp:
        fresh = load_or_build(spec, corpus, cache=Path(tmp))
        return same_weights(cached, fresh)
