"""Failover at apply (issue: capacity-aware placement) on moto behind the fault proxy
(tests/infra/fault_proxy.py): every candidate zone refused; spot refused in every zone with
`spot.fallback: on_demand`. A module of its own so that pytest-xdist
runs it beside tests/infra/test_aws_faults.py (each moto apply costs minutes).
"""

from __future__ import annotations

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
