"""The batched tree engine: the tree rules of `specref.reference.tree` for B trees at once, in torch.

Contract: `specref.tree_contract` (verify_tree [B, N+1, V], [B, N, V] | None, [B, N], [B, N] -> [B, D+1]).
Rules: mss, rsd, target_only, sample_match, as in `specref.reference.tree`.

Coupling. With the same uniforms [B, N+1] it emits the reference's tokens, token for token, on float64 inputs:
the accept tests consume u_0, u_1, ... in the walk's order and u_N feeds the final draw (mss, rsd, target_only);
sample_match's draw at depth d uses u_d. The engine does the reference's IEEE operations: a residual's total is
a sequential sum (torch.cumsum's last entry) on float64, the ratio r(x) / q(x) of normalised rows, and the
inverse CDF of `specref.randomness`. fp32, fp16 and bf16 inputs run in fp32 (totals by torch.sum, the final draw's
partial sums in float64). On CUDA the cumsum is a parallel scan: equal up to ties within rounding.

Cost. No Python loop over B. The walk is a loop over depth (at most D + 1 steps; it ends when every row has
stopped) and, inside it, over sibling rank where the rule is sequential: mss and rsd update a [R, V] residual
per rejected sibling, target_only works on the [R, W] target probabilities of the children and only builds a
[B, V] row for the final draw, sample_match draws once per depth. R is the number of rows still walking: the
rows that stopped are dropped (one host sync per depth and per sibling rank).
"""

from __future__ import annotations

import torch

from .batched import draw_uniforms
from .batched_validation import compute_dtype
from .tree_contract import TreeStructure, check_tree, structure

__all__ = ["verify_tree", "inverse_cdf"]


def verify_tree(
    target_probs: torch.Tensor,  # [B, N+1, V]  p at the root and at every node
    draft_probs: torch.Tensor | None,  # [B, N, V]  the law each node was drawn from; None: deterministic
    draft_tokens: torch.Tensor,  # [B, N]  (padding nodes: ignored)
    parents: torch.Tensor,  # [B, N]  parent node of nodes 1..N; -1 marks padding
    generator: torch.Generator | None = None,
    *,
    rule: str,
    uniforms: torch.Tensor | None = None,  # [B, N+1] in [0, 1); replaces the generator's draw
    validate: bool = True,
    return_nodes: bool = False,
):
    """Verify B draft trees by `rule`; return tokens [B, D+1] (and the accepted nodes [B, D] if return_nodes)."""
    if validate:
        check_tree(target_probs, draft_probs, draft_tokens, parents, uniforms, rule)
    batch, num_nodes = parents.shape
    device = target_probs.device
    dtype = compute_dtype(target_probs.dtype)
    if uniforms is None:
        if generator is None:
            raise ValueError("generator=None and uniforms=None: one of them is needed")
        uniforms = draw_uniforms(batch, num_nodes, generator, device, dtype=dtype)
    walk = _Walk(target_probs, draft_probs, draft_tokens.long(), structure(parents.to(device)), uniforms.to(dtype))
    tokens, nodes = walk.run(rule)
    return (tokens, nodes) if return_nodes else tokens


def inverse_cdf(weights: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """[R] draws by the convention of `specref.randomness.inverse_cdf` from unnormalised weights [R, V] (float64
    partial sums); a row without positive weight returns -1."""
    weights, u = weights.double(), u.double()
    vocab_size = weights.shape[1]
    cumulative = torch.cumsum(weights, dim=-1)  # [R, V]
    threshold = (u * cumulative[:, -1])[:, None]
    positive = weights > 0
    hit = positive & (cumulative > threshold)
    first_hit = hit.to(torch.uint8).argmax(dim=1)
    last_positive = vocab_size - 1 - positive.flip(1).to(torch.uint8).argmax(dim=1)
    return torch.where(hit.any(dim=1), first_hit, torch.where(positive.any(dim=1), last_positive, -1))


def _total(weights: torch.Tensor) -> torch.Tensor:
    """[R] row sums: sequential on float64 (the reference's left-to-right sum), torch.sum otherwise."""
    return weights.cumsum(-1)[:, -1] if weights.dtype == torch.float64 else weights.sum(-1)


class _Walk:
    """State of the walk for the whole batch; `run` returns (tokens [B, D+1], nodes [B, D])."""

    def __init__(self, target_probs, draft_probs, draft_tokens, tree: TreeStructure, uniforms):
        self.target_probs, self.draft_probs, self.draft_tokens = target_probs, draft_probs, draft_tokens
        self.tree, self.uniforms = tree, uniforms  # uniforms [B, N+1] in the compute dtype
        self.dtype = uniforms.dtype
        batch, num_nodes = draft_tokens.shape
        self.device = target_probs.device
        self.vocab_size = target_probs.shape[2]
        self.num_nodes = num_nodes
        depth = tree.max_depth
        self.tokens = torch.full((batch, depth + 1), -1, dtype=torch.long, device=self.device)
        self.nodes = torch.full((batch, depth), -1, dtype=torch.long, device=self.device)
        self.node = torch.zeros(batch, dtype=torch.long, device=self.device)  # current node
        self.used = torch.zeros(batch, dtype=torch.long, device=self.device)  # accept tests made (uniforms used)
        self.final_weights = torch.zeros(batch, self.vocab_size, dtype=self.dtype, device=self.device)
        self.stop_depth = torch.zeros(batch, dtype=torch.long, device=self.device)

    def run(self, rule: str):
        step = {"mss": self._residual_rule, "rsd": self._residual_rule, "target_only": self._target_only,
                "sample_match": self._sample_match}[rule]  # fmt: skip
        rows = torch.arange(self.node.shape[0], device=self.device)
        for depth in range(self.tree.max_depth + 1):
            if rows.numel() == 0:
                break
            kids = self.tree.children[rows, self.node[rows]]  # [R, W]
            p = self.target_probs[rows, self.node[rows]].to(self.dtype)  # [R, V]
            chosen = step(rule, rows, kids, p, depth)  # [R] accepted child, -1 where the row stops here
            moved = chosen >= 0
            moving = rows[moved]
            self.node[moving] = chosen[moved]
            if depth < self.tree.max_depth:
                self.tokens[moving, depth] = self.draft_tokens[moving, chosen[moved] - 1]
                self.nodes[moving, depth] = chosen[moved]
            self.stop_depth[rows[~moved]] = depth
            rows = moving
        if rule != "sample_match":  # one final draw per row, from the weights left where it stopped
            final = inverse_cdf(self.final_weights, self.uniforms[:, self.num_nodes])
            self.tokens.scatter_(1, self.stop_depth[:, None], final[:, None])
        return self.tokens, self.nodes

    def _stop(self, rows, weights, p):
        empty = ~(weights > 0).any(-1, keepdim=True)
        self.final_weights[rows] = torch.where(empty, p, weights)

    def _child_tokens(self, rows, kids):
        tokens = self.draft_tokens[rows[:, None], (kids - 1).clamp(min=0)]  # [R, W]
        return torch.where(kids >= 0, tokens, 0)  # no child: token 0, never used

    def _draft_rows(self, rows, child, x):
        """[R, V] draft rows of the children `child` (point masses at x when draft_probs is None)."""
        if self.draft_probs is None:
            return torch.zeros(len(rows), self.vocab_size, dtype=self.dtype, device=self.device).scatter_(
                1, x[:, None], 1.0
            )
        return self.draft_probs[rows, (child - 1).clamp(min=0)].to(self.dtype)

    def _residual_rule(self, rule, rows, kids, p, depth):
        """mss and rsd: r = p; per sibling accept with min(1, r(x)/q(x)), else r = norm((r - q)_+)."""
        num_rows, width = kids.shape
        chosen = torch.full((num_rows,), -1, dtype=torch.long, device=self.device)
        r, weights = p, p  # [R, V]: the normalised residual and the final draw's weights
        x_all = self._child_tokens(rows, kids)  # [R, W]
        live = torch.arange(num_rows, device=self.device)  # rows still testing (index into this step's rows)
        for k in range(width):
            live = live[kids[live, k] >= 0]
            if live.numel() == 0:
                break
            child, x = kids[live, k], x_all[live, k]
            q = self._draft_rows(rows[live], child, x)  # [L, V]
            if rule == "rsd" and k > 0:  # q without the tried tokens, renormalised
                q = q.scatter(1, x_all[live, :k], 0.0)
                q = q / _total(q)[:, None]
            u = self.uniforms[rows[live], self.used[rows[live]]]
            self.used[rows[live]] += 1
            ratio = r[live].gather(1, x[:, None])[:, 0] / q.gather(1, x[:, None])[:, 0]
            accepted = u < ratio
            chosen[live[accepted]] = child[accepted]
            rejected = ~accepted
            live, q = live[rejected], q[rejected]
            w = (r[live] - q).clamp_(min=0)
            w = torch.where((w > 0).any(-1, keepdim=True), w, p[live])  # numerically empty: p
            if k == 0:
                r, weights = r.clone(), weights.clone()
            weights[live] = w
            r[live] = w / _total(w)[:, None]
        stopped = chosen < 0
        self._stop(rows[stopped], weights[stopped], p[stopped])
        return chosen

    def _target_only(self, rule, rows, kids, p, depth):
        """Accept c_k with probability p(x_k) / p(untried); skip duplicate siblings; emit from p without the tried."""
        num_rows, width = kids.shape
        valid = kids >= 0
        x = self._child_tokens(rows, kids)  # [R, W]
        earlier = torch.ones(width, width, dtype=torch.bool, device=self.device).tril(-1)
        duplicate = ((x[:, :, None] == x[:, None, :]) & valid[:, None, :] & earlier).any(-1)  # [R, W]
        p_x = p.gather(1, x)  # [R, W]
        mass = torch.ones(num_rows, dtype=self.dtype, device=self.device)
        chosen = torch.full((num_rows,), -1, dtype=torch.long, device=self.device)
        for k in range(width):  # sequential: each rejection lowers p(untried)
            test = valid[:, k] & ~duplicate[:, k] & (chosen < 0)  # [R]
            u = self.uniforms[rows, self.used[rows].clamp(max=self.num_nodes)]
            self.used[rows] += test.long()
            ratio = torch.where(mass > 0, p_x[:, k] / mass, 0)
            accepted = test & (u < ratio)
            chosen = torch.where(accepted, kids[:, k], chosen)
            mass = torch.where(test & ~accepted, mass - p_x[:, k], mass)
        stopped = chosen < 0
        weights = torch.cat([p[stopped], p.new_zeros(int(stopped.sum()), 1)], 1)  # a spare column for padding
        weights.scatter_(1, torch.where(valid[stopped], x[stopped], self.vocab_size), 0.0)
        self._stop(rows[stopped], weights[:, :-1], p[stopped])
        return chosen

    def _sample_match(self, rule, rows, kids, p, depth):
        """y ~ p with u_depth; follow the first child whose token is y, else emit y."""
        y = inverse_cdf(p, self.uniforms[rows, depth])  # [R]
        match = (self._child_tokens(rows, kids) == y[:, None]) & (kids >= 0)  # [R, W]
        first = match.to(torch.uint8).argmax(1)
        chosen = torch.where(match.any(1), kids.gather(1, first[:, None])[:, 0], -1)
        stopped = chosen < 0
        self.tokens[rows[stopped], depth] = y[stopped]
        return chosen
