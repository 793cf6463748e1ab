"""Inputs of the batched tree contract: tree shapes (random ragged, EAGLE-like) and children drafted by a scheme.

Shapes are parents [B, N] (-1 padding). Drafting follows `specref.reference.drafting` on tensors: each node's
children are drawn from the parent's draft row q (draft_probs[:, i-1] = q of node i's parent), by

  iid                  independent draws (torch.multinomial);
  without_replacement  Gumbel top-k: the k-th sibling is the k-th largest log q + Gumbel noise of its parent,
                       which is sampling without replacement (q's support must cover the node's width, else
                       zero-probability tokens come, which the contract rejects for mss and rsd);
  topk                 the k-th sibling is the parent's k-th most likely token (torch.topk: ties in any order;
                       a node wider than q's support gets zero-probability tokens).
"""

from __future__ import annotations

import torch

from .tree_contract import structure

SCHEMES = ("iid", "without_replacement", "topk")


def eagle_like_parents(depth: int = 6, per_depth: int = 10, widths: tuple[int, ...] = (4, 3, 2, 1)) -> list[int]:
    """An EAGLE-like tree: per_depth children of the root (its top-k), then at each further depth per_depth nodes
    under the first len(widths) nodes of the previous depth (the likeliest ones), widths[j] under the j-th.
    The default has 60 nodes and depth 6; the root has 10 children, the widest inner node 4."""
    if sum(widths) != per_depth:
        raise ValueError(f"widths={widths!r} must sum to per_depth={per_depth}")
    parents, previous = [0] * per_depth, list(range(1, per_depth + 1))
    for _ in range(depth - 1):
        level = []
        for parent, width in zip(previous, widths):
            for _ in range(width):
                parents.append(parent)
                level.append(len(parents))
        previous = level
    return parents


def random_parents(batch: int, num_nodes: int, max_width: int, generator: torch.Generator, ragged: bool = True):
    """[B, N] random trees, parents before children, at most max_width children per node; with `ragged`, each row
    keeps a random number 1..N of real nodes and pads the rest (-1) at random positions."""
    parents = torch.full((batch, num_nodes), -1, dtype=torch.long)
    for b in range(batch):  # test-input construction, not the engine
        count = int(torch.randint(1, num_nodes + 1, (1,), generator=generator)) if ragged else num_nodes
        real = sorted(torch.randperm(num_nodes, generator=generator)[:count].tolist())
        children = {0: 0}
        for i in real:
            open_nodes = [node for node, n in children.items() if n < max_width]
            parent = open_nodes[int(torch.randint(len(open_nodes), (1,), generator=generator))]
            parents[b, i] = parent
            children[parent] += 1
            children[i + 1] = 0
    return parents


def draft_children(draft_rows: torch.Tensor, parents: torch.Tensor, scheme: str, generator: torch.Generator):
    """(draft_probs [B, N, V], draft_tokens [B, N]) for the tree `parents`, drafting from draft_rows [B, N+1, V]
    (the draft law at each node's context) by `scheme`. Padding nodes get token -1."""
    batch, num_nodes = parents.shape
    tree = structure(parents)
    real = parents >= 0
    batch_index = torch.arange(batch, device=parents.device)[:, None]
    draft_probs = draft_rows[batch_index, parents.clamp(min=0)]  # [B, N, V]: the parent's row
    # each node's rank among its siblings
    children = tree.children  # [B, N+1, W]
    rank = torch.zeros(batch, num_nodes + 1, dtype=torch.long, device=parents.device)
    valid = children >= 0
    ranks = torch.arange(children.shape[2], device=parents.device).expand_as(children)
    rank.scatter_(1, torch.where(valid, children, 0).flatten(1), torch.where(valid, ranks, 0).flatten(1))
    rank = rank[:, 1:]  # [B, N]
    if scheme == "iid":
        flat = draft_probs.reshape(-1, draft_probs.shape[2]).float()
        tokens = torch.multinomial(flat, 1, generator=generator).view(batch, num_nodes)
    elif scheme in ("without_replacement", "topk"):
        width = min(children.shape[2], draft_rows.shape[2])
        if scheme == "topk":
            keys = draft_rows
        else:  # log q + Gumbel noise
            dtype = torch.promote_types(draft_rows.dtype, torch.float32)
            uniform = torch.rand(draft_rows.shape, generator=generator, dtype=dtype, device=draft_rows.device)
            keys = draft_rows.to(dtype).log() - (-uniform.clamp_(min=torch.finfo(dtype).tiny).log()).log()
        top = keys.topk(width, dim=-1, sorted=True).indices  # [B, N+1, W]
        parent_top = top[batch_index, parents.clamp(min=0)]  # [B, N, W]
        tokens = parent_top.gather(2, rank.clamp(max=width - 1)[..., None])[..., 0]
    else:
        raise ValueError(f"scheme={scheme!r}; expected one of {SCHEMES}")
    return draft_probs, torch.where(real, tokens, -1)
