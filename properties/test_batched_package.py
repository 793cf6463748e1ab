"""T0: the `specref.batched` package exports its engines by name, and importing it imports no torch (so that
`python -m specref.batched.bench` can name a missing extra before anything needs torch)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import specref.batched as batched

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.exact
@pytest.mark.parametrize("name", batched.__all__)
def test_each_export_is_its_modules_function(name):
    value = getattr(batched, name)
    module = sys.modules[value.__module__]
    assert module.__name__.startswith("specref.batched.") and getattr(module, name) is value
    assert name in dir(batched)


@pytest.mark.exact
def test_unknown_name_raises_attribute_error():
    with pytest.raises(AttributeError, match="no_such_name"):
        batched.no_such_name  # noqa: B018


@pytest.mark.exact
def test_importing_the_package_imports_no_torch():
    code = "import sys, specref.batched\nprint('torch' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False"]
