"""Edges of the review: apply refuses a saved plan over budget (real terraform against the moto
server, the AWS API emulator standing in for AWS), and checkov's findings join the review."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
import yaml

from trainkit.stack.checkov import scan_plan

REPO = Path(__file__).resolve().parents[2]


def trainkit(*args) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_PROXY": "127.0.0.1,localhost", "AWS_ACCESS_KEY_ID": "test",
           "AWS_SECRET_ACCESS_KEY": "test", "CHECKOV": "/nonexistent/checkov"}
    return subprocess.run([sys.executable, "-m", "trainkit", *args], capture_output=True, text=True,
                          env=env, timeout=600)


@pytest.mark.usefixtures("tf_cli_config")
def test_apply_refuses_a_saved_plan_once_the_budget_is_below_the_known_cost(tmp_path, moto):
    spec = yaml.safe_load((REPO / "examples/clusters/aws-moto.yaml").read_text())
    spec["endpoints"] = {k: moto for k in spec["endpoints"]}
    path, ws = tmp_path / "cluster.yaml", str(tmp_path / "ws")
    path.write_text(yaml.safe_dump(spec))
    plan = trainkit("plan", str(path), "--workdir", ws, "--format", "json")
    assert plan.returncode == 0, plan.stderr
    rev = json.loads(plan.stdout)
    assert rev["cost"]["upper_bound"] and rev["cost"]["items"][0]["per_hour"] == 2 * 3.5
    assert "checkov did not run" in rev["checkov"]
    # the budget does not change the rendered stack: the saved plan stays fresh, and is refused
    spec["budget"] = {"max_per_hour": 5}
    path.write_text(yaml.safe_dump(spec))
    apply = trainkit("apply", str(path), "--workdir", ws, "--yes", "--no-provision")
    assert apply.returncode == 11, apply.stdout + apply.stderr
    assert "budget-exceeded" in apply.stderr
    ec2 = boto3.client("ec2", endpoint_url=moto, region_name="us-east-1", aws_access_key_id="test",
                       aws_secret_access_key="test")
    assert not [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]


def test_checkov_failed_checks_become_warn_findings(tmp_path, monkeypatch):
    checkov = Path(os.environ.get("CHECKOV") or REPO / ".venv-checkov" / "bin" / "checkov")
    if not checkov.exists():
        pytest.fail(f"checkov not found at {checkov}: run `make checkov` or set CHECKOV")
    monkeypatch.setenv("CHECKOV", str(checkov))
    volume = {"availability_zone": "us-east-1a", "encrypted": False, "size": 100, "type": "gp3", "tags": None}
    plan = {"format_version": "1.2", "terraform_version": "1.11.4",
            "planned_values": {"root_module": {"resources": [
                {"address": "aws_ebs_volume.data", "mode": "managed", "type": "aws_ebs_volume", "name": "data",
                 "provider_name": "registry.terraform.io/hashicorp/aws", "schema_version": 0,
                 "values": volume}]}},
            "resource_changes": [{"address": "aws_ebs_volume.data", "mode": "managed", "type": "aws_ebs_volume",
                                  "name": "data", "provider_name": "registry.terraform.io/hashicorp/aws",
                                  "change": {"actions": ["create"], "before": None, "after": volume}}]}
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    findings, note = scan_plan(path)
    assert note.startswith("checkov ran")
    assert {"code": "checkov CKV_AWS_3", "severity": "warn",
            "message": "aws_ebs_volume.data: Ensure all data stored in the EBS is securely encrypted"} in findings
