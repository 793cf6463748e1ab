"""Reproduce snippets run from any folder and import only what they use (chain and tree snippets, CLI-made).

A user runs `specref conform my_verifier.py:verify` with a path relative to where they stand, then pastes the
snippet from report.md somewhere else: the report records the file's absolute path, so the snippet still loads it.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from specref.outputs import REPORTS

pytestmark = pytest.mark.exact

IMPLS = Path(__file__).parent / "external_impls"
_script = shutil.which("specref")
SPECREF = [_script] if _script else [sys.executable, "-m", "specref.cli"]


def snippets(markdown: str, heading: str = "") -> list[str]:
    """The reproduce snippets of report.md, from the failure section `heading` on (the whole report by default)."""
    section = markdown[markdown.index(f"### `{heading}`") :] if heading else markdown
    return re.findall(r"Reproduce:\n\n```python\n(.*?)```", section, re.S)


def unused_imports(code: str) -> set[str]:
    tree = ast.parse(code)
    imported = {alias.asname or alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}  # fmt: skip
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    return imported - used


def conform_here(folder: Path, *args: str) -> str:
    """`specref conform` run in `folder` with a relative IMPL path; the report.md it wrote."""
    result = subprocess.run([*SPECREF, "conform", *args, "--no-plots"], cwd=folder, capture_output=True, text=True,
                            timeout=300)  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    (report,) = (folder / REPORTS).glob("*/report.md")
    return report.read_text()


def run_elsewhere(code: str, folder: Path) -> subprocess.CompletedProcess:
    folder.mkdir()
    (folder / "snippet.py").write_text(code)
    return subprocess.run([sys.executable, "snippet.py"], cwd=folder, capture_output=True, text=True, timeout=300)


def test_a_chain_snippet_runs_from_another_folder(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(IMPLS / "misbehaving.py", work / "misbehaving.py")
    markdown = conform_here(work, "misbehaving.py:raises_in_helper", "--scenarios", "markov_g1", "--rows", "300")
    code = snippets(markdown, "adapter[markov_g1]")[0]
    assert str(work / "misbehaving.py") in code and not unused_imports(code), code
    result = run_elsewhere(code, tmp_path / "elsewhere")
    assert "ValueError" in result.stderr and "rejected a batch of 256 rows" in result.stderr, result.stderr


def test_a_tree_snippet_runs_from_another_folder(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "noisy.py").write_text(  # a random id in [0, V]: V is out of range on the rows the generator picks
        "import torch\n"
        "def verify(target_probs, draft_probs, draft_tokens, parents, generator=None):\n"
        "    v = target_probs.shape[-1]\n"
        "    return torch.randint(0, v + 1, (len(draft_tokens), 1), generator=generator)\n"
    )
    args = ("--tree", "--rows", "600", "--scenarios", "tree_eagle_markov", "--seed", "3")
    code = snippets(conform_here(work, "noisy.py:verify", *args))[0]
    assert str(work / "noisy.py") in code and not unused_imports(code), code
    result = run_elsewhere(code, tmp_path / "elsewhere")
    assert result.returncode == 0 and result.stdout.strip(), result.stderr
