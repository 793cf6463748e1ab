"""The chain call's arguments as the harness builds them (chain/form.py); the path reproduce snippets of earlier
releases print. Kept for one release."""

from .chain.form import CHAIN, call_inputs
from .engine.callform import CallForm

__all__ = ["CHAIN", "CallForm", "call_inputs"]
