"""The lossy rules engines ship on purpose, as built-ins: each written from its engine's code or docs (source named
in its adapter's notes), each at the settings its engine documents or defaults to. They keep the verify contract
(target_probs [B, g+1, V], draft_probs [B, g, V], draft_tokens [B, g], generator) and run on the mutants' skeleton
(`core.run`: float64, one uniform per accept test, the last for the final draw). specref's verdict on each is
"lossy by configuration", with the TV it costs and the acceptance it buys (conformance/chain/lossy.py).

  relaxed     TensorRT-LLM's relaxed acceptance for thinking (DeepSeek-R1 MTP; MTPDecodingConfig(
              use_relaxed_acceptance_for_thinking, relaxed_topk, relaxed_delta), TensorRT-LLM tech blog 2 "DeepSeek
              R1 MTP Implementation and Optimization", section Relaxed Acceptance): inside <think>, a draft d is
              accepted when it is among the target's relaxed_topk likeliest tokens and p(d) >= p_top1 - delta;
              otherwise the normal test u < p/q, correction from (p - q)_+. Outside <think> the rule is exact: the
              phase is the built-in's setting (phase="think" or "answer"), one phase for every row of a run.
  sglang      SGLang's tree_speculative_sampling_target_only with speculative_accept_threshold_single /
              _threshold_acc below 1 (sgl-kernel speculative_sampling.cuh): the draft is treated as a point mass;
              accept when coin <= p(d) / threshold_acc or p(d) >= threshold_single; on rejection, p without d.
  typical     typical acceptance (Medusa, Cai et al. 2024; vLLM v0 TypicalAcceptanceSampler; Modular MAX
              typical-acceptance): accept d when p(d) > min(posterior_threshold, posterior_alpha exp(-H(p))); after
              the first failure, the correction is drawn from p.
  lenience    Leviathan et al. 2023, A.5: accept with min(1, p / (l q)), correction from (p - l q)_+.
  fly         FLy (arXiv 2511.22972; vLLM PR 50808, closed): a rejection at a position whose target entropy is
              above `entropy` nats is overridden (the draft kept) when the next `window` drafts all pass their
              own tests; otherwise the walk stops there as exact sampling does.
  synthetic   synthetic acceptance (vLLM rejection_sample_method="synthetic", Modular MAX SyntheticRunner): draft i
              is kept with a fixed per-position rate (given the ones before it were), ignoring the logits; a
              rejected position draws from p. For benchmarks only: never lossless.
"""

from __future__ import annotations

import torch

from ..conformance.chain.adapters import Adapter
from .core import Steps, leading_accepts, run, uniforms_for

_PHASES = ("think", "answer")


def _entropy(p: torch.Tensor) -> torch.Tensor:
    """[..., V] -> [...] nats."""
    return -(p * p.clamp(min=1e-300).log()).sum(-1)


def _exact_accept(u, p_at, q_at):
    return u < p_at / q_at


def relaxed(topk: int, delta: float, phase: str = "think"):
    if phase not in _PHASES:
        raise ValueError(f"phase={phase!r}; expected one of {_PHASES}")

    def verify(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
        gamma = draft_tokens.shape[1]
        p = target_probs[:, :gamma].double()  # [B, g, V]
        top = p.topk(min(topk, p.shape[-1]), dim=-1)
        in_top = (top.indices == draft_tokens.long()[..., None]).any(-1)  # [B, g]
        p_at = p.gather(-1, draft_tokens.long()[..., None]).squeeze(-1)
        relaxed_ok = in_top & (p_at >= top.values[..., 0] - delta) & (phase == "think")

        steps = Steps(accept=lambda u, p_at_draft, q_at_draft: relaxed_ok | _exact_accept(u, p_at_draft, q_at_draft))
        return run(target_probs, draft_probs, draft_tokens, uniforms_for(uniforms, generator, draft_tokens), steps)

    return verify


def sglang(threshold_single: float, threshold_acc: float):
    def verify(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
        steps = Steps(accept=lambda u, p_at, q_at: (u <= p_at / threshold_acc) | (p_at >= threshold_single))
        return run(target_probs, None, draft_tokens, uniforms_for(uniforms, generator, draft_tokens), steps)

    return verify


def typical(posterior_threshold: float, posterior_alpha: float):
    def verify(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
        gamma = draft_tokens.shape[1]
        entropy = _entropy(target_probs[:, :gamma].double())  # [B, g]
        bar = torch.minimum(torch.full_like(entropy, posterior_threshold), posterior_alpha * torch.exp(-entropy))
        steps = Steps(accept=lambda u, p_at, q_at: p_at > bar, residual=lambda p_row, q_row, drafted: p_row)
        return run(target_probs, draft_probs, draft_tokens, uniforms_for(uniforms, generator, draft_tokens), steps)

    return verify


def lenience(lenience: float):
    def verify(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
        steps = Steps(accept=lambda u, p_at, q_at: u < p_at / (lenience * q_at),
                      residual=lambda p_row, q_row, drafted: (p_row - lenience * q_row).clamp(min=0))  # fmt: skip
        return run(target_probs, draft_probs, draft_tokens, uniforms_for(uniforms, generator, draft_tokens), steps)

    return verify


def fly(entropy: float, window: int):
    def verify(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
        gamma = draft_tokens.shape[1]
        uncertain = _entropy(target_probs[:, :gamma].double()) > entropy  # [B, g]

        def count(accepted):  # [B, g] bool -> [B]
            kept = accepted.clone()
            for i in range(gamma - window):  # a rejection at i with a full window of accepts after it
                ahead = accepted[:, i + 1 : i + 1 + window].all(-1)
                kept[:, i] |= uncertain[:, i] & ahead
            return leading_accepts(kept)

        steps = Steps(accept=_exact_accept, count=count)
        return run(target_probs, draft_probs, draft_tokens, uniforms_for(uniforms, generator, draft_tokens), steps)

    return verify


def synthetic(*rates: float):
    """Draft i kept with probability rates[i] given the ones before it were (the last rate repeats past the end)."""
    if not rates or not all(0 <= r <= 1 for r in rates):
        raise ValueError(f"rates={rates!r}: one or more acceptance rates in [0, 1]")

    def verify(target_probs, draft_probs, draft_tokens, generator=None, *, uniforms=None):
        gamma = draft_tokens.shape[1]
        per_position = torch.tensor([rates[min(i, len(rates) - 1)] for i in range(gamma)], dtype=torch.float64)
        steps = Steps(accept=lambda u, p_at, q_at: u < per_position.to(u.device),
                      residual=lambda p_row, q_row, drafted: p_row)  # fmt: skip
        return run(target_probs, draft_probs, draft_tokens, uniforms_for(uniforms, generator, draft_tokens), steps)

    return verify


#: name -> (rule factory, settings, source): the rows of specref.builtins name these.
RULES = {
    "relaxed": (relaxed, "TensorRT-LLM relaxed acceptance for thinking (tech blog 2, DeepSeek R1 MTP; "
                "MTPDecodingConfig relaxed_topk, relaxed_delta)"),
    "sglang": (sglang, "SGLang tree_speculative_sampling_target_only with speculative_accept_threshold_single/_acc"),
    "typical": (typical, "typical acceptance: Medusa; vLLM v0 TypicalAcceptanceSampler; Modular MAX "
                "typical-acceptance"),
    "lenience": (lenience, "lenience l (Leviathan et al. 2023, appendix A.5)"),
    "fly": (fly, "FLy's window rule (arXiv 2511.22972; vLLM PR 50808, closed)"),
    "synthetic": (synthetic, "synthetic acceptance (vLLM rejection_sample_method='synthetic'; MAX SyntheticRunner): "
                  "fixed rates that ignore the logits, for benchmarks; never lossless"),
}  # fmt: skip


def lossy_adapter(rule: str, *settings) -> Adapter:
    """The built-in of `rule` at `settings` (positional, as its factory above takes them)."""
    if rule not in RULES:
        raise ValueError(f"rule={rule!r}; expected one of {tuple(RULES)}")
    make, source = RULES[rule]
    words = ", ".join(map(str, settings))
    return Adapter(f"lossy-{rule}-{'-'.join(map(str, settings))}", make(*settings), lossy=True,
                   dtype=torch.float64, notes=f"{source}, settings ({words}): lossy by configuration")  # fmt: skip


__all__ = ["RULES", "fly", "lenience", "lossy_adapter", "relaxed", "sglang", "synthetic", "typical"]
