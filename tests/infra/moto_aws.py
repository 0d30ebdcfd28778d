"""Helpers for the infra tests that drive trainkit against a moto server (the AWS API emulator).

Not a test module: imported by test_aws_*.py (pytest puts this folder on sys.path).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import boto3
import yaml

# The emulator's fake keys, in the environment like real ones (never in a rendered file).
AWS_ENV = {"AWS_ACCESS_KEY_ID": "test", "AWS_SECRET_ACCESS_KEY": "test", "AWS_DEFAULT_REGION": "us-east-1",
           "NO_PROXY": "127.0.0.1,localhost"}


def write_spec(repo, tmp_path, moto_url, **changes) -> str:
    spec = yaml.safe_load((repo / "examples/clusters/aws-moto.yaml").read_text())
    spec["endpoints"] = {k: moto_url for k in spec["endpoints"]}
    spec.update(changes)
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump(spec))
    return str(path)


def trainkit(*args, check_rc=0, checkov=False, **kw) -> subprocess.CompletedProcess:
    """Run the trainkit CLI with the emulator's keys. Every plan (also the one inside apply) runs
    checkov when it is found ($CHECKOV, `make test` sets it), a few seconds of CPU each time: only
    a call with checkov=True gets it (test_aws_lifecycle asserts once that a real plan's review
    has checkov's result); the others run without it, as on a machine without checkov."""
    env = {**os.environ, **AWS_ENV}
    if checkov:
        env["CHECKOV"] = checkov_binary()
    else:
        env.pop("CHECKOV", None)
    proc = subprocess.run([sys.executable, "-m", "trainkit", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=600, **kw)
    if check_rc is not None:
        assert proc.returncode == check_rc, proc.stdout + proc.stderr
    return proc


def checkov_binary() -> str:
    """$CHECKOV, else the repository's own checkov venv (`make checkov`), as in test_checkov.py."""
    path = Path(os.environ.get("CHECKOV") or Path(__file__).resolve().parents[2] / ".venv-checkov/bin/checkov")
    assert path.exists(), f"checkov not found at {path}: run `make checkov` or set CHECKOV"
    return str(path)


def aws(moto_url: str, service: str):
    return boto3.client(service, endpoint_url=moto_url, region_name="us-east-1", aws_access_key_id="test",
                        aws_secret_access_key="test")


def running_nodes(moto_url: str, cluster: str) -> list[str]:
    reservations = aws(moto_url, "ec2").describe_instances(
        Filters=[{"Name": "tag:trainkit-cluster", "Values": [cluster]},
                 {"Name": "instance-state-name", "Values": ["pending", "running"]}])["Reservations"]
    return sorted(i["InstanceId"] for r in reservations for i in r["Instances"])


def leftovers(moto_url: str, cluster: str) -> dict[str, list]:
    """Everything in the emulator that belongs to the cluster (by tag, or not a default resource)."""
    kw = dict(endpoint_url=moto_url, region_name="us-east-1", aws_access_key_id="test",
              aws_secret_access_key="test")
    ec2, efs = boto3.client("ec2", **kw), boto3.client("efs", **kw)
    tagged = [{"Name": "tag:trainkit-cluster", "Values": [cluster]}]
    return {
        "instances": [i["InstanceId"] for r in ec2.describe_instances(Filters=tagged)["Reservations"]
                      for i in r["Instances"] if i["State"]["Name"] != "terminated"],
        "volumes": [v["VolumeId"] for v in ec2.describe_volumes()["Volumes"]],
        "file_systems": [f["FileSystemId"] for f in efs.describe_file_systems()["FileSystems"]],
        "security_groups": [g["GroupId"] for g in ec2.describe_security_groups()["SecurityGroups"]
                            if g["GroupName"] != "default"],
        "subnets": [s["SubnetId"] for s in ec2.describe_subnets()["Subnets"] if not s.get("DefaultForAz")],
        "vpcs": [v["VpcId"] for v in ec2.describe_vpcs()["Vpcs"] if not v.get("IsDefault")],
        "addresses": [a.get("AllocationId") for a in ec2.describe_addresses()["Addresses"]],
        "nat_gateways": [n["NatGatewayId"] for n in ec2.describe_nat_gateways()["NatGateways"]
                         if n["State"] not in ("deleting", "deleted")],
        "route_tables": [r["RouteTableId"] for r in ec2.describe_route_tables()["RouteTables"]
                         if not any(a.get("Main") for a in r.get("Associations", []))],
    }


def assert_nothing_left(moto_url, cluster):
    left = leftovers(moto_url, cluster)
    assert not any(left.values()), left
