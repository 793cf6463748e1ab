"""The batched tree engine: the tree rules of `specref.reference.tree` for B trees at once, in torch.

Contract: `specref.tree_contract` (verify_tree [B, N+1, V], [B, N, V] | None, [B, N], [B, N] -> [B, D+1]).
Rules: mss, rsd, target_only, sample_match, as in `specref.reference.tree`.

Coupling. With the same uniforms [B, N+1] it emits the reference's tokens (and accepted nodes), token for token,
on float64 inputs: the accept tests consume u_0, u_1, ... in the walk's order and u_N feeds the final draw (mss,
rsd, target_only); sample_match's draw at depth d uses u_d. It does the reference's IEEE operations: r = w / mass
entry by entry, a residual's mass is a sequential sum (torch.cumsum's last entry), and the draws are the inverse
CDF of `specref.randomness` on a sequential float64 cumsum. fp32, fp16 and bf16 inputs run in fp32 (masses by
torch.sum; draws by a two-level inverse CDF with float64 partial sums, `inverse_cdf`). On CUDA the cumsum is a
parallel scan: equal up to ties within rounding.

Cost. No Python loop over B. The walk is a loop over depth (it ends when every row has stopped) and, inside it,
a loop over sibling rank where the rule is sequential. The rows still walking are kept compacted (one host sync
per depth and per rank). mss and rsd read one [V] target row per row and depth and, per rejected sibling, its
draft row and update the [V] residual; target_only reads the [W] target probabilities of the children and one
[V] row where the row stops; sample_match draws once per depth from the node's [V] target row. A row's final
draw happens at the depth where it stops.
"""

from __future__ import annotations

import torch

from ..tree_contract import TreeStructure, check_tree, structure
from . import kernels
from .chain import draw_uniforms
from .validation import compute_dtype

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
    if rule not in RULES:
        raise ValueError(f"rule={rule!r}: the batched tree engine runs {', '.join(RULES)}; "
                         "specref.reference.tree runs the others")  # fmt: skip
    if validate:
        check_tree(target_probs, draft_probs, draft_tokens, parents, uniforms, rule)
    batch, num_nodes = parents.shape
    device = target_probs.device
    dtype = compute_dtype(target_probs.dtype)
    if uniforms is None:
        if generator is None:
            raise ValueError("generator=None and uniforms=None: one of them is needed")
        uniforms = draw_uniforms(batch, num_nodes, generator, device, dtype=dtype)
    walked = kernels.tree_walk(target_probs, draft_probs, draft_tokens, parents, uniforms, rule)
    if walked is not None:  # the C walk (CPU): one call, each input row read once
        tokens, nodes, _ = walked
    else:
        tree = structure(parents.to(device))
        tokens, nodes = _Walk(target_probs, draft_probs, draft_tokens.long(), tree, uniforms.to(dtype)).run(rule)
    return (tokens, nodes) if return_nodes else tokens


def inverse_cdf(weights: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """[R] draws by the convention of `specref.randomness.inverse_cdf` from unnormalised weights [R, V]; a row
    without positive weight returns -1.

    float64 weights: one sequential float64 cumsum, the reference's own partial sums. Other dtypes: two levels,
    float64 sums of blocks of BLOCK weights pick the block, then float64 partial sums within it pick the token
    (the convention with the partial sums associated differently: equal up to ties within rounding)."""
    if weights.dtype == torch.float64:
        cumulative = torch.cumsum(weights, dim=-1)  # [R, V]
        threshold = (u.double() * cumulative[:, -1])[:, None]  # [R, 1]
        index = torch.searchsorted(cumulative, threshold, right=True).clamp_(max=weights.shape[1] - 1)  # [R, 1]
        # a sequential cumsum is monotone, so the first partial sum above the threshold has w > 0; the check
        # guards parallel scans (CUDA) and a threshold that rounds up to the total
        ok = (cumulative.gather(1, index) > threshold) & (weights.gather(1, index) > 0)
        token = index[:, 0]
    else:
        token, ok = _inverse_cdf_blocked(weights, u.double())
    if not bool(ok.all()):  # rare: redo those rows by a full float64 scan (and find the empty ones)
        rows = (~ok.view(-1)).nonzero()[:, 0]
        token = token.clone()
        token[rows] = _inverse_cdf_scan(weights[rows].double(), u[rows].double())
    return token


#: Tokens per block of the two-level draw of non-float64 weights.
#: The rules this engine runs (K-SEQ and traversal read the whole tree first: the reference runs them, this does not).
RULES = ("mss", "rsd", "target_only", "sample_match")
BLOCK = 256


def _inverse_cdf_blocked(weights, u):
    rows, vocab_size = weights.shape
    padded = torch.nn.functional.pad(weights, (0, -vocab_size % BLOCK)) if vocab_size % BLOCK else weights
    blocks = padded.view(rows, -1, BLOCK)  # [R, nb, BLOCK]
    block_cumulative = blocks.sum(-1).double().cumsum(-1)  # [R, nb]: fp32 block sums (a few 1e-7 of a block's mass)
    threshold = (u * block_cumulative[:, -1])[:, None]  # [R, 1]
    block = torch.searchsorted(block_cumulative, threshold, right=True).clamp_(max=blocks.shape[1] - 1)  # [R, 1]
    before = torch.where(block > 0, block_cumulative.gather(1, (block - 1).clamp(min=0)), 0.0)  # [R, 1]
    local = blocks[torch.arange(rows, device=weights.device), block[:, 0]].double()  # [R, BLOCK]
    partial = before + local.cumsum(-1)
    offset = torch.searchsorted(partial, threshold, right=True).clamp_(max=BLOCK - 1)  # [R, 1]
    ok = (partial.gather(1, offset) > threshold) & (local.gather(1, offset) > 0)
    return (block * BLOCK + offset)[:, 0], ok[:, 0]


def _inverse_cdf_scan(weights, u) -> torch.Tensor:
    """The convention by full scan: first j with w_j > 0 and cumsum_j > threshold, else the last positive j, else -1."""
    cumulative = torch.cumsum(weights, dim=-1)
    threshold = (u * cumulative[:, -1])[:, None]
    positive = weights > 0
    hit = positive & (cumulative > threshold)
    first_hit = hit.to(torch.uint8).argmax(dim=1)
    last_positive = weights.shape[1] - 1 - positive.flip(1).to(torch.uint8).argmax(dim=1)
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

    def run(self, rule: str):
        step = {"mss": self._residual_rule, "rsd": self._residual_rule, "target_only": self._target_only,
                "sample_match": self._sample_match}[rule]  # fmt: skip
        rows = torch.arange(self.node.shape[0], device=self.device)
        for depth in range(self.tree.max_depth + 1):
            if rows.numel() == 0:
                break
            kids = self.tree.children[rows, self.node[rows]]  # [R, W]
            chosen = step(rule, rows, kids, depth)  # [R] accepted child, -1 where the row stopped (and emitted)
            moved = chosen >= 0
            rows, chosen = rows[moved], chosen[moved]
            self.node[rows] = chosen
            if depth < self.tree.max_depth:
                self.tokens[rows, depth] = self.draft_tokens[rows, chosen - 1]
                self.nodes[rows, depth] = chosen
        return self.tokens, self.nodes

    def _target_rows(self, rows):
        return self.target_probs[rows, self.node[rows]].to(self.dtype)  # [R, V]

    def _emit(self, rows, weights, depth):
        """The final draw (u_N) of rows that stop at this depth, from their weights; numerically empty: from p."""
        if rows.numel() == 0:
            return
        u = self.uniforms[rows, self.num_nodes]
        token = inverse_cdf(weights, u)
        empty = token < 0
        if bool(empty.any()):
            token[empty] = inverse_cdf(self._target_rows(rows[empty]), u[empty])
        self.tokens[rows, depth] = token

    def _child_tokens(self, rows, kids):
        if self.num_nodes == 0:  # a batch of roots alone
            return torch.zeros_like(kids)
        tokens = self.draft_tokens[rows[:, None], (kids - 1).clamp(min=0)]  # [R, W]
        return torch.where(kids >= 0, tokens, 0)  # no child: token 0, never used

    def _draft_rows(self, rows, child, x):
        """[R, V] draft rows of the children `child` (point masses at x when draft_probs is None)."""
        if self.draft_probs is None:
            return torch.zeros(len(rows), self.vocab_size, dtype=self.dtype, device=self.device).scatter_(
                1, x[:, None], 1.0
            )
        return self.draft_probs[rows, child - 1].to(self.dtype)

    def _residual_rule(self, rule, rows, kids, depth):
        """mss and rsd: r = p; per sibling accept with min(1, r(x)/q(x)), else r = norm((r - q)_+).

        The rows still testing are kept compacted (`live` indexes this step's rows). r is kept as weights w and
        their mass, r = w / mass, which the reference computes entry by entry: the same IEEE operations."""
        width = kids.shape[1]
        chosen = torch.full((len(rows),), -1, dtype=torch.long, device=self.device)
        x_all = self._child_tokens(rows, kids)  # [R, W]
        live = torch.arange(len(rows), device=self.device)
        weights = self._target_rows(rows)  # [L, V]: the live rows' w (p before any rejection)
        mass = torch.ones(len(rows), dtype=self.dtype, device=self.device)  # r = p: p / 1 is p exactly
        for k in range(width + 1):
            has_child = kids[live, k] >= 0 if k < width else torch.zeros_like(live, dtype=torch.bool)
            if not bool(has_child.all()):  # no k-th child: these rows stop here and emit from their weights
                self._emit(rows[live[~has_child]], weights[~has_child], depth)
                keep = has_child.nonzero()[:, 0]
                live, weights, mass = live[keep], weights.index_select(0, keep), mass[keep]
            if live.numel() == 0:
                break
            child, x, at = kids[live, k], x_all[live, k], rows[live]
            q = None  # the children's [L, V] draft rows, read only where needed
            if rule == "rsd" and k > 0:  # q without the tried tokens, renormalised
                q = self._draft_rows(at, child, x).scatter_(1, x_all[live, :k], 0.0)  # a fresh copy
                q = q / _total(q)[:, None]
                q_x = q.gather(1, x[:, None])[:, 0]
            elif self.draft_probs is None:
                q_x = torch.ones_like(mass)  # point masses: q(x) = 1
            else:
                q_x = self.draft_probs[at, child - 1, x].to(self.dtype)
            u = self.uniforms[at, self.used[at]]
            self.used[at] += 1
            r_x = weights.gather(1, x[:, None])[:, 0] / mass
            accepted = u < r_x / q_x  # min(1, r(x) / q(x))
            if bool(accepted.any()):
                chosen[live[accepted]] = child[accepted]
                keep = (~accepted).nonzero()[:, 0]
                live, child, x, at, weights, mass = (
                    t.index_select(0, keep) for t in (live, child, x, at, weights, mass)
                )
                q = None if q is None else q.index_select(0, keep)
                if live.numel() == 0:
                    break
            if q is None:
                q = self._draft_rows(at, child, x)
            weights = (weights / mass[:, None]).sub_(q).clamp_(min=0)  # (r - q_k)_+
            mass = _total(weights)
            empty = mass == 0  # weights >= 0: an empty residual sums to 0
            if bool(empty.any()):  # numerically empty: p, normalised
                weights = torch.where(empty[:, None], self._target_rows(rows[live]), weights)
                mass = torch.where(empty, _total(weights), mass)
        return chosen

    def _target_only(self, rule, rows, kids, depth):
        """Accept c_k with probability p(x_k) / p(untried); skip duplicate siblings; emit from p without the tried."""
        num_rows, width = kids.shape
        valid = kids >= 0
        x = self._child_tokens(rows, kids)  # [R, W]
        earlier = torch.ones(width, width, dtype=torch.bool, device=self.device).tril(-1)
        duplicate = ((x[:, :, None] == x[:, None, :]) & valid[:, None, :] & earlier).any(-1)  # [R, W]
        p_x = self.target_probs[rows[:, None], self.node[rows][:, None], x].to(self.dtype)  # [R, W]
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
        stopped = (chosen < 0).nonzero()[:, 0]
        weights = self._target_rows(rows[stopped])  # [S, V], a fresh copy
        tried = valid[stopped].nonzero()  # [T, 2]: (stopped row, sibling rank) of every child
        weights[tried[:, 0], x[stopped][tried[:, 0], tried[:, 1]]] = 0  # p without the tried tokens
        self._emit(rows[stopped], weights, depth)
        return chosen

    def _sample_match(self, rule, rows, kids, depth):
        """y ~ p with u_depth; follow the first child whose token is y, else emit y."""
        y = inverse_cdf(self._target_rows(rows), self.uniforms[rows, depth])  # [R]
        match = (self._child_tokens(rows, kids) == y[:, None]) & (kids >= 0)  # [R, W]
        first = match.to(torch.uint8).argmax(1)
        chosen = torch.where(match.any(1), kids.gather(1, first[:, None])[:, 0], -1)
        stopped = chosen < 0
        self.tokens[rows[stopped], depth] = y[stopped]
        return chosen
