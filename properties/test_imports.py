"""Every module of the package imports (a module left pointing at a removed one fails here, not in a user's run).
Optional engines are imported lazily inside their adapters, so this holds on a machine without them."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import specref

pytestmark = pytest.mark.exact


def test_every_module_imports():
    failures = {}
    for module in pkgutil.walk_packages(specref.__path__, "specref."):
        try:
            importlib.import_module(module.name)
        except Exception as error:  # noqa: BLE001 -- every failure is listed, not only the first
            failures[module.name] = f"{type(error).__name__}: {error}"
    assert not failures, failures
