"""Record each engine's own non-speculative processed law as fixtures: properties/fixtures/sampling/ENGINE.json.

    python -m specref.conformance.peers.record_sampling ENGINE [FOLDER]      # with the python that has ENGINE

(docs/sampling-fixtures.md says which python, for each engine.)

ENGINE is one of LAWS: vllm (peers/vllm_sampling_law.py), transformers (peers/transformers_sampling_law.py),
llama.cpp (peers/llama_cpp_sampling_law.py), mlx-lm (peers/mlx_lm_sampling_law.py). Each case of CASES (the
parameters the engine's chain supports, specref.reference.processors.SUPPORTS, and no other) is one record: the
logits (float32 values, so every engine is handed the same numbers), the parameters, the history, and the engine's
probabilities. properties/test_processor_fixtures_exact.py compares specref's reference chains against them, so the
chains are held to the engines where the engines are not installed.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys
from pathlib import Path

import numpy as np

from ...reference.processors import SUPPORTS, History, SamplingParams

#: engine -> (its law module, the reference chain it is compared with)
LAWS = {
    "vllm": ("specref.conformance.peers.vllm_sampling_law", "vllm"),
    "transformers": ("specref.conformance.peers.transformers_sampling_law", "transformers"),
    "llama.cpp": ("specref.conformance.peers.llama_cpp_sampling_law", "llama.cpp"),
    "mlx-lm": ("specref.conformance.peers.mlx_lm_sampling_law", "llama.cpp"),  # no chain of its own: the nearest
}
FOLDER = Path("properties/fixtures/sampling")
VOCAB = 16


def _logits(seed: int, masked: int = 0, ties: bool = False) -> np.ndarray:
    """[VOCAB] float32-exact logits (multiples of 1/16); `masked` of them -inf, `ties`: ids 3 and 9 tie at the top."""
    rng = np.random.default_rng(seed)
    logits = np.round(rng.normal(0.0, 2.0, VOCAB) * 16) / 16
    if ties:
        logits[[3, 9]] = logits.max() + 0.5
    if masked:
        logits[rng.choice(VOCAB, masked, replace=False)] = -np.inf
    return logits


_H = History(prompt=(1, 4, 4, 7), output=(2, 7, 7, 11))
#: name -> (logits, params, history): every parameter alone, the pairs whose order the chains disagree on, greedy,
#: -inf masks and ties.
CASES = {
    "plain": (_logits(0), SamplingParams(), _H),
    "temperature": (_logits(1), SamplingParams(temperature=0.6), _H),
    "top_k": (_logits(2), SamplingParams(temperature=0.9, top_k=5), _H),
    "top_k_1": (_logits(3), SamplingParams(top_k=1), _H),
    "top_p": (_logits(4), SamplingParams(temperature=1.2, top_p=0.7), _H),
    "top_p_keeps_one": (_logits(5), SamplingParams(top_p=0.05), _H),
    "top_k_then_top_p": (_logits(6), SamplingParams(top_k=6, top_p=0.8), _H),
    "min_p": (_logits(7), SamplingParams(temperature=1.5, min_p=0.08), _H),
    "min_p_with_top_p": (_logits(8), SamplingParams(temperature=0.8, top_p=0.9, min_p=0.1), _H),
    "logit_bias": (_logits(9), SamplingParams(logit_bias=((3, 2.5), (7, -1.5), (12, 1.0))), _H),
    "logit_bias_moves_argmax": (_logits(10), SamplingParams(temperature=0.0, logit_bias=((5, 9.0),)), _H),
    "allowed_ids": (_logits(11), SamplingParams(allowed_token_ids=(0, 2, 5, 7, 11, 13)), _H),
    "repetition": (_logits(12), SamplingParams(repetition_penalty=1.6), _H),
    "repetition_below_one": (_logits(13), SamplingParams(repetition_penalty=0.7, temperature=0.9), _H),
    "presence_frequency": (_logits(14), SamplingParams(presence_penalty=0.6, frequency_penalty=0.4), _H),
    "penalties_all": (
        _logits(15),
        SamplingParams(temperature=0.7, repetition_penalty=1.3, presence_penalty=0.3, frequency_penalty=0.2, top_k=8),
        _H,
    ),  # fmt: skip
    "greedy": (_logits(16), SamplingParams(temperature=0.0), _H),
    "greedy_penalised": (_logits(17), SamplingParams(temperature=0.0, repetition_penalty=2.0), _H),
    "masked": (_logits(18, masked=5), SamplingParams(temperature=0.9, top_p=0.85), _H),
    "ties_top_k": (_logits(19, ties=True), SamplingParams(top_k=1), _H),
    "everything": (
        _logits(20),
        SamplingParams(
            temperature=0.8, top_k=10, top_p=0.9, min_p=0.02, logit_bias=((4, 1.0),), repetition_penalty=1.2
        ),
        _H,
    ),  # fmt: skip
}


def cases_for(chain: str) -> dict:
    """The cases whose parameters `chain` takes (SUPPORTS)."""
    return {name: case for name, case in CASES.items() if case[1].set_names() <= SUPPORTS[chain]}


def params_dict(params: SamplingParams) -> dict:
    return {k: v for k, v in dataclasses.asdict(params).items() if k != "seed"}


def params_from(record: dict) -> SamplingParams:
    fields = dict(record)
    fields["logit_bias"] = tuple((int(t), float(b)) for t, b in fields.get("logit_bias", ()))
    if fields.get("allowed_token_ids") is not None:
        fields["allowed_token_ids"] = tuple(fields["allowed_token_ids"])
    return SamplingParams(**fields)


def _finite(values) -> list:
    return [None if not np.isfinite(v) else float(v) for v in values]  # -inf as null (JSON has no -inf)


def record(engine: str) -> dict:
    """Every case the engine's chain takes, with the engine's probabilities."""
    module_name, chain = LAWS[engine]
    module = importlib.import_module(module_name)
    out = {"engine": engine, "version": module.version(), "chain": chain, "vocab_size": VOCAB, "cases": []}
    for name, (logits, params, history) in cases_for(chain).items():
        probs = module.law(logits, params, history)
        out["cases"].append({"name": name, "logits": _finite(logits), "params": params_dict(params),
                             "history": {"prompt": list(history.prompt), "output": list(history.output)},
                             "probs": [float(p) for p in probs]})  # fmt: skip
    return out


def load(path: Path) -> dict:
    """A fixture file, its logits back as float64 with -inf."""
    data = json.loads(Path(path).read_text())
    for case in data["cases"]:
        case["logits"] = np.array([-np.inf if v is None else v for v in case["logits"]], dtype=np.float64)
        case["params"] = params_from(case["params"])
        case["history"] = History(tuple(case["history"]["prompt"]), tuple(case["history"]["output"]))
        case["probs"] = np.asarray(case["probs"], dtype=np.float64)
    return data


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in LAWS:
        print(f"usage: python -m specref.conformance.peers.record_sampling {{{','.join(LAWS)}}} [FOLDER]")
        return 2
    folder = Path(argv[1]) if len(argv) > 1 else FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    data = record(argv[0])
    path = folder / f"{argv[0]}.json"
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{path}: {len(data['cases'])} cases from {data['version']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
