"""The errors specref raises on purpose, under one base: `SpecrefError`.

    SpecrefError
      UsageError          what the user asked for is wrong (exit 2 on the command line), not a verdict
        MissingDependency   a run needs a package that is not installed (names the pip command)
        MergeError          shard folders that are not the N parts of one run
        BadArgument         an argument out of range or of the wrong type (also a ValueError), named with its value
      AdapterFailure      the implementation under test raised, hung, crashed or returned malformed output: a verdict

Anything else raised inside specref is a bug in specref (exit 3 on the command line). This module imports nothing
beyond the standard library, so that every layer can use it.
"""

from __future__ import annotations


class SpecrefError(Exception):
    """The base of the errors specref raises on purpose."""


class UsageError(SpecrefError):
    """A problem with what the user asked for (exit 2), as opposed to a verdict on the implementation."""


class MissingDependency(UsageError):
    """A run needs packages that are not installed: a usage error (exit 2), raised before the run starts.

    missing: the requirements not installed (each with `.module` and `.install`, see specref.extras.Requirement).
    """

    def __init__(self, what: str, missing: list):
        self.what, self.missing = what, missing
        commands = list(dict.fromkeys(r.install for r in missing))
        super().__init__(
            f"{what} needs {', '.join(r.module for r in missing)}, not installed here; install with: "
            + " && ".join(commands)
        )


class MergeError(UsageError):
    """`specref merge` was given folders that are not the shards of one run (exit 2)."""


class BadArgument(UsageError, ValueError):
    """An argument of run(), the CLI or the pytest plugin that is out of range or of the wrong type (exit 2); a
    ValueError too, as the API raised before (specref.arguments checks each argument in one function)."""


class AdapterFailure(SpecrefError):
    """The adapter raised, hung, crashed, or returned something that is not a [B, g+1] int64 tensor.

    location: 'file:line in function' where it raised or hung (None when unknown); call: the provenance of the
    call (scenario, seed, chunk, rows, generator_seed, dtype, device) when the caller gave one.
    """

    def __init__(self, kind: str, message: str, location: str | None = None, call: dict | None = None):
        super().__init__(f"{kind}: {message}" + (f" (at {location})" if location else ""))
        self.kind, self.message, self.location, self.call = kind, message, location, call


__all__ = ["AdapterFailure", "BadArgument", "MergeError", "MissingDependency", "SpecrefError", "UsageError"]
