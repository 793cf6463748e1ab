"""The CI run's false-alarm budget: at most 1e-3 in total, split by area, then by Bonferroni within an area.

Each statistical test takes its alpha from `alpha_for(area, n_checks)`: the area's share divided by the number
of checks the area runs in CI (every Hypothesis example counts as its own check). `test_budget.py` asserts that
the shares sum to at most TOTAL.
"""

TOTAL = 1e-3

SHARES = {
    "stats": 8.1e-5,  # the stats module's own tests (power simulations, calibration spot checks)
    "forced": 1e-5,  # the rare edge's event probabilities against torch's own draws (test_forced_statistical.py)
    "engines": 2.5e-4,  # T2 checks on the reference and batched engines, fixed scenarios
    "hypothesis": 1.9e-4,  # T3: statistical checks on Hypothesis-generated p/q
    "batched": 1e-4,  # batched-engine tests beyond the shared checks (dtypes, large V)
    "conformance": 5e-5,  # harness tests through the CLI and the Python API
    "trees": 4e-5,  # tree conformance runs: the correct tree built-ins pass (test_tree_conformance.py)
    "verdicts": 5e-5,  # verdicts on lossless rules other than exact and on low-precision verifiers
    "e2e": 1e-4,  # end-to-end law checks on tiny transformers models
    "gpu_cpu_pass": 1e-4,  # gpu_tests run on the CPU (SPECREF_DEVICE=cpu) inside nox -s properties
    "block": 9e-6,  # block verification through the harness: runs whose rule checks must pass (test_block_conformance)
    "requests": 5e-6,  # the pipeline contract's request-level independence test on correct pipelines
    "sampling": 5e-6,  # the sampling contract's built-ins conform (test_sampling_statistical.py)
    "lossy": 4e-6,  # TV intervals of the lossy built-ins cover their exact TV (test_lossy_coverage.py)
    "adaptive": 2e-6,  # an adaptive (own draft length per row) verifier from a file conforms (test_adaptive_ragged.py)
    "multidraft": 3e-6,  # K-SEQ and traversal named by the tree rule diagnosis (test_multidraft_diagnosis.py)
}


def alpha_for(area: str, n_checks: int) -> float:
    """Per-check alpha for an area that runs n_checks statistical checks in CI."""
    if area not in SHARES:
        raise ValueError(f"area={area!r} has no share; known areas: {sorted(SHARES)}")
    if n_checks < 1:
        raise ValueError(f"n_checks={n_checks!r} must be >= 1")
    return SHARES[area] / n_checks
