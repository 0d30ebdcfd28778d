"""The house is kept by a tool: the import-linter contracts in pyproject.toml (layers, node-side code
apart from the control side, no circles) pass on the package, and fail when a module imports
across a layer the wrong way. Run on a copy of the package, so the real tree is never edited."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")


def lint(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}  # the copy, ahead of the installed package
    return subprocess.run([str(LINT), "--config", str(root / "pyproject.toml"), "--no-cache"], cwd=root,
                          env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    shutil.copytree(REPO / "trainkit", tmp_path / "trainkit",
                    ignore=shutil.ignore_patterns("__pycache__", "_data"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def append(path: Path, line: str) -> None:
    path.write_text(path.read_text() + f"\n{line}\n")


def test_the_contracts_hold_on_the_package(copy):
    proc = lint(copy)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "3 kept, 0 broken" in proc.stdout  # (the tests below prove it is the copy that is read)


@pytest.mark.parametrize("module,line,broken", [
    ("util/grammar.py", "from trainkit.commands import ops", "trainkit.util is not allowed to import trainkit.commands"),
    ("stack/render.py", "from trainkit.provision import reach", "trainkit.stack is not allowed to import trainkit.provision"),
    ("train/engine.py", "from trainkit.spec import schema", "trainkit.train is not allowed to import trainkit.spec"),
    ("workspace.py", "from trainkit.provision import inventory", "trainkit.workspace is not allowed to import trainkit.provision"),
])
def test_an_import_against_the_layers_breaks_a_contract(copy, module, line, broken):
    append(copy / "trainkit" / module, line)
    proc = lint(copy)
    assert proc.returncode == 1, proc.stdout[-3000:]
    assert broken in proc.stdout.replace("\n", " ")
