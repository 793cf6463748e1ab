"""Request-level mutants: whole pipelines whose every row follows the target's law, wrong in what they owe a request.

Each is specref's own generation (specref.hf.pipelines.specref_pipeline over the tiny pair, T = 0.8, top-k 8, g = 3)
with one hook of specref.hf.requests or specref.hf.generation turned on, and each is flagged by one request-level
check of the pipeline contract (specref.conformance.pipeline.requests). Their names and words are rows of
specref.builtins; here is what each turns on and what must flag it:

  mutant-shared-stream     an unseeded request starts a fresh generator at torch's default seed, so serial
                           unseeded requests repeat each other (TensorRT-LLM #19487)    -> unseeded_independence
  mutant-seed-ignored      a batch of more than one request is drawn from the shared stream, its per-request
                           seeds ignored; a request alone keeps its seed (TensorRT-LLM PR #17599) -> seeded_request
  mutant-counts-after-eos  the accepted counter counts the drafts past an EOS inside the accepted prefix
                           (vLLM #56101); EOS is token EOS_TOKEN                         -> acceptance_counters

`correct_eos()` is the last one's pipeline without its bug: the control it is measured beside.
"""

from __future__ import annotations

#: The EOS of the counters mutant and its control: a frequent token of the tiny models' continuations.
EOS_TOKEN = 0
GAMMA = 3

#: name -> (the hooks of specref_pipeline / SpecConfig it turns on, whether it has an EOS, the kinds that flag it)
MUTANTS: dict[str, tuple[dict, bool, tuple[str, ...]]] = {
    "mutant-shared-stream": ({"fixed_stream": True}, False, ("unseeded_independence",)),
    "mutant-seed-ignored": ({"seeds_ignored_in_batches": True}, False, ("seeded_request",)),
    "mutant-counts-after-eos": ({"count_after_eos": True}, True, ("acceptance_counters",)),
}


def caught_by(name: str) -> tuple[str, ...]:
    return MUTANTS[name][2]


def _pipeline(name: str, description: str, hooks: dict, eos: bool, expected: bool):
    from ..hf.pipelines import SpecConfig, specref_pipeline, with_prompts
    from ..hf.processors import Processors
    from ..hf.tiny import tiny_pair

    target, draft = tiny_pair()
    config = SpecConfig(GAMMA, Processors(temperature=0.8, top_k=8), eos_token_id=EOS_TOKEN if eos else None,
                        count_after_eos=hooks.get("count_after_eos", False))  # fmt: skip
    seeding = {k: v for k, v in hooks.items() if k != "count_after_eos"}
    adapter = specref_pipeline(target, draft, config, name=name, expected_conforming=expected,
                               description=description, **seeding)  # fmt: skip
    return with_prompts(adapter)


def request_mutant(name: str):
    """The pipeline of the request-level mutant `name` (a row of specref.builtins)."""
    from ..builtins import BY_NAME

    if name not in MUTANTS:
        raise ValueError(f"name={name!r}: not a request-level mutant; known: {', '.join(MUTANTS)}")
    hooks, eos, _ = MUTANTS[name]
    return _pipeline(name, BY_NAME[name].about, hooks, eos, False)


def correct_eos():
    """specref-generate with EOS_TOKEN as its EOS: the control of mutant-counts-after-eos."""
    return _pipeline("specref-generate-eos", f"specref.hf.generation with EOS token {EOS_TOKEN}", {}, True, True)


__all__ = ["EOS_TOKEN", "MUTANTS", "caught_by", "correct_eos", "request_mutant"]
