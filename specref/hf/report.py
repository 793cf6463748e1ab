"""reports/e2e/: e2e.json (everything), e2e.md (tables), e2e.png (tokens/s and tau against g)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..stats.record import json_safe


def _fmt(x, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.{digits}g}"
    return str(x)


def _law_rows(laws: list[dict]) -> list[str]:
    lines = [
        "| pipeline | expected | N | support | bins | chi2 | p | alpha | detectable TV | empirical TV | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for law in laws:
        c = law["check"]
        d = c["details"]
        expected = "conforms" if law["expected_conforming"] else "must fail"
        verdict = ("pass" if c["passed"] else "FLAGGED") + ("" if law["as_expected"] else " (UNEXPECTED)")
        lines.append(
            f"| {law['adapter']} | {expected} | {c['n']} | {d['support']}/{d['outcomes']} | {d.get('bins', '-')} | "
            f"{_fmt(c['statistic'], 4)} | {_fmt(c['p_value'])} | {_fmt(c['alpha'])} | {_fmt(c['detectable_tv'])} | "
            f"{_fmt(d['empirical_tv'])} | {verdict} |"
        )
    return lines


def _tau_rows(taus: list[dict]) -> list[str]:
    lines = [
        "| g | cycles | tau measured (se) | tau predicted (se) | CI of difference | p | alpha | verdict |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for t in taus:
        c, d = t["check"], t["check"]["details"]
        lines.append(
            f"| {t['gamma']} | {c['n']} | {d['tau_measured']:.4f} ({d['tau_measured_se']:.4f}) | "
            f"{d['tau_predicted']:.4f} ({d['tau_predicted_se']:.4f}) | [{d['ci_low']:.4f}, {d['ci_high']:.4f}] | "
            f"{_fmt(c['p_value'])} | {_fmt(c['alpha'])} | {'pass' if c['passed'] else 'FAIL'} |"
        )
    return lines


def _speed_rows(rows: list[dict]) -> list[str]:
    lines = [
        "| g | tokens/s | tau | speed-up measured | predicted (latency model) | predicted (measured cycles) "
        "| T_draft ms | T_verify ms | T_target ms | cycles |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        g = "plain" if r["gamma"] == 0 else r["gamma"]
        lines.append(
            f"| {g} | {r['tokens_per_s']:.0f} | {r['tau']:.3f} | {r['measured_speedup']:.2f} | "
            f"{r['predicted_speedup']:.2f} | {r['cycle_predicted_speedup']:.2f} | {1e3 * r['t_draft']:.2f} | "
            f"{1e3 * r['t_verify']:.2f} | {1e3 * r['t_target']:.2f} | {r['cycles']:g} |"
        )
    return lines


def markdown(report: dict, png: bool = True) -> str:
    """e2e.md; png: e2e.png was drawn, so the page shows it."""
    m = report["models"]
    lines = [
        "# specref end-to-end report: tiny transformers models",
        "",
        f"All checks as expected: **{report['all_as_expected']}**. torch {report['torch']}, "
        f"transformers {report['transformers']}, seed {report['seed']}.",
        "",
        "## Models",
        f"- target: GPT-2, {m['target']['spec']['n_layer']} layers x {m['target']['spec']['n_embd']}, "
        f"{m['target']['params']} parameters; draft: {m['draft']['spec']['n_layer']} layer x "
        f"{m['draft']['spec']['n_embd']}, {m['draft']['params']} parameters; vocabulary {m['corpus']['vocab_size']}.",
        f"- trained on an order-{m['corpus']['order']} Markov corpus (Dirichlet {m['corpus']['concentration']} rows); "
        f"load or build: {m['load_or_build_seconds']:.1f} s; cache {m['cache']}.",
        f"- rebuild bit for bit: {m['rebuild_bit_for_bit']}.",
        "- acceptance rate a = mean sum_x min(p, q) over corpus contexts: "
        + ", ".join(f"{k}: {v:.3f}" for k, v in report["acceptance"].items())
        + ".",
        "",
        "## Law of n-token continuations against the target's exact processed law",
        f"n = {report['plan']['n_new']} new tokens, g = {report['plan']['gamma']}; Pearson chi-square over the V^n "
        f"outcomes, bins merged by expected counts. Budget: {report['budget']['total']} over "
        f"{report['budget']['checks']} checks ({report['budget']['method']}); detectable TV at power 0.999.",
        "",
        *_law_rows(report["laws"]),
        "",
        "## tau: measured against predicted from the models' own p/q",
        "Predicted: per cycle context, sum_k prod_{i<=k} min(1, p_i/q_i) on a fresh draft path (unbiased for "
        "sum_k sum_x prod min(p_i, q_i)); t interval on the paired differences.",
        "",
        *_tau_rows(report["tau"]),
        "",
        "Cross-check of the prediction against exact enumeration (specref.theory.accepted_at_least), g = 2:",
        "",
    ]
    for cross in report["tau_cross"]:
        c = cross["check"]
        lines.append(
            f"- context {cross['context']}: exact E[tau] = {cross['exact']:.4f}, estimate "
            f"{c['details']['mean']:.4f} (n = {c['n']}), p = {_fmt(c['p_value'])}: {'pass' if c['passed'] else 'FAIL'}"
        )
    lines += [
        "",
        "## Speed (CPU, one thread, recompute without KV cache)",
        "Latency model: L = (T_draft + T_verify) / tau per token step; predicted speed-up = T_target / L. "
        "'predicted (measured cycles)' uses the same costs with the cycle count actually needed "
        "(steps * T_target / (cycles * (T_draft + T_verify))): in a batch, every cycle waits for the slowest row. "
        f"Medians over {report['plan'].get('speed_repeats', 1)} interleaved repeats; a shared 2-core machine.",
        "",
        f"One prompt at a time ({report['plan']['speed_single_prompts']} prompts, "
        f"{report['plan']['speed_new']} new tokens each):",
        "",
        *_speed_rows(report["speed_single"]),
        "",
        f"Batch of {report['plan']['speed_batch']} prompts ({report['plan']['speed_new']} new tokens each):",
        "",
        *_speed_rows(report["speed_batch"]),
        "",
        *(["![tokens/s and tau against g](e2e.png)", ""] if png else []),
    ]
    return "\n".join(lines)


def plot(report: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for key, label in (("speed_single", "one prompt"), ("speed_batch", f"batch {report['plan']['speed_batch']}")):
        rows = report[key]
        spec = [r for r in rows if r["gamma"] > 0]
        line = left.plot(
            [r["gamma"] for r in spec], [r["tokens_per_s"] for r in spec], "o-", label=f"speculative, {label}"
        )
        left.axhline(rows[0]["tokens_per_s"], ls="--", color=line[0].get_color(), label=f"plain, {label}")
    left.set(xlabel="g (drafts per cycle)", ylabel="tokens/s", title="throughput")
    left.legend(fontsize=8)
    taus = report["tau"]
    gammas = [t["gamma"] for t in taus]
    right.errorbar(
        gammas,
        [t["check"]["details"]["tau_measured"] for t in taus],
        yerr=[3 * t["check"]["details"]["tau_measured_se"] for t in taus],
        fmt="o",
        label="measured (+-3 se)",
    )
    right.plot(gammas, [t["check"]["details"]["tau_predicted"] for t in taus], "x--", label="predicted from p, q")
    right.set(xlabel="g (drafts per cycle)", ylabel="tau (tokens per cycle)", title="tau")
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.minorticks_off()
        ax.set_xticks(list(GAMMA_TICKS), [str(g) for g in GAMMA_TICKS])
    right.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


GAMMA_TICKS = (1, 2, 4, 8)


def write_reports(report: dict, out_dir: Path, plots: bool = True) -> None:
    """e2e.json and e2e.md first; then e2e.png, optional: a failed plot costs its own file, never the report."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "e2e.json").write_text(json.dumps(json_safe(report), indent=2) + "\n")
    (out_dir / "e2e.md").write_text(markdown(report, png=False))
    if not plots:
        return
    try:
        plot(report, out_dir / "e2e.png")
    except Exception as error:  # noqa: BLE001 -- matplotlib missing or failing; the report is on disk
        print(f"specref: {out_dir / 'e2e.png'} not drawn: {type(error).__name__}: {error}", file=sys.stderr)
        return
    (out_dir / "e2e.md").write_text(markdown(report, png=True))
