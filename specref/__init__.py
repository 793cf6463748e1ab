"""specref: a reference engine and conformance suite for speculative decoding."""

__version__ = "0.1.0"
