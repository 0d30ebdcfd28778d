"""Failover at apply (issue: capacity-aware placement) on moto behind the fault proxy
(tests/infra/fault_proxy.py): every candidate zone refused; spot refused in every zone with
`spot.fallback: on_demand`. A module of its own so that pytest-xdist
runs it beside tests/infra/test_aws_faults.py (each moto apply costs minutes).
"""

from __future__ import annotations

import json
import re

import pytest
from fault_proxy import Faults
from moto_aws import assert_nothing_left, aws, trainkit, write_spec

from trainkit import errors

pytestmark = pytest.mark.usefixtures("tf_cli_config")


def test_every_candidate_refused_lists_the_attempts_and_leaves_nothing(repo, tmp_path, faulty_moto):
    """A new cluster whose every zone is refused: one message listing each attempt, exit 4, and
    what the attempts created (network, key pair) destroyed again."""
    moto, proxy = faulty_moto
    proxy.faults = Faults(no_capacity={("*", "g5.12xlarge")})
    spec = write_spec(repo, tmp_path, proxy.url, nodes=1, zone=["us-east-1a", "us-east-1b"],
                      storage={"data_disk": {"enabled": False}, "nas": {"enabled": False}})
    refused = trainkit("apply", spec, "--workdir", tmp_path / "ws", "--no-provision", "--yes",
                       check_rc=errors.APPLY)
    assert "every candidate was refused (2 tried)" in refused.stderr, refused.stderr
    assert "1. g5.12xlarge in us-east-1a: no capacity" in refused.stderr
    assert "2. g5.12xlarge in us-east-1b: no capacity" in refused.stderr and "Traceback" not in refused.stderr
    assert {zone for what, _ in proxy.faults_done if what.startswith("capacity:")
            for zone in [what.partition(":")[2]]} == {"us-east-1a", "us-east-1b"}
    assert_nothing_left(moto, "aws-moto")


def test_spot_refused_everywhere_falls_back_to_on_demand_and_destroy_leaves_nothing(repo, tmp_path, faulty_moto):
    """spot.fallback: on_demand: EC2 has no spot g5.12xlarge in either zone (on-demand it has): the
    nodes come up on-demand in the first zone, one line per attempt names the billing, the next
    plan keeps that placement (nothing to change), and destroy, 30% throttled, leaves nothing."""
    moto, proxy = faulty_moto
    proxy.faults = Faults(no_spot_capacity={("*", "g5.12xlarge")})
    spec = write_spec(repo, tmp_path, proxy.url, nodes=1, zone=["us-east-1a", "us-east-1b"],
                      spot={"enabled": True, "max_price": 3.5, "fallback": "on_demand"},
                      storage={"data_disk": {"enabled": False}, "nas": {"enabled": False}})
    ws = tmp_path / "ws"
    applied = trainkit("apply", spec, "--workdir", ws, "--no-provision", "--yes")
    for line in ("placement 1/4: g5.12xlarge in us-east-1a (spot): no capacity (InsufficientInstanceCapacity)",
                 "placement 2/4: g5.12xlarge in us-east-1b (spot): no capacity",
                 "placement 3/4: g5.12xlarge in us-east-1a (on-demand): up"):
        assert line in applied.stderr, applied.stderr
    assert {what for what, _ in proxy.faults_done} == {"spot-capacity:us-east-1a", "spot-capacity:us-east-1b"}
    running = [i for r in aws(moto, "ec2").describe_instances(Filters=[
        {"Name": "instance-state-name", "Values": ["pending", "running"]}])["Reservations"] for i in r["Instances"]]
    assert [(i["Placement"]["AvailabilityZone"], i.get("InstanceLifecycle", "on-demand")) for i in running] == [
        ("us-east-1a", "on-demand")]
    trainkit("plan", spec, "--workdir", ws, "--detailed-exitcode")   # exit 0: the placement is kept
    # destroy with 30% of EC2 requests throttled (RequestLimitExceeded): the provider's retries
    # and boto3's in the leftover check ride it out (test_aws_faults.py throttles apply and plan)
    proxy.faults = Faults(throttle=0.3, seed=11)
    trainkit("destroy", spec, "--workdir", ws, "--yes")
    assert sum(1 for what, _ in proxy.faults_done if what == "throttle") >= 3, proxy.faults_done
    assert_nothing_left(moto, "aws-moto")


def test_zones_that_do_not_offer_the_type_are_skipped_and_a_rule_whose_answer_was_lost_is_imported(
        repo, tmp_path, faulty_moto):
    """The preflight asks EC2 DescribeInstanceTypeOfferings (moto holds AWS's offerings: no
    p4d.24xlarge in us-east-1e or us-east-1f). A spec listing only such zones ends at once (exit
    4, nothing created, no RunInstances); with us-east-1a after them the plan review shows every
    candidate with what EC2 said, and apply goes straight to us-east-1a.

    That apply also meets lost answers: moto adds the first ingress and egress rules, the answers
    never arrive, the SDK sends them again and EC2 answers InvalidPermission.Duplicate. The apply
    imports those rules (the AWS room names their import IDs) and finishes: exit 0, every rule in
    the state once, nothing left to plan, and destroy leaves nothing."""
    moto, proxy = faulty_moto
    small = {"data_disk": {"enabled": False}, "nas": {"enabled": False}}
    net = {"admin_cidrs": ["203.0.113.0/24"], "public_ip": "head", "placement_group": False, "nat_gateway": False}
    nowhere = write_spec(repo, tmp_path, proxy.url, nodes=1, zone=["us-east-1f", "us-east-1e"],
                         instance={"type": "p4d.24xlarge"}, storage=small, network=net)
    ws = tmp_path / "ws"
    refused = trainkit("apply", nowhere, "--workdir", ws, "--no-provision", "--yes", check_rc=errors.APPLY)
    assert "AWS offers none of the candidates now" in refused.stderr, refused.stderr
    assert "1. p4d.24xlarge in us-east-1f (spot): not offered" in refused.stderr
    assert proxy.seen["DescribeInstanceTypeOfferings"] == 1 and not proxy.seen["RunInstances"]
    assert_nothing_left(moto, "aws-moto")

    spec = write_spec(repo, tmp_path, proxy.url, nodes=1, zone=["us-east-1f", "us-east-1a"],
                      instance={"type": "p4d.24xlarge"}, storage=small, network=net)
    review = json.loads(trainkit("plan", spec, "--workdir", ws, "--format", "json").stdout)
    rows = review["placement"]["candidates"]
    assert [(r["zone"], r["status"]) for r in rows] == [("us-east-1f", "not offered"), ("us-east-1a", "offered")]
    assert review["placement"]["chosen"]["zone"] == "us-east-1a"
    assert "-> 2. p4d.24xlarge in us-east-1a (spot): offered" in trainkit("plan", spec, "--workdir", ws).stdout

    proxy.faults = Faults(lose={"AuthorizeSecurityGroupIngress": 1, "AuthorizeSecurityGroupEgress": 1})
    applied = trainkit("apply", spec, "--workdir", ws, "--no-provision", "--yes")
    assert "preflight: p4d.24xlarge in us-east-1f (spot): not offered; skipped" in applied.stderr, applied.stderr
    assert "placement 1/1: p4d.24xlarge in us-east-1a: up" in applied.stderr
    zones = [i["Placement"]["AvailabilityZone"] for r in aws(moto, "ec2").describe_instances(Filters=[
        {"Name": "instance-state-name", "Values": ["pending", "running"]}])["Reservations"] for i in r["Instances"]]
    assert zones == ["us-east-1a"]
    assert ("lose", "AuthorizeSecurityGroupIngress") in proxy.faults_done
    imported = re.findall(r"(module\.cluster\.aws_security_group_rule\.\w+): the cloud holds it already", applied.stderr)
    assert len(imported) == 2 and "module.cluster.aws_security_group_rule.egress" in imported, applied.stderr
    assert "Duplicate" not in applied.stderr and "Traceback" not in applied.stderr
    state = json.loads((ws / "terraform" / "terraform.tfstate").read_text())
    assert sorted(r["name"] for r in state["resources"] if r["type"] == "aws_security_group_rule") == [
        "egress", "intra_cluster", "ssh"]

    proxy.faults = Faults()
    trainkit("plan", spec, "--workdir", ws, "--detailed-exitcode")   # exit 0: nothing left to change
    trainkit("destroy", spec, "--workdir", ws, "--yes")
    assert_nothing_left(moto, "aws-moto")
