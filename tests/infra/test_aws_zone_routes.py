"""Routes of nodes placed in another zone, and what a destroy does to mounted data volumes, applied
by the real terraform against a moto server (issue 37 defects 13 and 14).

The head (public_ip: head) and a worker were replaced into us-east-1b at recovery (placement.json
holds that, as failover writes it), the third node stays in us-east-1a, with a NAT gateway: the
head must answer on its Elastic IP (its subnet routed to the internet gateway) and both workers
must go out through the NAT gateway, the one in us-east-1b too (its zone subnet was routed to the
internet gateway because the head shared it, which left that worker with no way out). The data
volumes' attachments are planned skip_destroy: a replacement or destroy leaves detaching to the
instances' termination.
"""

from __future__ import annotations

import json

import pytest
from moto_aws import aws, trainkit, write_spec

from trainkit.cluster.placement import zone_subnet_cidr
from trainkit.workspace import Workspace

pytestmark = pytest.mark.usefixtures("tf_cli_config")


def _default_route(ec2, subnet_id: str) -> str:
    """The target of 0.0.0.0/0 in the route table associated with `subnet_id`."""
    tables = ec2.describe_route_tables(Filters=[{"Name": "association.subnet-id", "Values": [subnet_id]}])["RouteTables"]
    assert len(tables) == 1, tables
    route, = [r for r in tables[0]["Routes"] if r.get("DestinationCidrBlock") == "0.0.0.0/0"]
    return route.get("NatGatewayId") or route.get("GatewayId")


def test_a_head_and_a_worker_placed_in_another_zone_route_to_the_gateway_and_the_nat_with_attachments_kept_on_destroy(
        repo, tmp_path, moto):
    spec = write_spec(repo, tmp_path, moto, nodes=3, zone=["us-east-1a", "us-east-1b"], spot={"enabled": False},
                      network={"admin_cidrs": ["203.0.113.0/24"], "public_ip": "head", "placement_group": False,
                               "nat_gateway": True},
                      storage={"data_disk": {"category": "gp3", "size_gb": 20}, "nas": {"enabled": False}})
    ws = Workspace.for_cluster("aws-moto", tmp_path / "ws").ensure().root
    apart = {"zone": "us-east-1b", "subnet_cidr": zone_subnet_cidr("10.42.0.0/16", "10.42.1.0/24", [])}
    (ws / "placement.json").write_text(json.dumps({"version": 1, "zone": "us-east-1a", "type": "g5.12xlarge",
                                                   "spot": False, "nodes": {"0": apart, "1": apart}}))
    trainkit("apply", spec, "--workdir", ws, "--yes", "--no-provision")

    plan = json.loads((ws / "plan.json").read_text())
    attachments = [c["change"]["after"] for c in plan["resource_changes"] if c["type"] == "aws_volume_attachment"]
    assert len(attachments) == 3 and all(a["skip_destroy"] is True for a in attachments)

    ec2 = aws(moto, "ec2")
    nodes = {next(t["Value"] for t in i["Tags"] if t["Key"] == "Name"): i
             for r in ec2.describe_instances(Filters=[{"Name": "instance-state-name", "Values": ["running"]}])[
                 "Reservations"] for i in r["Instances"]}
    head, worker_b, worker_a = (nodes[f"aws-moto-node-{i}"] for i in range(3))
    assert [n["Placement"]["AvailabilityZone"] for n in (head, worker_b, worker_a)] == [
        "us-east-1b", "us-east-1b", "us-east-1a"]
    assert head["SubnetId"] != worker_b["SubnetId"]
    assert _default_route(ec2, head["SubnetId"]).startswith("igw-")
    assert _default_route(ec2, worker_b["SubnetId"]).startswith("nat-")
    assert _default_route(ec2, worker_a["SubnetId"]).startswith("nat-")

    # no destroy: the moto fixture resets the emulator (test_aws_lifecycle destroys clusters whose
    # attachments are skip_destroy and checks nothing is left)
