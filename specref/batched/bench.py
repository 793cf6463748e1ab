"""Benchmark of `specref.batched.verify` against baselines, in one run: `python -m specref.batched.bench`.

Compared, on the same inputs (`--quick`: three cases):
  * batched       specref.batched.verify(validate=False), with the fused kernel of `specref.batched.kernels` where
                  it applies (the report says which)
  * torch ops     the same engine with the fused kernel off (SPECREF_KERNELS=0): its accept tests and final draw
                  by torch operations
  * naive         a plain torch verifier: full [B, g, V] residual, division by the sum, torch.multinomial
  * transformers  transformers.generation.utils._speculative_sampling looped over the rows (it takes logits: we
                  pass log-probabilities); rows past --hf-rows are extrapolated linearly and marked so
  * floor         the memory floor: one read of the bytes the engine must read, i.e. two V-rows per batch row
                  (the target and draft rows at the first rejection), timed as a sum over strided views of the
                  inputs; a reduction reads each byte once and writes nothing, the least any verifier can do
  * flashinfer    flashinfer.sampling.chain_speculative_sampling, on CUDA when importable

Each timing is the median of --repeats calls after warm-up; on CPU the last-level cache is flushed before every
call so that every method reads its inputs from memory, as the floor does. Writes reports/bench.md and bench.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import time
from pathlib import Path

from ..extras import TORCH, TRANSFORMERS, exit_if_missing

if __name__ == "__main__":  # before torch is imported: the baselines need transformers, checked before any timing
    exit_if_missing("python -m specref.batched.bench", TORCH, TRANSFORMERS)

import torch  # noqa: E402

from . import chain, kernels  # noqa: E402

GRID = {"batch": (1, 64, 512), "gamma": (1, 4, 8), "vocab": (32000, 128256), "dtype": ("fp32", "bf16")}
QUICK = [(64, 4, 32000, "fp32"), (1, 1, 32000, "bf16"), (64, 4, 32000, "bf16")]
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
#: Spec-sheet HBM bandwidth (bytes/s) by device-name fragment, for the CUDA bandwidth fraction.
HBM_PEAK = {"H200": 4.8e12, "H100": 3.35e12, "A100": 2.0e12, "L40S": 8.64e11, "A10G": 6.0e11, "L4": 3.0e11}
#: Repeats shrink (to no fewer than 3) so that one method of one case takes about this long.
MAX_SECONDS_PER_METHOD = 3.0
TARGETS = "CPU B=64 g=4 V=32000 fp32: >= 30x transformers looped, <= 3x the memory floor"


def make_inputs(batch, gamma, vocab, dtype, device, seed=0):
    gen = torch.Generator(device=device).manual_seed(seed)
    target = torch.softmax(torch.randn(batch, gamma + 1, vocab, generator=gen, device=device) * 2, -1)
    draft = torch.softmax(0.5 * torch.log(target[:, :gamma]) + torch.randn(batch, gamma, vocab, generator=gen,
                                                                            device=device), -1)  # fmt: skip
    tokens = torch.multinomial(draft.reshape(-1, vocab), 1, generator=gen).view(batch, gamma)
    return target.to(dtype), draft.to(dtype), tokens


def naive_verify(target_probs, draft_probs, draft_tokens, generator):
    """The textbook vectorisation: every residual [B, g, V] materialised and normalised, then torch.multinomial."""
    p, q = target_probs.float(), draft_probs.float()  # copies only for bf16 inputs
    batch, rows, _ = p.shape
    gamma = rows - 1
    batch_index = torch.arange(batch, device=p.device)
    p_d = p[:, :gamma].gather(2, draft_tokens[..., None]).squeeze(-1)
    q_d = q.gather(2, draft_tokens[..., None]).squeeze(-1)
    u = torch.rand(batch, gamma, generator=generator, device=p.device)
    num_accepted = (u < p_d / q_d).int().cumprod(1).sum(1)  # [B]
    residual = (p[:, :gamma] - q).clamp_(min=0)  # [B, g, V]
    residual /= residual.sum(-1, keepdim=True).clamp_(min=torch.finfo(residual.dtype).tiny)
    row = residual[batch_index, num_accepted.clamp(max=gamma - 1)]  # [B, V]
    fallback = (num_accepted == gamma) | (row.sum(-1) == 0)  # bonus row, or an empty residual
    row = torch.where(fallback[:, None], p[batch_index, num_accepted], row)
    final = torch.multinomial(row, 1, generator=generator)
    drafts = torch.cat([draft_tokens, draft_tokens[:, :1]], 1)
    out = torch.where(torch.arange(rows, device=p.device) < num_accepted[:, None], drafts, -1)
    return out.scatter_(1, num_accepted[:, None].long(), final)


def torch_ops_verify(target_probs, draft_probs, draft_tokens, generator):
    """specref.batched.verify with the fused kernel switched off: its final draw by torch operations alone."""
    enabled, kernels.ENABLED = kernels.ENABLED, False
    try:
        return chain.verify(target_probs, draft_probs, draft_tokens, generator, validate=False)
    finally:
        kernels.ENABLED = enabled


def transformers_looped(target_probs, draft_probs, draft_tokens, rows):
    """transformers' kernel on the first `rows` rows, one call per row (its batch dimension is 1)."""
    from transformers.generation.utils import _speculative_sampling

    gamma = draft_tokens.shape[1]
    for b in range(rows):
        _speculative_sampling(
            draft_tokens[b : b + 1], torch.log(draft_probs[b : b + 1].float()), gamma,
            torch.log(target_probs[b : b + 1].float()),
        )  # fmt: skip


def read_once(rows: torch.Tensor) -> torch.Tensor:
    """Read every byte of rows [B, V] once, with torch's fastest reduction: fp32 sum. 2-byte rows are viewed as fp32
    pairs (torch's bf16 sum of a strided view is far slower than memory), so the floor stays a floor."""
    if rows.element_size() == 2 and rows.shape[-1] % 2 == 0:
        rows = rows.view(torch.float32)
    return rows.sum()


def flashinfer_verify():
    try:
        from flashinfer.sampling import chain_speculative_sampling
    except Exception:  # noqa: BLE001 - any import failure means "not available"
        return None

    def run(target_probs, draft_probs, draft_tokens, generator):
        return chain_speculative_sampling(draft_probs.float(), draft_tokens.int(), target_probs.float())

    return run


class Timer:
    """Median seconds of a call, caches flushed before each. clock="cpu" times this thread's CPU time (CPU devices
    only): on a loaded machine wall time counts the waits for a core, CPU time mostly does not."""

    def __init__(self, device, repeats, clock="wall"):
        self.device, self.repeats = device, repeats
        self.now = time.thread_time if clock == "cpu" and device.type == "cpu" else time.perf_counter
        # A buffer larger than the last-level cache; writing it evicts the inputs between calls.
        self.flush_buffer = torch.empty(64 * 2**20 // 4) if device.type == "cpu" else None

    def __call__(self, fn, repeats=None):
        self.sync()
        start = self.now()
        fn()  # warm-up
        self.sync()
        warm = self.now() - start
        repeats = max(3, min(repeats or self.repeats, int(MAX_SECONDS_PER_METHOD / max(warm, 1e-9))))
        times = []
        for _ in range(repeats):
            if self.flush_buffer is not None:
                self.flush_buffer.add_(1.0)
            self.sync()
            start = self.now()
            fn()
            self.sync()
            times.append(self.now() - start)
        return statistics.median(times)

    def sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)


def available_memory(device) -> int:
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    with open("/proc/meminfo") as meminfo:
        fields = dict(line.split(":", 1) for line in meminfo)
    return int(fields["MemAvailable"].split()[0]) * 1024


def bench_case(batch, gamma, vocab, dtype_name, device, timer, hf_rows):
    dtype = DTYPES[dtype_name]
    # Inputs, their fp32 construction and the naive engine's [B, g, V] residual, with some slack.
    needed = int(2.5 * (2 * gamma + 1) * batch * vocab * 4)
    if needed > 0.8 * available_memory(device):
        return {"batch": batch, "gamma": gamma, "vocab": vocab, "dtype": dtype_name,
                "skipped": f"needs ~{needed / 2**30:.1f} GiB, more than 80% of the memory available"}  # fmt: skip
    target, draft, tokens = make_inputs(batch, gamma, vocab, dtype, device)
    gen = torch.Generator(device=device).manual_seed(1)
    floor_bytes = 2 * batch * vocab * target.element_size()
    case = {"batch": batch, "gamma": gamma, "vocab": vocab, "dtype": dtype_name, "floor_bytes": floor_bytes}
    seconds = {
        "batched": timer(lambda: chain.verify(target, draft, tokens, gen, validate=False)),
        "naive": timer(lambda: naive_verify(target, draft, tokens, gen)),
        "floor": timer(lambda: (read_once(target[:, 0]), read_once(draft[:, 0]))),
    }
    if kernels.status(device).startswith(("compiled", "triton")):
        seconds["batched_torch_ops"] = timer(lambda: torch_ops_verify(target, draft, tokens, gen))
    rows = min(batch, hf_rows)
    seconds["transformers"] = timer(lambda: transformers_looped(target, draft, tokens, rows), repeats=3) * batch / rows
    case["transformers_extrapolated_from_rows"] = rows if rows < batch else None
    flashinfer = flashinfer_verify() if device.type == "cuda" else None
    if flashinfer is not None:
        try:
            seconds["flashinfer"] = timer(lambda: flashinfer(target, draft, tokens, gen))
        except Exception as error:  # noqa: BLE001 - report, do not abort the grid
            case["flashinfer_error"] = repr(error)[:200]
    case["seconds"] = seconds
    case["rows_per_s"] = {name: batch / s for name, s in seconds.items() if name != "floor"}
    case["ratios"] = {
        "transformers_over_batched": seconds["transformers"] / seconds["batched"],
        "naive_over_batched": seconds["naive"] / seconds["batched"],
        "batched_over_floor": seconds["batched"] / seconds["floor"],
    }
    if "batched_torch_ops" in seconds:
        case["ratios"]["torch_ops_over_batched"] = seconds["batched_torch_ops"] / seconds["batched"]
    if "flashinfer" in seconds:
        case["ratios"]["flashinfer_over_batched"] = seconds["flashinfer"] / seconds["batched"]
    if device.type == "cuda":
        peak = next((bw for name, bw in HBM_PEAK.items() if name in torch.cuda.get_device_name(device)), None)
        achieved = floor_bytes / seconds["batched"]
        case["hbm"] = {"bytes_per_s": achieved, "peak": peak, "fraction": achieved / peak if peak else None}
    return case


def kernel_label(device) -> str:
    status = kernels.status(device)
    if status.startswith("compiled"):
        return "the C kernel (specref/batched/kernels/block_sums.c; chains: the whole verification in one call)"
    if status.startswith("triton"):
        return "the Triton kernel (" + status + ")"
    return "torch operations (fused kernel " + status + ")"


def environment(device, threads):
    info = {
        "torch": torch.__version__,
        "device": str(device),
        "threads": threads,
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "block_sums": kernel_label(device),
    }
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    try:
        info["load_average"] = os.getloadavg()
    except OSError:
        pass
    return info


def write_reports(results, env, out_dir: Path):
    out_dir.mkdir(parents=True, exist_ok=True)
    report = {"environment": env, "targets": TARGETS, "cases": results}
    (out_dir / "bench.json").write_text(json.dumps(report, indent=2))
    lines = [
        "# Batched verify benchmark",
        "",
        f"torch {env['torch']} on {env.get('gpu', env['processor'])} ({env['device']}), {env['threads']} thread(s), "
        f"{env['cpu_count']} CPUs, load average at the end {env.get('load_average')}, "
        f"{env.get('clock', 'wall')} clock. Medians; CPU caches flushed "
        "before every call. Rows/s = verified sequences per second. Floor = one read of the two V-rows per batch "
        "row that the engine must read, timed as torch's fastest one-pass read (a sum), so a kernel that streams "
        "faster than that sum shows a ratio below 1. Block sums of the final draw: " + env.get("block_sums", "?") + ". "
        "Targets: " + TARGETS + ".",
        "",
        *([env["note"], ""] if env.get("note") else []),
        "| B | g | V | dtype | batched rows/s | naive rows/s | transformers rows/s | transformers / batched "
        "| naive / batched | batched / floor | extra |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for case in results:
        if "skipped" in case:
            lines.append(f"| {case['batch']} | {case['gamma']} | {case['vocab']} | {case['dtype']} | skipped: "
                         f"{case['skipped']} | | | | | | |")  # fmt: skip
            continue
        r, ratios = case["rows_per_s"], case["ratios"]
        extra = []
        if case["transformers_extrapolated_from_rows"]:
            extra.append(f"transformers from {case['transformers_extrapolated_from_rows']} rows")
        if "hbm" in case and case["hbm"]["fraction"] is not None:
            extra.append(f"HBM {case['hbm']['fraction']:.0%} of peak")
        if "torch_ops_over_batched" in ratios:
            extra.append(f"without the kernel {ratios['torch_ops_over_batched']:.2f}x time")
        if "flashinfer" in r:
            extra.append(f"flashinfer {r['flashinfer']:.3g} rows/s ({ratios['flashinfer_over_batched']:.2f}x time)")
        if "flashinfer_error" in case:
            extra.append("flashinfer failed: " + case["flashinfer_error"])
        lines.append(
            f"| {case['batch']} | {case['gamma']} | {case['vocab']} | {case['dtype']} | {r['batched']:.3g} "
            f"| {r['naive']:.3g} | {r['transformers']:.3g} | {ratios['transformers_over_batched']:.1f}x "
            f"| {ratios['naive_over_batched']:.1f}x | {ratios['batched_over_floor']:.2f}x | {'; '.join(extra)} |"
        )
    (out_dir / "bench.md").write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specref.batched.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few cases for a smoke run")
    parser.add_argument("--out", default="reports", help="directory for bench.md and bench.json")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--hf-rows", type=int, default=16, help="rows timed for the transformers loop")
    parser.add_argument("--only-dtype", choices=sorted(DTYPES), help="run only the grid cases of this dtype")
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall", help="cpu: thread CPU time (loaded CPUs)")
    args = parser.parse_args(argv)
    exit_if_missing(parser.prog, TRANSFORMERS)  # main() called directly, not through `python -m`
    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    timer = Timer(device, args.repeats, args.clock)
    cases = QUICK if args.quick else [
        (b, g, v, d) for d in GRID["dtype"] for v in GRID["vocab"] for g in GRID["gamma"] for b in GRID["batch"]
    ]  # fmt: skip
    cases = [case for case in cases if args.only_dtype in (None, case[3])]
    results = []
    for batch, gamma, vocab, dtype_name in cases:
        case = bench_case(batch, gamma, vocab, dtype_name, device, timer, args.hf_rows)
        results.append(case)
        if "skipped" in case:
            print(f"B={batch:4d} g={gamma} V={vocab:6d} {dtype_name}: skipped, {case['skipped']}", flush=True)
            continue
        r = case["ratios"]
        print(
            f"B={batch:4d} g={gamma} V={vocab:6d} {dtype_name}: batched {case['rows_per_s']['batched']:10.4g} rows/s, "
            f"transformers/batched {r['transformers_over_batched']:7.1f}x, "
            f"naive/batched {r['naive_over_batched']:5.1f}x, "
            f"batched/floor {r['batched_over_floor']:5.2f}x"
            + (f", without kernel {r['torch_ops_over_batched']:4.2f}x" if "torch_ops_over_batched" in r else ""),
            flush=True,
        )
    env = environment(device, args.threads)
    env["clock"] = args.clock if device.type == "cpu" else "wall"
    write_reports(results, env, Path(args.out))
    return 0 if all(math.isfinite(c["seconds"]["batched"]) for c in results if "seconds" in c) else 1


if __name__ == "__main__":
    raise SystemExit(main())
