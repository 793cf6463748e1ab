"""Tiny GPT-2 target and draft models, trained for a few seconds on a synthetic corpus specref generates.

The corpus is an order-1 Markov chain over V tokens whose rows are Dirichlet(concentration) draws from a named
numpy PCG64 stream, so its laws are peaked and context dependent. The target (several wide layers) learns it well;
the draft (one narrow layer, fewer steps) learns it roughly, which gives acceptance rates in 0.3..0.9.

Reproducibility: weights are initialised from a torch.Generator, minibatches come from a numpy PCG64 stream,
dropout is off and training runs on one thread, so a rebuild gives the same weights bit for bit (same torch
version). Models are cached with save_pretrained under $SPECREF_CACHE (default ~/.cache/specref/models), keyed
by a crc32 of the recipe and the torch/transformers versions. No hub access: HF_HUB_OFFLINE=1 and local paths only.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX
    fcntl = None

import numpy as np
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

import transformers  # noqa: E402
from transformers import GPT2Config, GPT2LMHeadModel  # noqa: E402

from .. import cache  # noqa: E402

transformers.utils.logging.disable_progress_bar()


@dataclass(frozen=True)
class CorpusSpec:
    vocab_size: int = 16
    order: int = 1
    concentration: float = 0.25
    seq_len: int = 12
    num_sequences: int = 2048
    seed: int = 20260601


@dataclass(frozen=True)
class ModelSpec:
    role: str
    n_layer: int
    n_embd: int
    n_head: int
    train_steps: int
    batch_size: int = 32
    lr: float = 5e-3
    seed: int = 0


CORPUS = CorpusSpec()
TARGET = ModelSpec("target", n_layer=4, n_embd=128, n_head=4, train_steps=150, seed=1)
DRAFT = ModelSpec("draft", n_layer=1, n_embd=32, n_head=2, train_steps=40, seed=2)


def cache_dir() -> Path:
    return cache.root() / "models"


def markov_rows(corpus: CorpusSpec = CORPUS) -> np.ndarray:  # [V^order, V]
    """The corpus law: one Dirichlet row per context of `order` tokens."""
    rng = np.random.Generator(np.random.PCG64(corpus.seed))
    return rng.dirichlet(np.full(corpus.vocab_size, corpus.concentration), size=corpus.vocab_size**corpus.order)


def sample_corpus(corpus: CorpusSpec = CORPUS, *, sample_seed: int | None = None) -> np.ndarray:  # [N, L] int64
    """Sequences of the corpus chain (rows from corpus.seed); sample_seed picks the draw (default corpus.seed + 1)."""
    rows = markov_rows(corpus)
    rng = np.random.Generator(np.random.PCG64(corpus.seed + 1 if sample_seed is None else sample_seed))
    V, k = corpus.vocab_size, corpus.order
    seqs = np.empty((corpus.num_sequences, corpus.seq_len), dtype=np.int64)
    seqs[:, :k] = rng.integers(V, size=(corpus.num_sequences, k))
    cdf = np.cumsum(rows, axis=1)
    for t in range(k, corpus.seq_len):
        context = np.zeros(corpus.num_sequences, dtype=np.int64)
        for j in range(k):
            context = context * V + seqs[:, t - k + j]
        u = rng.random(corpus.num_sequences)[:, None]
        seqs[:, t] = np.minimum((cdf[context] <= u * cdf[context, -1:]).sum(axis=1), V - 1)
    return seqs


def sample_prompts(num: int, length: int, seed: int, corpus: CorpusSpec = CORPUS) -> torch.Tensor:  # [num, length]
    """Prompts drawn from the corpus chain (so they are in-distribution for both models)."""
    shape = CorpusSpec(**{**asdict(corpus), "num_sequences": num, "seq_len": length})
    seqs = sample_corpus(shape, sample_seed=seed)
    return torch.from_numpy(seqs)


def config_for(spec: ModelSpec, corpus: CorpusSpec = CORPUS) -> GPT2Config:
    return GPT2Config(
        vocab_size=corpus.vocab_size,
        n_positions=128,
        n_embd=spec.n_embd,
        n_layer=spec.n_layer,
        n_head=spec.n_head,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=None,
        pad_token_id=0,
    )


def _init_weights(model: torch.nn.Module, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in model.named_parameters():
            if ".ln_" in name or name.startswith("transformer.ln_f"):
                param.fill_(1.0 if name.endswith("weight") else 0.0)
            elif name.endswith("bias"):
                param.zero_()
            else:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.02)


def train(spec: ModelSpec, corpus: CorpusSpec = CORPUS) -> GPT2LMHeadModel:
    """Build from config and train; deterministic given (spec, corpus, torch version)."""
    model = GPT2LMHeadModel(config_for(spec, corpus))
    _init_weights(model, spec.seed)
    return fit(model, corpus, seed=spec.seed, lr=spec.lr, train_steps=spec.train_steps, batch_size=spec.batch_size)


def fit(model, corpus: CorpusSpec, *, seed: int, lr: float, train_steps: int, batch_size: int):
    """Train `model` on the corpus (Adam, next-token loss), batches drawn from PCG64(seed); returned in eval mode."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # CPU reductions are bitwise reproducible only at a fixed thread count
    try:
        data = torch.from_numpy(sample_corpus(corpus))
        rng = np.random.Generator(np.random.PCG64(seed))
        optimizer = torch.optim.Adam(model.parameters(), lr=lr)
        model.train()
        for _ in range(train_steps):
            batch = data[torch.from_numpy(rng.integers(len(data), size=batch_size))]
            loss = model(input_ids=batch, labels=batch).loss
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        return model.eval()
    finally:
        torch.set_num_threads(threads)


def recipe_key(spec: ModelSpec, corpus: CorpusSpec = CORPUS) -> str:
    recipe = {"spec": asdict(spec), "corpus": asdict(corpus), "torch": torch.__version__}
    recipe["transformers"] = transformers.__version__
    digest = zlib.crc32(json.dumps(recipe, sort_keys=True).encode())
    return f"{spec.role}-{digest:08x}"


def load_or_build(spec: ModelSpec, corpus: CorpusSpec = CORPUS, *, cache: Path | None = None) -> GPT2LMHeadModel:
    """The model from the on-disk cache, or built, trained and saved there on a miss (once: see `cached`)."""
    path = (cache or cache_dir()) / recipe_key(spec, corpus)
    return cached(
        path, lambda: GPT2LMHeadModel.from_pretrained(path, local_files_only=True), lambda: train(spec, corpus)
    )


def cached(path: Path, load, build):
    """load() when a complete copy is saved at path; else build(), saved there atomically, in eval mode.

    The build runs under an exclusive lock on a file beside path, and the lock's holder checks again: processes
    that miss at once (pytest-xdist workers) build the model once, and the others load it. Without fcntl (not
    POSIX) each builds its own, as before, and the first to save wins.
    """
    if not (path / "config.json").exists():
        with _lock(path.with_name(path.name + ".lock")):
            if not (path / "config.json").exists():
                model = build()
                save_atomically(model, path)
                return model.eval()
    return load().eval()


@contextlib.contextmanager
def _lock(lock_path: Path):
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as handle:
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file is closed
        yield


def save_atomically(model, path: Path) -> None:
    """`model.save_pretrained(path)`, all or nothing: concurrent builders (pytest-xdist workers) never see half a
    model, and when another process got there first (with the same weights) its copy stays."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    model.save_pretrained(tmp)
    try:
        os.replace(tmp, path)
    except OSError:
        shutil.rmtree(tmp, ignore_errors=True)


def tiny_pair(cache: Path | None = None) -> tuple[GPT2LMHeadModel, GPT2LMHeadModel]:
    """(target, draft), from the cache or built."""
    return load_or_build(TARGET, cache=cache), load_or_build(DRAFT, cache=cache)
