import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Test modules import shared helpers (budget.py) by bare name.
sys.path.insert(0, str(Path(__file__).parent))

# Hypothesis owns the examples; every example draws its own seed, and no test may use a global RNG.
# derandomize=True fixes the examples, so the statistical tests run a fixed, budgeted number of checks.
settings.register_profile(
    "specref", max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("specref")


#: The order of a CI run (noxfile's CI_MARKERS): cheapest and most certain first, gpu_tests' CPU pass last.
TIER_ORDER = ("exact", "statistical", "hypothesis_stat", "gpu")


def pytest_collection_modifyitems(config, items):
    """Run the tiers in TIER_ORDER within one pytest run (a stable sort: each tier keeps its collection order)."""

    def rank(item):  # gpu_tests carry a tier marker too: gpu decides first
        if item.get_closest_marker("gpu"):
            return TIER_ORDER.index("gpu")
        return next((i for i, tier in enumerate(TIER_ORDER) if item.get_closest_marker(tier)), len(TIER_ORDER))

    ci_tiers = TIER_ORDER[:-1]  # noxfile's TIERS: what CI selects by (a gpu test carries one of them too)
    untiered = [item.nodeid for item in items if not any(item.get_closest_marker(t) for t in ci_tiers)]
    if untiered:  # CI selects by tier, so a test without one would never run there
        raise pytest.UsageError(f"{len(untiered)} tests carry no tier marker ({', '.join(ci_tiers)}), so CI's "
                                f"selection never runs them: {untiered[:5]}")  # fmt: skip
    items.sort(key=rank)
