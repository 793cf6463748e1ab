"""The batched tree and block engines against the naive per-row loop: `python -m specref.batched.bench_tree`.

Case: an EAGLE-like tree (`tree_inputs.eagle_like_parents`: 60 nodes, depth 6, the root's top-10 children, then
10 nodes per depth under the likeliest nodes), B = 64, V = 32000, fp32; and block verification of chains of 6
at the same B and V. Per rule, the drafting it assumes: target_only on top-k children, mss on i.i.d. draws,
rsd on draws without replacement, sample_match on top-k children.

Compared, on the same inputs:
  * batched  specref.batched.tree.verify_tree / specref.batched.block.verify_block (validate=False)
  * naive    the same rule walked row by row in Python with torch operations on [V] rows (`naive_tree_verify`,
             `naive_block_verify`): what a straightforward port of the per-sequence algorithm does

Timings are medians (`specref.batched.bench.Timer`: CPU caches flushed before each call). Writes reports/bench_tree.md
and bench_tree.json.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import torch

from .. import tree_inputs
from . import block, kernels, tree
from .bench import Timer, environment, read_once

RULE_SCHEME = {"target_only": "topk", "mss": "iid", "rsd": "without_replacement", "sample_match": "topk"}


def make_tree_inputs(batch, vocab, scheme, device, seed=0, parents=None):
    gen = torch.Generator(device=device).manual_seed(seed)
    parents = torch.tensor([parents or tree_inputs.eagle_like_parents()] * batch, device=device)
    num_nodes = parents.shape[1]
    target = torch.softmax(torch.randn(batch, num_nodes + 1, vocab, generator=gen, device=device) * 2, -1)
    noise = torch.randn(batch, num_nodes + 1, vocab, generator=gen, device=device)
    draft_rows = torch.softmax(0.5 * torch.log(target) + noise, -1)
    del noise
    cpu_gen = torch.Generator().manual_seed(seed)
    if device.type == "cpu":
        cpu_gen = gen
    draft_probs, tokens = tree_inputs.draft_children(draft_rows, parents, scheme, cpu_gen if scheme != "iid" else gen)
    return target, draft_probs, tokens, parents


def naive_tree_verify(target_probs, draft_probs, draft_tokens, parents, generator, rule):
    """One Python walk per row, torch operations on [V] rows; torch.multinomial for the final draw."""
    out = []
    for b in range(parents.shape[0]):
        kids: dict[int, list[int]] = {}
        for i, parent in enumerate(parents[b].tolist(), start=1):
            if parent >= 0:
                kids.setdefault(parent, []).append(i)
        node, emitted = 0, []
        tokens = draft_tokens[b].tolist()
        while True:
            p = target_probs[b, node].float()
            children = kids.get(node, [])
            chosen, weights = None, p
            if rule == "sample_match":
                y = int(torch.multinomial(p, 1, generator=generator))
                chosen = next((c for c in children if tokens[c - 1] == y), None)
                if chosen is None:
                    emitted.append(y)
                    break
            elif rule == "target_only":
                mass, tried = 1.0, []
                for c in children:
                    x = tokens[c - 1]
                    if x in tried:
                        continue
                    u = float(torch.rand((), generator=generator, device=p.device))
                    if u < float(p[x]) / mass:
                        chosen = c
                        break
                    mass -= float(p[x])
                    tried.append(x)
                if chosen is None:
                    weights = p.clone()
                    weights[tried] = 0
            else:  # mss, rsd
                r, tried = p, []
                for c in children:
                    x = tokens[c - 1]
                    q = draft_probs[b, c - 1].float()
                    if rule == "rsd" and tried:
                        q = q.clone()
                        q[tried] = 0
                        q = q / q.sum()
                    u = float(torch.rand((), generator=generator, device=p.device))
                    if u < float(r[x] / q[x]):
                        chosen = c
                        break
                    weights = (r - q).clamp(min=0)
                    r = weights / weights.sum()
                    tried.append(x)
            if chosen is None:
                emitted.append(int(torch.multinomial(weights, 1, generator=generator)))
                break
            emitted.append(tokens[chosen - 1])
            node = chosen
        out.append(emitted)
    return out


def naive_block_verify(target_probs, draft_probs, draft_tokens, generator):
    """Block verification row by row, torch operations on [V] rows."""
    out = []
    gamma = draft_tokens.shape[1]
    for b in range(draft_tokens.shape[0]):
        p, q, x = target_probs[b].float(), draft_probs[b].float(), draft_tokens[b].tolist()
        weight = [1.0]
        for i in range(1, gamma + 1):
            weight.append(min(1.0, weight[i - 1] * float(p[i - 1, x[i - 1]] / q[i - 1, x[i - 1]])))
        h = [1.0]
        for i in range(1, gamma):
            r = float((weight[i] * p[i] - q[i]).clamp(min=0).sum())
            h.append(r / (r + 1 - weight[i]) if r > 0 else 0.0)
        h.append(weight[gamma])
        tau = max([i for i in range(1, gamma + 1) if float(torch.rand((), generator=generator)) < h[i]], default=0)
        final = p[gamma] if tau == gamma else (weight[tau] * p[tau] - q[tau]).clamp(min=0)
        out.append(x[:tau] + [int(torch.multinomial(final, 1, generator=generator))])
    return out


def floor_seconds(timer, inputs, rows: int):
    """The floor of a rule: one cold read of `rows` V-rows (torch's fastest one-pass read, as bench.py's floor), taken
    from the inputs in order (target_probs, then draft_probs: block verification reads more rows than target_probs
    holds). None where the rows read are unknown."""
    if rows is None:
        return None
    parts, left = [], rows
    for rows_of in inputs:
        if rows_of is not None and left > 0:
            flat = rows_of.reshape(-1, rows_of.shape[-1])
            parts.append(flat[: min(left, flat.shape[0])])
            left -= parts[-1].shape[0]
    return timer(lambda: [read_once(part) for part in parts])


def rows_read_tree(target, draft, tokens, parents, uniforms, rule):
    """The full V-rows the rule reads on these inputs (the C walk's count, on CPU copies), or None without it."""
    cpu = [None if t is None else t.cpu() for t in (target, draft, tokens, parents, uniforms)]
    walked = kernels.tree_walk(*cpu, rule)
    return None if walked is None else int(walked[2].sum())


def bench_tree_case(rule, batch, vocab, device, timer):
    target, draft, tokens, parents = make_tree_inputs(batch, vocab, RULE_SCHEME[rule], device)
    q = draft if rule in ("mss", "rsd") else None
    gen = torch.Generator(device=device).manual_seed(1)
    uniforms = torch.rand(batch, parents.shape[1] + 1, generator=gen, device=device)  # one walk for every timing
    rows = rows_read_tree(target, q, tokens, parents, uniforms, rule)
    seconds = {
        "batched": timer(
            lambda: tree.verify_tree(target, q, tokens, parents, rule=rule, uniforms=uniforms, validate=False)
        ),  # fmt: skip
        "floor": floor_seconds(timer, (target, q), rows),
        "naive": timer(lambda: naive_tree_verify(target, q, tokens, parents, gen, rule), repeats=3),
    }
    emitted = tree.verify_tree(target, q, tokens, parents, rule=rule, uniforms=uniforms, validate=False)
    mean_tokens = float((emitted >= 0).sum(1).float().mean())
    return {"case": f"tree {rule} ({RULE_SCHEME[rule]} drafts)", "batch": batch, "vocab": vocab, "nodes": 60,
            "depth": 6, "seconds": seconds, "rows_read": rows, "mean_tokens": mean_tokens,
            **ratios(seconds)}  # fmt: skip


def bench_block_case(batch, gamma, vocab, device, timer):
    from .bench import make_inputs

    target, draft, tokens = make_inputs(batch, gamma, vocab, torch.float32, device)
    gen = torch.Generator(device=device).manual_seed(1)
    uniforms = torch.rand(batch, gamma + 1, generator=gen, device=device)
    num_draft = torch.full((batch,), gamma, dtype=torch.long)
    walked = kernels.block_verify(target.cpu(), draft.cpu(), tokens.cpu(), num_draft, uniforms.cpu())
    rows = None if walked is None else int(walked[1].sum())
    seconds = {
        "batched": timer(lambda: block.verify_block(target, draft, tokens, uniforms=uniforms, validate=False)),
        "floor": floor_seconds(timer, (target, draft), rows),
        "naive": timer(lambda: naive_block_verify(target, draft, tokens, gen), repeats=3),
    }
    return {"case": f"block, chain of {gamma}", "batch": batch, "vocab": vocab, "nodes": gamma, "depth": gamma,
            "seconds": seconds, "rows_read": rows, **ratios(seconds)}  # fmt: skip


def ratios(seconds):
    floor = seconds.get("floor")
    return {"naive_over_batched": seconds["naive"] / seconds["batched"],
            "batched_over_floor": None if floor is None else seconds["batched"] / floor}  # fmt: skip


def write_reports(results, env, out_dir: Path):
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "bench_tree.json").write_text(json.dumps({"environment": env, "cases": results}, indent=2))
    lines = [
        "# Tree and block verification benchmark",
        "",
        f"torch {env['torch']} on {env.get('gpu', env['processor'])} ({env['device']}), {env['threads']} thread(s), "
        f"load average at the end {env.get('load_average')}, {env.get('clock', 'wall')} clock. Medians; CPU caches "
        "flushed before every call. Every timing of a rule uses the same injected uniforms (one walk). fp32 inputs. "
        f"Batched: {env.get('walk', '?')}. Naive = the same rule walked row by row with torch operations on [V] rows. "
        "Floor = one cold read of the V-rows the rule reads on these inputs (rows read, counted by the C walk): p "
        "where a node needs a full pass, and each rejected sibling's draft row (mss, rsd), at most once each; "
        "target_only reads p only where a row stops, sample_match p at every node it visits (its draw), block "
        "verification the rows from the top down to tau; the floor reads that many rows of target_probs, then "
        "draft_probs (`docs/batched.md`, Floors).",
        "",
        "| case | B | V | nodes | depth | rows read per batch row | batched ms | floor ms | batched / floor "
        "| naive ms | naive / batched |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in results:
        s = c["seconds"]
        shape = f"| {c['case']} | {c['batch']} | {c['vocab']} | {c['nodes']} | {c['depth']} | "
        rows = "?" if c["rows_read"] is None else f"{c['rows_read'] / c['batch']:.2f}"
        floor = "?" if s["floor"] is None else f"{1e3 * s['floor']:.2f}"
        over = "?" if c["batched_over_floor"] is None else f"{c['batched_over_floor']:.2f}x"
        lines.append(shape + f"{rows} | {1e3 * s['batched']:.2f} | {floor} | {over} | {1e3 * s['naive']:.1f} "
                     f"| {c['naive_over_batched']:.1f}x |")  # fmt: skip
    (out_dir / "bench_tree.md").write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specref.batched.bench_tree", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="target_only and mss only, B = 16")
    parser.add_argument("--out", default="reports", help="directory for bench_tree.md and bench_tree.json")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall", help="cpu: thread CPU time (loaded CPUs)")
    args, _ = parser.parse_known_args(argv)  # `nox -s bench -- ...` passes specref.batched.bench's options too
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    timer = Timer(device, args.repeats, args.clock)
    batch, vocab = (16, 32000) if args.quick else (64, 32000)
    rules = ("target_only", "mss") if args.quick else tuple(RULE_SCHEME)
    results = []
    for rule in rules:
        results.append(bench_tree_case(rule, batch, vocab, device, timer))
        print_case(results[-1])
    if not args.quick:
        results.append(bench_block_case(batch, 6, vocab, device, timer))
        print_case(results[-1])
    env = environment(device, args.threads)
    env["clock"] = args.clock if device.type == "cpu" else "wall"
    walk = (
        "the C walk (specref/batched/kernels/tree_walk.c)"
        if device.type == "cpu" and kernels.status(device).startswith("compiled")
        else "the torch walk"
    )
    env["walk"] = walk
    write_reports(results, env, Path(args.out))
    return 0 if all(math.isfinite(c["seconds"]["batched"]) for c in results) else 1


def print_case(c):
    s = c["seconds"]
    floor = "" if c["batched_over_floor"] is None else f", batched/floor {c['batched_over_floor']:5.2f}x"
    print(f"{c['case']:40s} B={c['batch']} V={c['vocab']}: batched {1e3 * s['batched']:8.2f} ms, "
          f"naive {1e3 * s['naive']:9.1f} ms, naive/batched {c['naive_over_batched']:6.1f}x{floor}",
          flush=True)  # fmt: skip


if __name__ == "__main__":
    raise SystemExit(main())
