"""The controller instance and its identity (issue 42), applied by the real terraform against a moto
server: the controller is on demand (no spot request, no InstanceLifecycle), carries the instance
profile of its own role, the role's inline policy is the documented one (tag-scoped statements), the
review shows that policy and prices the controller, the policy reaches the s3 backend's state under
the spec's prefix only, and the user's access key reaches none of the rendered files, the workspace
or the controller's user data.

moto does not evaluate IAM conditions (moto/iam/access_control.py: "TODO add support for the
Resource and Condition parts of IAM policies"), so the tag scoping cannot be proven by a refused
call here: the test asserts the policy document moto holds instead, statement by statement.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from moto_aws import AWS_ENV, aws, write_spec

from trainkit.workspace import Workspace

pytestmark = pytest.mark.usefixtures("tf_cli_config")

# Key values no file of the repo or the emulator holds, so a hit in a file can only be a leak.
KEY_ID, SECRET = "AKIACTLRLEAKPROBE042", "ctlr/leak+probe/secret/value/issue42xyz"


def _trainkit(*args) -> subprocess.CompletedProcess:
    env = {**os.environ, **AWS_ENV, "AWS_ACCESS_KEY_ID": KEY_ID, "AWS_SECRET_ACCESS_KEY": SECRET}
    env.pop("CHECKOV", None)
    proc = subprocess.run([sys.executable, "-m", "trainkit", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def _statements(policy: str | dict) -> dict[str, dict]:
    doc = json.loads(policy) if isinstance(policy, str) else policy
    return {s["Sid"]: s for s in doc["Statement"]}


def test_the_controller_is_on_demand_with_a_tag_scoped_role_and_no_copied_key(repo, tmp_path, moto):
    aws(moto, "s3").create_bucket(Bucket="tfstate")
    spec = write_spec(repo, tmp_path, moto, nodes=1, spot={"enabled": True, "max_price": 3.5},
                      controller={"enabled": True}, backend={"type": "s3", "bucket": "tfstate", "region": "us-east-1"},
                      storage={"system_disk": {"size_gb": 30}, "data_disk": {"enabled": False}, "nas": {"enabled": False}})
    ws = Workspace.for_cluster("aws-moto", tmp_path / "ws").ensure().root
    plan = _trainkit("plan", spec, "--workdir", ws).stdout
    assert "Controller policy" in plan and "ec2:RunInstances on arn:aws:ec2:us-east-1:*:instance/* if " \
        "StringEquals aws:RequestTag/trainkit-cluster = aws-moto" in plan, plan
    assert "controller t3a.small (on-demand): 0.0188" in plan, plan
    _trainkit("apply", spec, "--workdir", ws, "--yes", "--no-provision")

    ec2, iam = aws(moto, "ec2"), aws(moto, "iam")
    running = [i for r in ec2.describe_instances(Filters=[{"Name": "instance-state-name", "Values": ["running"]}])[
        "Reservations"] for i in r["Instances"]]
    by_name = {next(t["Value"] for t in i["Tags"] if t["Key"] == "Name"): i for i in running}
    ctl = by_name["aws-moto-controller"]
    assert ctl["InstanceType"] == "t3a.small" and "InstanceLifecycle" not in ctl
    assert by_name["aws-moto-node-0"]["InstanceType"] == "g5.12xlarge"   # the node keeps its spot type
    assert not ec2.describe_spot_instance_requests(
        Filters=[{"Name": "instance-id", "Values": [ctl["InstanceId"]]}])["SpotInstanceRequests"]
    assert ctl["IamInstanceProfile"]["Arn"].endswith(":instance-profile/aws-moto-controller")
    assert {"Key": "trainkit-cluster", "Value": "aws-moto"} in ctl["Tags"]

    profile = iam.get_instance_profile(InstanceProfileName="aws-moto-controller")["InstanceProfile"]
    assert [r["RoleName"] for r in profile["Roles"]] == ["aws-moto-controller"]
    trust = iam.get_role(RoleName="aws-moto-controller")["Role"]["AssumeRolePolicyDocument"]
    assert trust["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}
    assert iam.list_attached_role_policies(RoleName="aws-moto-controller")["AttachedPolicies"] == []
    held = _statements(iam.get_role_policy(RoleName="aws-moto-controller",
                                           PolicyName="aws-moto-controller")["PolicyDocument"])
    tag = {"StringEquals": {"aws:ResourceTag/trainkit-cluster": "aws-moto"}}
    assert held["LaunchOnlyTaggedInstances"]["Condition"] == {
        "StringEquals": {"aws:RequestTag/trainkit-cluster": "aws-moto"}}
    assert held["ChangeOnlyTheClusterInstancesAndVolumes"]["Condition"] == tag
    assert "ec2:TerminateInstances" in held["ChangeOnlyTheClusterInstancesAndVolumes"]["Action"]
    assert held["TagOnlyOnCreate"]["Condition"] == {
        "StringEquals": {"ec2:CreateAction": ["RunInstances", "CreateVolume"]}}
    assert held["LaunchIntoTheClusterNetwork"]["Condition"] == tag
    # The s3 backend's state and lock file, under the spec's prefix only (no DynamoDB table named).
    assert held["ReadWriteTheState"]["Resource"] == "arn:aws:s3:::tfstate/aws-moto/*"
    assert held["ListTheState"]["Condition"] == {"StringLike": {"s3:prefix": ["aws-moto/*"]}}
    assert "LockTheState" not in held
    # Every mutating statement is conditioned or names the cluster's own resources; only reads are "*".
    for sid, s in held.items():
        if s["Resource"] == "*":
            assert all(a.endswith(":Describe*") for a in s["Action"]), sid
    assert not [s for s in held.values() if any(a.startswith("iam:") and a not in (
        "iam:GetRole", "iam:GetRolePolicy", "iam:ListRolePolicies", "iam:ListAttachedRolePolicies",
        "iam:GetInstanceProfile") for a in s["Action"])]
    assert held == _statements(json.loads((ws / "plan.json").read_text())["planned_values"]["outputs"][
        "controller_policy"]["value"])

    user_data = ec2.describe_instance_attribute(InstanceId=ctl["InstanceId"], Attribute="userData")
    found = [str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")
             if p.is_file() and ".terraform" not in p.parts and _leaks(p.read_bytes())]
    assert found == [] and not _leaks(json.dumps(user_data).encode())


def _leaks(data: bytes) -> bool:
    return KEY_ID.encode() in data or SECRET.encode() in data
