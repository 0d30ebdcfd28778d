"""A create whose response was lost, through the fault proxy (tests/infra/fault_proxy.py): moto
performs it, the answer never arrives, and `destroy --sweep` must still leave nothing. A module
of its own (it was in test_aws_faults.py) so that pytest-xdist runs it beside the throttled
lifecycle there: each is minutes of the aws provider's polls.
"""

from __future__ import annotations

import ipaddress
import json

import pytest
from fault_proxy import Faults
from moto_aws import assert_nothing_left, aws, leftovers, trainkit, write_spec

from trainkit import errors

pytestmark = pytest.mark.usefixtures("tf_cli_config")


def test_a_create_whose_response_was_lost_is_swept(repo, tmp_path, faulty_moto):
    """moto creates the subnet, the answer never arrives, the SDK sends CreateSubnet again: a second
    subnet (tagged, unknown to terraform) or a conflict with the first. `destroy` deletes the copy
    terraform never recorded, in the cluster's VPC, before terraform destroy (whose DeleteVpc it
    would block); `destroy --sweep` deletes what is left whatever terraform destroy did."""
    moto, proxy = faulty_moto
    proxy.faults = Faults(lose={"CreateSubnet": 1})
    spec = write_spec(repo, tmp_path, proxy.url, nodes=1)
    ws = tmp_path / "ws"
    trainkit("apply", spec, "--workdir", ws, "--no-provision", "--yes", check_rc=None)
    assert ("lose", "CreateSubnet") in proxy.faults_done
    state_subnets = json.loads((ws / "terraform" / "terraform.tfstate").read_text())
    tracked = {r["instances"][0]["attributes"]["id"] for r in state_subnets["resources"]
               if r["type"] == "aws_subnet" and r["instances"]}
    assert set(leftovers(moto, "aws-moto")["subnets"]) - tracked  # a subnet terraform never learned of

    copies = set(leftovers(moto, "aws-moto")["subnets"]) - tracked

    # A create cut off by an interrupt leaves an EFS mount target the state does not hold: it takes
    # no tags, and it keeps the file system (FileSystemInUse) and its subnet from being deleted.
    # Here: a tagged subnet in another zone, and a mount target of the cluster's file system in it.
    ec2, efs = aws(moto, "ec2"), aws(moto, "efs")
    vpc = next(r["instances"][0]["attributes"] for r in state_subnets["resources"] if r["type"] == "aws_vpc")
    fs = next(r["instances"][0]["attributes"]["id"] for r in state_subnets["resources"]
              if r["type"] == "aws_efs_file_system")
    used = [ipaddress.ip_network(n["CidrBlock"]) for n in ec2.describe_subnets(
        Filters=[{"Name": "vpc-id", "Values": [vpc["id"]]}])["Subnets"]]
    free = next(n for n in ipaddress.ip_network(vpc["cidr_block"]).subnets(new_prefix=24)
                if not any(n.overlaps(u) for u in used))
    extra = ec2.create_subnet(VpcId=vpc["id"], CidrBlock=str(free), AvailabilityZone="us-east-1c", TagSpecifications=[
        {"ResourceType": "subnet", "Tags": [{"Key": "trainkit-cluster", "Value": "aws-moto"}]}])["Subnet"]["SubnetId"]
    target = efs.create_mount_target(FileSystemId=fs, SubnetId=extra)["MountTargetId"]

    # A plain destroy (no --sweep) deletes the copy first: it carries the cluster's tag and sits in
    # the VPC this destroy deletes, whose DeleteVpc it would block. terraform destroy then fails on
    # the security group (an IAM policy denies DeleteSecurityGroup); the workspace is kept.
    denied = (403, "UnauthorizedOperation", "You are not authorized to perform this operation.")
    proxy.faults = Faults(refuse={"DeleteSecurityGroup": denied})
    plain = trainkit("destroy", spec, "--workdir", ws, "--yes", check_rc=errors.DESTROY)
    assert "in the cluster's network that the state does not hold" in plain.stderr, plain.stderr
    assert all(f"subnet {c}" in plain.stderr for c in copies | {extra}) and "Traceback" not in plain.stderr
    assert f"mount-target {target}" in plain.stderr
    left = leftovers(moto, "aws-moto")
    assert not set(left["subnets"]) & (copies | {extra}) and left["security_groups"]  # the copies are gone
    assert not left["file_systems"]   # its stray mount target no longer held it; the group stays

    # With --sweep, terraform destroy fails on the group again: the sweep deletes everything else it
    # can and names what it could not delete
    stuck = trainkit("destroy", spec, "--workdir", ws, "--yes", "--sweep", check_rc=errors.DESTROY)
    assert "terraform destroy failed" in stuck.stderr and "could not delete security-group sg-" in stuck.stderr, \
        stuck.stderr
    assert "Traceback" not in stuck.stderr and (ws / "terraform").exists()  # the workspace is kept
    assert leftovers(moto, "aws-moto")["security_groups"]

    proxy.faults = Faults()
    trainkit("destroy", spec, "--workdir", ws, "--yes")
    assert_nothing_left(moto, "aws-moto")

