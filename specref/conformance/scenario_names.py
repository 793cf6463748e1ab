"""The scenario names of each verify-level contract, without torch: read from the catalogue's own declaration.

Each contract package declares its scenarios once, in `<package>/scenarios.py`: `CATALOGUE = {name: builder}`.
That module imports torch and builds every scenario's arrays on import (seconds), so `--scenarios nope` would be
answered only after both. Here the keys of that one dict literal are read from its source with `ast` (the module is
never executed): string constants, module-level string constants (`PROBE`) and `**{f"...": ... for g in (1, 5)}`
comprehensions over literals. The catalogue stays the one place a scenario is declared; properties/
test_cli_start.py holds these names equal to the built catalogues'. Which names an adapter's capabilities allow
needs the built scenarios (their flags) and the loaded adapter: resolve.select_scenarios checks that after loading.
"""

from __future__ import annotations

import ast
import difflib
from functools import cache
from pathlib import Path

from .. import builtins
from ..errors import UsageError

#: The contracts whose subjects take --scenarios (a pipeline's scenarios are its own prompts).
VERIFY_LEVEL = tuple(row.name for row in builtins.CONTRACTS if row.kind != "pipeline")


def _source(contract: str) -> Path:
    """<package>/scenarios.py of the contract's bundle (builtins.CONTRACTS: "specref.conformance.chain.contract:X")."""
    row = next(row for row in builtins.CONTRACTS if row.name == contract)
    package = row.bundle.split(":")[0].rsplit(".", 1)[0].split(".")
    return Path(__file__).resolve().parents[1].joinpath(*package[1:], "scenarios.py")


@cache
def names(contract: str) -> tuple[str, ...]:
    """The keys of the contract's CATALOGUE, in declaration order, from its source."""
    tree = ast.parse(_source(contract).read_text(), str(_source(contract)))
    constants, catalogue = {}, None
    for node in tree.body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None
        if isinstance(node, ast.AnnAssign):
            target = node.target
        if not isinstance(target, ast.Name) or node.value is None:
            continue
        if target.id == "CATALOGUE":
            catalogue = node.value
        else:
            try:
                constants[target.id] = ast.literal_eval(node.value)
            except (ValueError, TypeError):
                pass  # not a literal: a catalogue key never names it
    if not isinstance(catalogue, ast.Dict):
        raise RuntimeError(f"{_source(contract)}: no `CATALOGUE = {{...}}` dict literal to read the names from")
    out: list[str] = []
    for key, value in zip(catalogue.keys, catalogue.values):
        if key is not None:
            out.append(_evaluate(key, constants))
        elif isinstance(value, ast.DictComp):  # **{f"markov_g{g}": builder for g in (1, 5, 8)}
            keys = ast.DictComp(key=value.key, value=ast.Constant(None), generators=value.generators)
            out += list(_evaluate(keys, constants))
        else:
            raise RuntimeError(f"{_source(contract)}: CATALOGUE unpacks {ast.unparse(value)!r}, not a comprehension")
    return tuple(out)


def _evaluate(node: ast.expr, constants: dict):
    """A key expression of the catalogue, with only the module's literal constants in scope and no builtins."""
    expression = ast.fix_missing_locations(ast.Expression(node))
    return eval(compile(expression, "<CATALOGUE key>", "eval"), {"__builtins__": {}}, dict(constants))  # noqa: S307


def check_known(wanted: list[str], contracts: tuple[str, ...]) -> None:
    """Refuse, before anything loads, a --scenarios name that no scenario of `contracts` has (UsageError naming it,
    a close match and the known names). contracts: the subject's contract when its kind is known (a built-in, --tree),
    else every verify-level contract (a file's kind is read only when it loads)."""
    known = {contract: names(contract) for contract in contracts}
    every = [name for group in known.values() for name in group]
    for name in wanted:
        if name in every:
            continue
        close = difflib.get_close_matches(name, every, n=1)
        guess = f" (did you mean {close[0]!r}?)" if close else ""
        listed = ", ".join(every) if len(known) == 1 else "; ".join(f"{c}: {', '.join(n)}" for c, n in known.items())
        raise UsageError(f"--scenarios: {name!r} is unknown{guess}; known: {listed}")


__all__ = ["VERIFY_LEVEL", "check_known", "names"]
