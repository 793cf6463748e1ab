"""Tree verifiers with a rare edge, for the tree contract (specref.mutants.trees catalogues them).

They live outside specref/conformance so that the forced edge probe's replay (edges/locate.py), which names the
first line outside the harness, names their line.
"""

from __future__ import annotations

import torch

from ..randomness import inverse_cdf
from ..reference.tree import verify_tree


class _CoinsLe:
    """The walk's randomness from float32 coins [N+1] (specref.reference.tree's Injected convention: accept tests
    take u_0, u_1, ... in walk order, u_N the final draw), with a non-strict accept test."""

    def __init__(self, coins: torch.Tensor):
        self.coins, self.used = coins, 0

    def accept(self, ratio) -> bool:
        coin = self.coins[self.used]
        self.used += 1
        return bool(coin <= ratio)  # the edge: at coin = 0 (2^-24 per test) a child of ratio 0 is accepted

    def categorical(self, weights) -> int:
        return inverse_cdf(weights, float(self.coins[-1]))


def tree_accept_le_fp32(target_probs, draft_probs, draft_tokens, parents, generator=None, *, return_nodes=False,
                        uniforms=None):  # fmt: skip
    """mss (SpecInfer) per row whose accept test is `u <= p/q` on float32 uniforms, as SGLang's tree kernel's
    `coin <= prob_acc`: at u = 0 exactly (2^-24 per accept test on CPU) a child of target probability 0 is accepted.
    Exact otherwise. `uniforms=` [B, N+1] replaces the draw (tests; the catalogue does not declare it)."""
    batch, n = parents.shape
    coins = torch.rand(batch, n + 1, generator=generator) if uniforms is None else uniforms.float()  # [B, N+1]
    target, draft = target_probs.double().tolist(), draft_probs.double().tolist()
    tokens_in, parents_in = draft_tokens.tolist(), parents.tolist()
    tokens = torch.full((batch, n + 1), -1, dtype=torch.long)
    nodes = torch.full((batch, n), -1, dtype=torch.long)
    for b in range(batch):
        emitted, path = verify_tree(target[b], draft[b], tokens_in[b], parents_in[b], _CoinsLe(coins[b]), rule="mss",
                                    validate=False, return_nodes=True)  # fmt: skip
        tokens[b, : len(emitted)] = torch.tensor(emitted)
        nodes[b, : len(path)] = torch.tensor(path, dtype=torch.long)
    return (tokens, nodes) if return_nodes else tokens
