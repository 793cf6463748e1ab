"""Where runs write by default: `REPORTS`, a folder of the working directory that version control ignores.

`specref conform` and `specref demo` write there unless told otherwise (--report, --out), and say where in their
output. The folder carries a .gitignore of its own (`*`), so that running them leaves any git checkout clean,
this repository's included (its .gitignore lists the folder too). The committed reports/ of this repository are
written only on purpose: by the nox sessions (`nox -s conformance`, `nox -s peers`, ...) and by `specref demo --out
reports/demo`.
"""

from __future__ import annotations

from pathlib import Path

REPORTS = "specref-reports"


def default_folder(*parts: str) -> str:
    """REPORTS/<parts...> (not created), with REPORTS itself created and git-ignored; OSError when it cannot be."""
    root = Path(REPORTS)
    root.mkdir(parents=True, exist_ok=True)
    ignore = root / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# written by specref: runs write here by default; nothing here is to be committed\n*\n")
    return str(root.joinpath(*parts))


__all__ = ["REPORTS", "default_folder"]
