"""The chain adapters (chain/adapters.py) at the path earlier releases documented. Kept for one release."""

from .chain.adapters import *  # noqa: F403
from .chain.adapters import Adapter, as_adapter, builtin_adapters, contract_output, global_rng_from, seeds_from

__all__ = ["Adapter", "as_adapter", "builtin_adapters", "contract_output", "global_rng_from", "seeds_from"]
