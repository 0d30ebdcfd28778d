"""The AWS lifecycle through the fault proxy (tests/infra/fault_proxy.py): moto answering the way
AWS answers under load. The real trainkit CLI and terraform binary; what the emulator holds is
checked with boto3 at the moto server itself (behind no proxy).

One cluster carries several checks (each apply costs minutes): a throttled apply, status and plan;
the review's cost change priced from the state; a change the cloud has no capacity for; destroy
through dropped connections.
"""

from __future__ import annotations

import json

import pytest
from fault_proxy import Faults
from moto_aws import assert_nothing_left, aws, leftovers, trainkit, write_spec

from trainkit import errors

pytestmark = pytest.mark.usefixtures("tf_cli_config")

# trainkit/catalog/aws.yaml: g5.48xlarge on-demand; aws-moto.yaml: spot.max_price (no spot price known)
G5_48XLARGE_ON_DEMAND, SPOT_MAX_PRICE = 16.288, 3.5


def test_throttled_apply_status_and_plan_then_no_capacity_then_destroy(repo, tmp_path, faulty_moto):
    moto, proxy = faulty_moto
    # 30% of EC2 requests answered RequestLimitExceeded (503), and no g5.12xlarge in us-east-1a
    proxy.faults = Faults(throttle=0.3, seed=7, no_capacity={("us-east-1a", "g5.12xlarge")})
    # No NAT gateway: moto keeps a deleted NAT gateway's EIP associated (AWS releases it, "Delete a
    # NAT gateway", VPC user guide), so moving one to zone b fails on the emulator only.
    net = {"admin_cidrs": ["203.0.113.0/24"], "public_ip": "head", "placement_group": False, "nat_gateway": False}
    spec = write_spec(repo, tmp_path, proxy.url, zone=["us-east-1a", "us-east-1b"], network=net)
    ws = tmp_path / "ws"

    # The provider's own retries ride out the throttling; zone a is refused, every node lands in b
    applied = trainkit("apply", spec, "--workdir", ws, "--no-provision", "--yes")
    assert sum(1 for what, _ in proxy.faults_done if what == "throttle") >= 10, proxy.faults_done[:5]
    assert "placement 1/2: g5.12xlarge in us-east-1a: no capacity (InsufficientInstanceCapacity)" in applied.stderr
    assert "placement 2/2: g5.12xlarge in us-east-1b: up" in applied.stderr
    zones = [i["Placement"]["AvailabilityZone"] for r in aws(moto, "ec2").describe_instances(Filters=[
        {"Name": "instance-state-name", "Values": ["pending", "running"]}])["Reservations"] for i in r["Instances"]]
    assert zones == ["us-east-1b", "us-east-1b"]
    status = json.loads(trainkit("status", spec, "--workdir", ws, "--json").stdout)
    assert status["exists"] and len(status["nodes"]) == 2 and status["currency"] == "USD"

    # 2 x g5.12xlarge spot -> 2 x g5.48xlarge on-demand: "now" is what the state holds, the same
    # figure status shows; the delta is new minus now (disks and EFS are the same on both sides)
    proxy.faults = Faults(throttle=0.3, seed=8)
    bigger = write_spec(repo, tmp_path, proxy.url, zone="us-east-1b", instance={"type": "g5.48xlarge"},
                        spot={"enabled": False}, network=net)
    plan = trainkit("plan", bigger, "--workdir", ws, "--format", "json")
    cost = json.loads(plan.stdout)["cost"]
    assert cost["current_per_hour"] == pytest.approx(status["per_hour"])
    assert cost["delta_per_hour"] == pytest.approx(2 * G5_48XLARGE_ON_DEMAND - 2 * SPOT_MAX_PRICE, abs=0.01)
    text = trainkit("plan", bigger, "--workdir", ws).stdout
    assert f"+{2 * G5_48XLARGE_ON_DEMAND - 2 * SPOT_MAX_PRICE:,.2f} USD per hour" in text

    # Applying it: EC2 has no g5.48xlarge in us-east-1b. One message naming zone, type and what to
    # try (exit 4), the provider's words only in terraform.log; what exists is still listed.
    proxy.faults = Faults(no_capacity={("us-east-1b", "g5.48xlarge")})
    refused = trainkit("apply", bigger, "--workdir", ws, "--no-provision", "--yes", check_rc=errors.APPLY)
    assert "no capacity for g5.48xlarge in zone us-east-1b" in refused.stderr, refused.stderr
    assert "another zone" in refused.stderr and "Traceback" not in refused.stderr
    assert "Our system will be working" not in refused.stderr
    assert "Our system will be working" in (ws / "terraform.log").read_text()
    assert ("capacity:us-east-1b", "RunInstances") in proxy.faults_done
    status = json.loads(trainkit("status", bigger, "--workdir", ws, "--json").stdout)
    assert status["exists"] and status["held"] and status["per_hour"] > 0, status  # the disks and EFS bill
    assert "not created" not in trainkit("status", bigger, "--workdir", ws).stdout
    assert leftovers(moto, "aws-moto")["volumes"]

    # Destroy with 10% of the connections closed unanswered (moto never sees those requests, the
    # SDKs retry them as transient errors): the provider's and boto3's retries ride it out, and
    # the leftover check after terraform destroy still runs.
    proxy.faults = Faults(drop=0.1, seed=9)
    destroyed = trainkit("destroy", bigger, "--workdir", ws, "--yes")
    assert sum(1 for what, _ in proxy.faults_done if what == "drop") >= 3, proxy.faults_done[-5:]
    assert "asked the cloud for resources tagged trainkit-cluster=aws-moto: 0 left" in destroyed.stdout
    assert_nothing_left(moto, "aws-moto")
