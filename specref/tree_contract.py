"""The batched tree contract: its structure tensors, its checks, and chain verifiers seen as tree verifiers.

    verify_tree(target_probs [B, N+1, V], draft_probs [B, N, V] | None, draft_tokens [B, N], parents [B, N],
                generator, *, rule, uniforms [B, N+1] | None, return_nodes=False)
      -> tokens [B, D+1] int64: the accepted root-to-node path's tokens, then the correction or bonus, -1 padded
         (D = the deepest node of the batch); with return_nodes, also nodes [B, D]: the accepted nodes, -1 padded

  * Node 0 is the root, the last committed token; nodes 1..N are the draft nodes, node i carrying
    draft_tokens[:, i-1].
  * parents[b, i-1] is node i's parent (0 for the root's children); parents come before children
    (parents[b, i-1] < i). Trees may be ragged across the batch: padding nodes have parent -1 (anywhere, their
    tokens are ignored and may be -1), and no node has a padding parent.
  * target_probs[:, j] is the target law at the context that ends at node j.
  * draft_probs[:, i-1] is the law node i's token was drawn from (None for deterministic trees).
  * Siblings are ordered by node index (draw order). The rules, their randomness and the coupling convention with
    the reference are those of `specref.reference.tree` (one sequence, lists), which this contract batches.

A chain is a tree: g drafts are parents = [0, 1, ..., g-1] (`chain_parents`); a chain of n < g drafts in a
batch of width g is [0, 1, ..., n-1, -1, ...]. `chain_as_tree` calls a chain verifier (the `specref.batched.verify`
contract) through this one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import torch

from .reference.tree import RULES, USES_DRAFT_PROBS


class TreeStructure(NamedTuple):
    children: torch.Tensor  # [B, N+1, W] child node indices in sibling order, -1 padded (W = widest node)
    depth: torch.Tensor  # [B, N+1] depth of each node (root 0; padding nodes 0)
    max_depth: int  # D, the deepest real node of the batch
    real: torch.Tensor  # [B, N+1] bool: the root and the non-padding nodes


def structure(parents: torch.Tensor) -> TreeStructure:
    """Children table and depths, vectorised over the batch (a log2(N) loop of pointer jumping for depths)."""
    batch, num_nodes = parents.shape
    device = parents.device
    parents = parents.long()
    real = parents >= 0  # [B, N]
    slots = torch.arange(num_nodes + 1, device=device)
    # rank of node i among its siblings: earlier nodes with the same parent
    same_parent = (parents[:, :, None] == slots) & real[:, :, None]  # [B, N, N+1]
    num_children = same_parent.sum(1)  # [B, N+1]
    width = max(1, int(num_children.max()))
    rank = same_parent.cumsum(1).gather(2, parents.clamp(min=0)[:, :, None])[:, :, 0] - 1  # [B, N]
    flat = torch.where(real, parents.clamp(min=0) * width + rank, (num_nodes + 1) * width)  # padding: a spare slot
    children = torch.full((batch, (num_nodes + 1) * width + 1), -1, dtype=torch.long, device=device)
    children.scatter_(1, flat, torch.arange(1, num_nodes + 1, device=device).expand(batch, -1))
    children = children[:, :-1].view(batch, num_nodes + 1, width)
    # depths by pointer jumping: depth(i) = hops to the root
    up = torch.cat([torch.zeros(batch, 1, dtype=torch.long, device=device), parents.clamp(min=0)], 1)  # [B, N+1]
    depth = torch.cat([torch.zeros(batch, 1, dtype=torch.long, device=device), real.long()], 1)
    for _ in range(max(1, num_nodes).bit_length()):
        depth = depth + torch.where(up > 0, depth.gather(1, up), 0)
        up = up.gather(1, up)
    node_real = torch.cat([torch.ones(batch, 1, dtype=torch.bool, device=device), real], 1)
    return TreeStructure(children, depth, int(depth.max()) if num_nodes else 0, node_real)


def chain_parents(batch: int, gamma: int, num_draft: torch.Tensor | None = None, device=None) -> torch.Tensor:
    """[B, g] parents of chains: node i's parent is i - 1; positions past num_draft[b] are padding (-1)."""
    parents = torch.arange(gamma, device=device).expand(batch, gamma).clone()
    if num_draft is not None:
        parents[torch.arange(gamma, device=device) >= num_draft[:, None].to(device)] = -1
    return parents


def chain_lengths(parents: torch.Tensor) -> torch.Tensor:
    """[B] drafts per row of chain trees (padding at the end); ValueError naming a row that is not a chain."""
    gamma = parents.shape[1]
    num_draft = (parents >= 0).sum(1)
    expected = chain_parents(parents.shape[0], gamma, num_draft, parents.device)
    bad = (parents != expected).any(1)
    if bool(bad.any()):
        b = int(bad.nonzero()[0])
        raise ValueError(f"parents[{b}]={parents[b].tolist()} is not a chain [0, 1, ..., n-1] followed by -1 padding")
    return num_draft


def chain_as_tree(verify_chain: Callable) -> Callable:
    """A chain verifier verify_chain(target_probs, draft_probs, draft_tokens, generator, num_draft=..., **kw)
    -> [B, g+1] tokens, called through the tree contract (chain trees only; nodes = 1..accepted)."""

    def verify(target_probs, draft_probs, draft_tokens, parents, generator=None, *, return_nodes=False, **kwargs):
        num_draft = chain_lengths(parents)
        tokens = verify_chain(target_probs, draft_probs, draft_tokens, generator, num_draft=num_draft, **kwargs)
        if not return_nodes:
            return tokens
        accepted = (tokens >= 0).sum(1) - 1  # [B]
        positions = torch.arange(1, parents.shape[1] + 1, device=tokens.device)
        return tokens, torch.where(positions <= accepted[:, None], positions, -1)

    return verify


def check_tree(target_probs, draft_probs, draft_tokens, parents, uniforms, rule: str) -> None:
    """The contract's checks (one host sync each); errors name the argument and the offending value."""
    if rule not in RULES:
        raise ValueError(f"rule={rule!r}; expected one of {RULES}")
    if parents.dim() != 2 or draft_tokens.shape != parents.shape:
        raise ValueError(
            f"draft_tokens {tuple(draft_tokens.shape)} and parents {tuple(parents.shape)}: expected [B, N]"
        )
    batch, num_nodes = parents.shape
    if target_probs.dim() != 3 or target_probs.shape[:2] != (batch, num_nodes + 1):
        raise ValueError(f"target_probs has shape {tuple(target_probs.shape)}; expected [B, N+1, V] = [{batch}, "
                         f"{num_nodes + 1}, V]")  # fmt: skip
    vocab_size = target_probs.shape[2]
    if draft_probs is not None and draft_probs.shape != (batch, num_nodes, vocab_size):
        raise ValueError(f"draft_probs has shape {tuple(draft_probs.shape)}; expected {(batch, num_nodes, vocab_size)}")
    if uniforms is not None and uniforms.shape != (batch, num_nodes + 1):
        raise ValueError(f"uniforms has shape {tuple(uniforms.shape)}; expected [B, N+1] = {(batch, num_nodes + 1)}")
    parents = parents.long()
    node = torch.arange(1, num_nodes + 1, device=parents.device)
    _first_bad("parents", parents, (parents < -1) | (parents >= node), "a parent must be -1 or a node before it")
    real = parents >= 0
    parent_real = torch.where(real, torch.cat([real.new_ones(batch, 1), real], 1).gather(1, parents.clamp(min=0)), True)
    _first_bad("parents", parents, ~parent_real, "the parent is a padding node")
    tokens = draft_tokens.long()
    _first_bad(
        "draft_tokens", tokens, real & ((tokens < 0) | (tokens >= vocab_size)), f"out of range for V={vocab_size}"
    )
    probs = target_probs[torch.cat([real.new_ones(batch, 1), real], 1)].double()
    if bool((probs < 0).any() | ~torch.isfinite(probs).all()) or bool(((probs.sum(-1) - 1).abs() > 1e-3).any()):
        raise ValueError("target_probs has a real node's row that is negative, not finite or does not sum to 1")
    safe = tokens.clamp(min=0)
    if rule == "rsd":
        sibling = (parents[:, :, None] == parents[:, None, :]) & real[:, :, None] & real[:, None, :]
        earlier = torch.ones(num_nodes, num_nodes, dtype=torch.bool, device=parents.device).tril(-1)
        repeats = (sibling & earlier & (safe[:, :, None] == safe[:, None, :])).any(2)
        _first_bad("draft_tokens", tokens, repeats, "repeats a sibling's token; rule 'rsd' needs them distinct")
    if draft_probs is not None and rule in USES_DRAFT_PROBS:
        q_at = draft_probs.gather(2, safe[:, :, None])[:, :, 0]
        _first_bad("draft_tokens", tokens, real & ~(q_at > 0), "has draft probability 0 in draft_probs")


def _first_bad(name: str, values: torch.Tensor, bad: torch.Tensor, why: str) -> None:
    if bool(bad.any()):
        index = tuple(int(i) for i in bad.nonzero()[0])
        raise ValueError(f"{name}{list(index)}={values[index].item()!r}: {why}")
