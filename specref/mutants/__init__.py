"""The mutant catalogue: deliberately wrong verifiers, one per bug class seen in real engines, plus
rules that are lossy by configuration. `nox -s mutants` runs the conformance suite on each and checks that the
checks named in `caught_by` flag it.

Kernel-level analogues. The verify contract hands a verifier the processed target law p, so a bug upstream of the
kernel (temperature or top-k dropped on the verify path) is modelled by the kernel using another law on its verify
rows (accept tests and residuals) while the bonus keeps p, as in the engines where the bonus sampler applied the
processing and the rejection sampler did not. Each entry's description says what its verify function does.

Each Mutant is also an adapter-shaped object (`specref.conformance.adapters.as_adapter(mutant)`): it declares
ragged / point_mass when its bug lives there, the rule it claims to implement (`rule`, exact unless said), and never
uniforms (the harness runs mutants as black boxes). A mutant that declares a rule other than exact is run from the
command line as its Mutant, so that the declaration travels: `specref conform specref.mutants:MUTANTS.<name>`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

from ..conformance.chain.kinds import DECLARED as _CHAIN_KINDS  # noqa: F401 -- the kinds caught_by names
from ..conformance.engine.registry import check_caught_by
from ..conformance.tree.kinds import DECLARED as _TREE_KINDS  # noqa: F401
from . import block, bugs, lossy


@dataclass
class Mutant:
    name: str
    bug_class: str  # the kind of bug: Target law, Draft law, Zero edges, Randomness, ...
    description: str
    verify: Callable  # the verify contract
    caught_by: list[str]  # check kinds (conformance.registry) expected to flag it
    lossy: bool = False  # lossy by configuration: report the TV, not a bug
    reference: str = ""  # where the bug (or rule) was seen
    ragged: bool = False  # declares num_draft (its bug is in the ragged path)
    point_mass: bool = False  # declares draft_probs=None (its bug is in the point-mass path)
    uniforms: bool = False
    rule: str = "exact"  # the verification rule it declares (specref.conformance.chain.laws.RULES)

    @property
    def notes(self) -> str:
        return f"mutant ({self.bug_class}): {self.description} [{self.reference}]"


def _entry(verify, bug_class, caught_by, reference, **kwargs) -> Mutant:
    """caught_by: declared check kinds (specref.conformance.registry); an undeclared one is an error at import."""
    description = " ".join(verify.__doc__.split())
    caught_by = check_caught_by(verify.__name__, caught_by)
    return Mutant(verify.__name__, bug_class, description, verify, caught_by, reference=reference, **kwargs)


_ENTRIES = [
    _entry(
        bugs.verify_ignores_temperature,
        "Target law",
        ["first_token_law", "joint_law", "correction_law", "reject_rate"],
        "vLLM PR 10198",
    ),
    _entry(
        bugs.verify_ignores_top_k,
        "Target law",
        ["t0_zero_prob_emitted", "first_token_law", "correction_law"],
        "vLLM PR 38467; TensorRT-LLM PR 17701",
    ),
    _entry(
        bugs.greedy_verification,
        "Target law",
        ["first_token_law", "joint_law", "reject_rate"],
        "SGLang PR 39253",
    ),
    _entry(
        bugs.ratio_other_draft_logits,
        "Draft law",
        ["first_token_law", "correction_law", "reject_rate"],
        "transformers issue 47932 / PR 47961; issue 32867",
    ),
    _entry(
        bugs.drafts_as_one_hot,
        "Draft law",
        ["reject_rate", "accepted_length_law"],
        "bug class: sampled drafts passed as one-hot",
    ),
    _entry(
        bugs.residual_at_drafted_token,
        "Draft law",
        ["correction_law", "first_token_law"],
        "bug class: residual taken only at the drafted token",
    ),
    _entry(
        bugs.residual_paired_by_position,
        "Draft law",
        ["correction_law", "first_token_law"],
        "bug class: residual entries paired by position instead of token id",
    ),
    _entry(
        bugs.u_zero_accepts_zero_prob,
        "Zero edges",
        ["t0_zero_prob_emitted", "rare_edge"],
        "transformers _speculative_sampling (`r_i <= probability_ratio`); pytorch issue 16706 (rand returns 0)",
    ),
    _entry(bugs.accept_le_fp32, "Zero edges", ["rare_edge"], "transformers _speculative_sampling (`r_i <= ...`)"),
    _entry(bugs.inverse_cdf_left_search, "Zero edges", ["rare_edge"], "bug class: left-side inverse-CDF search"),
    _entry(bugs.inverse_cdf_from_first_token, "Zero edges", ["rare_edge"], "bug class: CDF intervals closed at 0"),
    _entry(
        bugs.nan_ratio_accepted,
        "Zero edges",
        ["t0_zero_prob_emitted"],
        "bug class: 0/0 gives NaN and the NaN is accepted",
    ),
    _entry(
        bugs.empty_residual_out_of_vocab,
        "Zero edges",
        ["t0_valid_ids", "correction_law"],
        "vLLM GHSA-8wr5-jm2h-8r4f",
    ),
    _entry(
        bugs.softmax_residual,
        "Residual normalisation",
        ["t0_zero_prob_emitted", "correction_law", "first_token_law"],
        "transformers PR 28508",
    ),
    _entry(
        bugs.residual_floor_eps,
        "Residual normalisation",
        ["t0_zero_prob_emitted", "correction_law"],
        "bug class: clamp(min=eps) leaks mass to p = 0 tokens",
    ),
    _entry(
        bugs.recovered_whole_tiles_only,
        "Vocabulary tail",
        ["correction_law", "first_token_law"],
        "bug class: a tiled recovered-token sampler that drops the last partial tile (vLLM's Triton tiles: 8,192)",
    ),
    _entry(
        bugs.continue_after_reject,
        "Control flow",
        ["t0_prefix_is_drafts"],
        "bug class: acceptance continues after the first rejection",
    ),
    _entry(
        bugs.count_all_accepts,
        "Metrics",
        ["first_token_law", "joint_law", "accepted_length_law"],
        "FlashInfer chain_speculative_sampling accepted_token_num (by design, as a metric)",
    ),
    _entry(
        bugs.bonus_wrong_row,
        "Control flow",
        ["bonus_law"],
        "bug class: bonus token drawn from the wrong row",
    ),
    _entry(
        bugs.bonus_missing,
        "Control flow",
        ["accepted_length_law", "bonus_law"],
        "bug class: bonus missing after all accepts",
    ),
    _entry(
        bugs.placeholder_as_index,
        "Control flow",
        ["t0_padding", "ragged_law"],
        "bug class: -1 placeholder drafts used as indices (vLLM PLACEHOLDER_TOKEN_ID)",
        ragged=True,
    ),
    _entry(
        bugs.point_mass_keeps_draft,
        "Draft law",
        ["point_mass_law"],
        "bug class: point-mass drafts (ngram / prompt-lookup proposers)",
        point_mass=True,
    ),
    _entry(
        bugs.shared_uniform_positions,
        "Randomness",
        ["accepted_length_law", "joint_law"],
        "bug class: one uniform shared across positions",
    ),
    _entry(
        bugs.shared_uniform_rows,
        "Randomness",
        ["row_independence"],
        "bug class: one uniform shared across rows",
    ),
    _entry(
        bugs.seed_ignored,
        "Randomness",
        ["reproducibility"],
        "bug class: seeds ignored",
    ),
    _entry(
        bugs.batch_composition,
        "Randomness",
        ["batch_composition"],
        "vLLM PR 41044",
    ),
    _entry(
        block.block_token_rule,
        "Block rule",
        ["accepted_length_law", "correction_law"],
        "vllm-ascend block_verify before its fix: token acceptance and residual (issue 7807, fixed by PR 7808)",
        rule="block",
    ),
    _entry(
        block.block_token_residual,
        "Block rule",
        ["correction_law"],
        "a half-fix of vllm-ascend issue 7807: block acceptance, the token rule's residual",
        rule="block",
    ),
    _entry(
        lossy.typical_acceptance,
        "Lossy by configuration",
        ["first_token_law", "joint_law"],
        "Medusa typical acceptance (posterior_threshold 0.09, posterior_alpha 0.3)",
        lossy=True,
    ),
    _entry(
        lossy.lenient_acceptance,
        "Lossy by configuration",
        ["first_token_law", "joint_law", "reject_rate"],
        "lenient acceptance, lenience 0.8",
        lossy=True,
    ),
    _entry(
        lossy.assistant_ensemble,
        "Lossy by configuration",
        ["first_token_law", "joint_law", "reject_rate"],
        "transformers assistant_ensemble_weight = 0.5 (DIVERSE)",
        lossy=True,
    ),
    _entry(
        lossy.sglang_threshold,
        "Lossy by configuration",
        ["first_token_law", "joint_law"],
        "SGLang threshold_acc = 0.5 (speculative_accept_threshold_acc)",
        lossy=True,
    ),
]

CATALOGUE: dict[str, Mutant] = {mutant.name: mutant for mutant in _ENTRIES}
#: The catalogue by attribute: `specref conform specref.mutants:MUTANTS.<name>` runs a mutant with its declarations.
MUTANTS = SimpleNamespace(**CATALOGUE)

__all__ = ["CATALOGUE", "MUTANTS", "Mutant"]
