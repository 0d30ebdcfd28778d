"""`trainkit destroy` when the workspace knows nothing: it asks the backend and the cloud, never guesses.

Real `trainkit` CLI and `terraform` against a moto server (the AWS API emulator) on 127.0.0.1. No
cluster is applied here (test_aws_lifecycle does that); the resources of a cluster whose state is
lost are created directly with boto3, tagged the way the module tags them.
"""

from __future__ import annotations

import pytest
from moto_aws import assert_nothing_left, aws, leftovers, trainkit, write_spec

from trainkit import errors

pytestmark = pytest.mark.usefixtures("tf_cli_config")
CLUSTER = "aws-moto"


def lost_cluster(moto_url: str) -> dict[str, str]:
    """A cluster's resources with their state gone (a deleted workspace): network, SG, node, disk,
    Elastic IP, NAT gateway, EFS with a mount target, key pair. Returns their ids."""
    ec2, efs = aws(moto_url, "ec2"), aws(moto_url, "efs")

    def tags(kind: str) -> list[dict]:
        return [{"ResourceType": kind, "Tags": [{"Key": "trainkit-cluster", "Value": CLUSTER}]}]

    vpc = ec2.create_vpc(CidrBlock="10.42.0.0/16", TagSpecifications=tags("vpc"))["Vpc"]["VpcId"]
    subnet = ec2.create_subnet(VpcId=vpc, CidrBlock="10.42.1.0/24",
                               TagSpecifications=tags("subnet"))["Subnet"]["SubnetId"]
    igw = ec2.create_internet_gateway(TagSpecifications=tags("internet-gateway"))["InternetGateway"]
    ec2.attach_internet_gateway(InternetGatewayId=igw["InternetGatewayId"], VpcId=vpc)
    rtb = ec2.create_route_table(VpcId=vpc, TagSpecifications=tags("route-table"))["RouteTable"]["RouteTableId"]
    ec2.associate_route_table(RouteTableId=rtb, SubnetId=subnet)
    sg = ec2.create_security_group(GroupName=f"{CLUSTER}-sg", Description="test", VpcId=vpc,
                                   TagSpecifications=tags("security-group"))["GroupId"]
    ec2.authorize_security_group_ingress(GroupId=sg, IpPermissions=[
        {"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": sg}]}])
    node = ec2.run_instances(ImageId="ami-1e749f67", MinCount=1, MaxCount=1, SubnetId=subnet,
                             TagSpecifications=tags("instance"))["Instances"][0]["InstanceId"]
    vol = ec2.create_volume(AvailabilityZone="us-east-1a", Size=10, TagSpecifications=tags("volume"))["VolumeId"]
    eip = ec2.allocate_address(Domain="vpc", TagSpecifications=tags("elastic-ip"))["AllocationId"]
    nat = ec2.create_nat_gateway(SubnetId=subnet, AllocationId=eip,
                                 TagSpecifications=tags("natgateway"))["NatGateway"]["NatGatewayId"]
    fs = efs.create_file_system(CreationToken=CLUSTER, Tags=[{"Key": "trainkit-cluster", "Value": CLUSTER}])
    efs.create_mount_target(FileSystemId=fs["FileSystemId"], SubnetId=subnet, SecurityGroups=[sg])
    ec2.create_key_pair(KeyName=CLUSTER, TagSpecifications=tags("key-pair"))
    return {"vpc": vpc, "node": node, "volume": vol, "eip": eip, "nat": nat, "fs": fs["FileSystemId"]}


def test_destroy_in_a_fresh_workspace_with_a_local_backend_says_so_and_finds_lost_resources(repo, tmp_path, moto):
    spec, ws = write_spec(repo, tmp_path, moto), tmp_path / "ws"
    ids = lost_cluster(moto)

    found = trainkit("destroy", spec, "--workdir", ws, "--yes", check_rc=errors.DESTROY)
    for rid in ids.values():
        assert rid in found.stderr  # every leftover is named
    assert "--sweep" in found.stderr and "Traceback" not in found.stderr
    assert leftovers(moto, CLUSTER)["instances"] == [ids["node"]]  # reported, not deleted

    declined = trainkit("destroy", spec, "--workdir", ws, "--sweep", input=f"{CLUSTER}\nn\n",
                        check_rc=errors.DESTROY)
    assert "Delete these" in declined.stderr and leftovers(moto, CLUSTER)["vpcs"] == [ids["vpc"]]

    swept = trainkit("destroy", spec, "--workdir", ws, "--sweep", "--yes")
    assert "nothing was applied" in swept.stdout and "0 left" in swept.stdout
    assert f"swept instance {ids['node']}" in swept.stdout
    assert_nothing_left(moto, CLUSTER)
    assert not aws(moto, "ec2").describe_key_pairs()["KeyPairs"]


def test_destroy_fails_loudly_when_the_state_backend_cannot_be_read(repo, tmp_path, moto):
    spec = write_spec(repo, tmp_path, moto, backend={"type": "s3", "bucket": "no-such-bucket"})
    failed = trainkit("destroy", spec, "--workdir", tmp_path / "ws", "--yes", check_rc=errors.DESTROY)
    assert "could not be read, so nothing was changed" in failed.stderr
    assert "no-such-bucket" in failed.stderr and "Traceback" not in failed.stderr
    assert f"fix: check `backend:` in {spec}" in failed.stderr  # the field to look at, in which file


def test_destroy_with_a_local_backend_and_no_state_and_an_empty_cloud_succeeds(repo, tmp_path, moto):
    spec, ws = write_spec(repo, tmp_path, moto), tmp_path / "ws"
    done = trainkit("destroy", spec, "--workdir", ws, "--yes")
    assert "nothing was applied from this workspace" in done.stdout and "0 left" in done.stdout
