"""Terraform CLI on the modules and the rendered stacks: `fmt -check`, and offline init + validate.

Only hashicorp/aws is installable offline here (tf_cli_config points at the machine's mirror),
so `terraform validate` runs on the aws stacks; the other clouds are checked against the provider
schema snapshot (test_terraform_schema.py) and by checkov (test_checkov.py).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from trainkit import clouds
from trainkit.spec.resolve import load_cluster
from trainkit.stack.render import write_stack

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "clusters"
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBkRh4VOcYwCqMTmS1w1tJmXbH3v0xJ7lK0Zq2yC5FQK trainkit-test"
CLOUDS = clouds.TERRAFORM_TARGETS   # the shipped rooms with a Terraform module


def cloud_examples() -> list[str]:
    return sorted(p.stem for p in EXAMPLES.glob("*.yaml") if load_cluster(p).spec.cloud in CLOUDS)


@pytest.fixture(scope="module")
def stacks(tmp_path_factory) -> dict[str, Path]:
    """Every cloud example rendered into its own folder: {example name: folder}."""
    root = tmp_path_factory.mktemp("stacks")
    out = {}
    for name in cloud_examples():
        write_stack(load_cluster(EXAMPLES / f"{name}.yaml"), SSH_KEY, root / name)
        out[name] = root / name
    return out


def run(terraform_bin: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([terraform_bin, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_modules_pass_terraform_fmt(terraform_bin):
    result = run(terraform_bin, "fmt", "-check", "-recursive", "-diff", "terraform", cwd=REPO)
    assert result.returncode == 0, result.stdout + result.stderr


def test_rendered_stacks_pass_terraform_fmt(terraform_bin, stacks):
    for name, folder in stacks.items():
        result = run(terraform_bin, "fmt", "-check", "-recursive", "-diff", ".", cwd=folder)
        assert result.returncode == 0, f"{name}:\n{result.stdout}{result.stderr}"


@pytest.mark.parametrize("name", [n for n in cloud_examples() if n.startswith("aws")])
def test_rendered_aws_stack_validates_offline(terraform_bin, tf_cli_config, stacks, name):
    folder = stacks[name]
    init = run(terraform_bin, "init", "-backend=false", "-input=false", "-no-color", cwd=folder)
    assert init.returncode == 0, init.stdout + init.stderr
    result = run(terraform_bin, "validate", "-json", "-no-color", cwd=folder)
    assert result.returncode == 0, result.stdout + result.stderr
    assert '"valid": true' in result.stdout
