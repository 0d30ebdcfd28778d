"""Module READMEs carry Inputs/Outputs tables generated from the .tf files (terraform/tools/module_docs.py)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.unit


def _module_docs():
    spec = importlib.util.spec_from_file_location("module_docs", REPO / "terraform/tools/module_docs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


MODULES = sorted(p for p in (REPO / "terraform/modules").iterdir() if (p / "variables.tf").is_file())


@pytest.mark.parametrize("module", MODULES, ids=lambda p: p.name)
def test_readme_tables_are_the_ones_generated_from_the_tf_files(module):
    docs = _module_docs()
    readme = (module / "README.md").read_text()
    assert docs.updated(readme, docs.tables(module)) == readme, (
        f"{module.name}/README.md is out of date: run `python terraform/tools/module_docs.py`")


def test_a_changed_variable_description_makes_the_readme_stale(tmp_path):
    docs = _module_docs()
    copy = tmp_path / "aws"
    shutil.copytree(REPO / "terraform/modules/aws", copy)
    tf = copy / "variables.tf"
    tf.write_text(tf.read_text().replace("IPv4 CIDR of the cluster VPC", "The VPC range"))
    readme = (copy / "README.md").read_text()
    regenerated = docs.updated(readme, docs.tables(copy))
    assert regenerated != readme and "| `vpc_cidr` | The VPC range |" in regenerated
