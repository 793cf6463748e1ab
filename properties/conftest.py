from hypothesis import HealthCheck, settings

# Hypothesis owns the examples; every example draws its own seed, and no test may use a global RNG.
settings.register_profile(
    "specref", max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("specref")

# Test modules import shared helpers (budget.py) by bare name.
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
