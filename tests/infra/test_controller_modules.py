"""The modules with the controller on (issue 42), through the real terraform: the AWS stack (remote
s3 state with a DynamoDB lock) validates against the real hashicorp/aws provider; the seed clouds' modules, whose instance identity is
not built yet, refuse `controller` at validate with the message that names the field and the fix.
Plan and apply with the controller on are in test_aws_controller.py (moto)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from trainkit.spec.resolve import load_cluster
from trainkit.stack.render import write_stack

REPO = Path(__file__).resolve().parents[2]
SSH_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBkRh4VOcYwCqMTmS1w1tJmXbH3v0xJ7lK0Zq2yC5FQK trainkit-test"
BACKEND = {"aws": {"type": "s3", "bucket": "tfstate-ctl", "dynamodb_table": "tf-locks"}}


def _stack(tmp_path: Path, cloud: str) -> Path:
    data = yaml.safe_load((REPO / f"examples/clusters/{cloud}.yaml").read_text())
    data["controller"] = {"enabled": True}
    data["backend"] = BACKEND.get(cloud, {"type": "local"})
    spec = tmp_path / f"{cloud}.yaml"
    spec.write_text(yaml.safe_dump(data))
    write_stack(load_cluster(spec), SSH_KEY, tmp_path / cloud)
    return tmp_path / cloud


def _tf(terraform_bin: str, folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([terraform_bin, *args, "-no-color"], cwd=folder, capture_output=True, text=True, timeout=300)


def test_the_aws_stack_with_the_controller_and_remote_state_validates(terraform_bin, tf_cli_config, tmp_path):
    folder = _stack(tmp_path, "aws")
    assert _tf(terraform_bin, folder, "init", "-backend=false", "-input=false").returncode == 0
    result = _tf(terraform_bin, folder, "validate")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("cloud", ["alicloud", "tencentcloud", "huaweicloud"])
def test_a_seed_cloud_refuses_the_controller_naming_the_field(terraform_bin, tf_cli_config, tmp_path, cloud):
    folder = _stack(tmp_path, cloud)
    assert _tf(terraform_bin, folder, "init", "-backend=false", "-input=false").returncode == 0
    result = _tf(terraform_bin, folder, "validate")
    said = " ".join((result.stdout + result.stderr).split())
    assert result.returncode != 0 and "controller: this module does not render the controller instance yet" in said, said
