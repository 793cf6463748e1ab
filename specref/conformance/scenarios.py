"""The chain scenarios (chain/scenarios.py), at the path reproduce snippets of earlier releases print. Kept for one
release."""

from .chain.scenarios import *  # noqa: F403
from .chain.scenarios import SCENARIOS, Scenario, context_free, get, markov  # noqa: F401
