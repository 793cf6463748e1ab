import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

# Test modules import shared helpers (budget.py) by bare name.
sys.path.insert(0, str(Path(__file__).parent))

# Hypothesis owns the examples; every example draws its own seed, and no test may use a global RNG.
# derandomize=True fixes the examples, so the statistical tests run a fixed, budgeted number of checks.
settings.register_profile(
    "specref", max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("specref")
