"""The chain adapters (chain/adapters.py) at the path earlier releases documented. Kept for one release."""

from .chain.adapters import (
    Adapter,
    as_adapter,
    batched_adapter,
    builtin_adapters,
    contract_output,
    global_rng_from,
    reference_adapter,
    seeds_from,
    transformers_adapter,
    transformers_ensemble_adapter,  # fmt: skip
)

__all__ = ["Adapter", "as_adapter", "batched_adapter", "builtin_adapters", "contract_output", "global_rng_from",
           "reference_adapter", "seeds_from", "transformers_adapter", "transformers_ensemble_adapter"]  # fmt: skip
