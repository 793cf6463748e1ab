"""Installed distributions and all they require, as a folder of symlinks: a read-only reuse of what is at hand.

`link_closure(requirements, folder)` finds each requirement's installed distribution in this interpreter, then
those they require (markers evaluated without extras), checks every version against its specifier, and links each
distribution's top-level entries (packages, modules, .libs folders, its .dist-info) into `folder`. A venv that adds
`folder` to its path through a .pth file then imports those distributions and nothing else, as it would from a
`pip install --target` of the same requirements, without a second copy to unpack and byte-compile (the linked
packages keep the __pycache__ of their install).

It returns None when the closure cannot be linked faithfully, with the reason: a requirement not installed or at
another version, a distribution without a RECORD, or a top-level folder shared with a distribution outside the
closure (a namespace package, whose link would show the other distribution too).
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
from pathlib import Path

try:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
except ImportError:  # pip vendors it
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.utils import canonicalize_name


def _installed() -> dict[str, metadata.Distribution]:
    """Canonical name -> the distribution this interpreter imports (the first on sys.path)."""
    found: dict[str, metadata.Distribution] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canonicalize_name(name), dist)
    return found


def closure(requirements: list[str]) -> tuple[list[metadata.Distribution], str]:
    """(the installed distributions of requirements and all they require, "") or ([], why not)."""
    installed = _installed()
    chosen: dict[str, metadata.Distribution] = {}
    pending = [Requirement(r) for r in requirements]
    while pending:
        requirement = pending.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(requirement.name)
        dist = installed.get(name)
        if dist is None:
            return [], f"{requirement} is not installed here"
        if not requirement.specifier.contains(dist.version, prereleases=True):
            return [], f"{requirement} is installed at {dist.version}"
        if requirement.extras:
            return [], f"{requirement} asks for extras"
        if name not in chosen:
            chosen[name] = dist
            pending.extend(Requirement(r) for r in dist.requires or [])
    return list(chosen.values()), ""


def _top_level(dist: metadata.Distribution) -> set[str] | None:
    """First path parts of the distribution's installed files (none outside its site folder), or None: no RECORD."""
    if dist.files is None:
        return None
    return {f.parts[0] for f in dist.files if f.parts and f.parts[0] != ".."}


def link_closure(requirements: list[str], folder: Path) -> tuple[list[str] | None, str]:
    """Link the closure of requirements into folder: ([name==version, ...], "") or (None, why not)."""
    dists, why = closure(requirements)
    if not dists:
        return None, why
    chosen = {canonicalize_name(d.metadata["Name"]) for d in dists}
    owners: dict[tuple[Path, str], set[str]] = {}  # (site folder, top-level entry) -> canonical names
    for dist in _installed().values():
        for entry in _top_level(dist) or ():
            owners.setdefault((Path(dist.locate_file("")), entry), set()).add(canonicalize_name(dist.metadata["Name"]))
    folder.mkdir(parents=True, exist_ok=True)
    for dist in dists:
        entries = _top_level(dist)
        if entries is None:
            return None, f"{dist.metadata['Name']} has no RECORD"
        site = Path(dist.locate_file(""))
        for entry in sorted(entries):
            if entry == "__pycache__":  # top-level modules' bytecode: link those files only
                (folder / entry).mkdir(exist_ok=True)
                for file in dist.files:
                    if file.parts[0] == entry and not (folder / file).exists():
                        os.symlink(site / file, folder / file)
                continue
            others = owners.get((site, entry), set()) - chosen
            if others:
                return None, f"{entry} in {site} is shared with {sorted(others)}"
            if not (folder / entry).exists():
                os.symlink(site / entry, folder / entry)
    return sorted(f"{d.metadata['Name']}=={d.version}" for d in dists), ""
