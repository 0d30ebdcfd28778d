"""Replacements that cannot leak (issue 39, defects 4 and 5) for real: terraform against a moto server
behind the fault proxy (tests/infra/fault_proxy.py). One scenario proves three rows of the fault matrix:

- a replacement refused for capacity in its zone and in the next moves on to a third zone, whose
  subnet never collides with the block the refused try in the second zone still holds (AWS answers
  an overlapping CreateSubnet with InvalidSubnet.Conflict, which moto models);
- the RunInstances answer of the try that comes up is lost (moto launched the instance, the SDK
  never heard of it and sends RunInstances again): two instances, one in the state. After the
  replacement, the copy the state does not hold is found through the cluster's tag and terminated
  (trainkit/cluster/strays.py, with the sweeper `destroy --sweep` uses), and the event says so;
- the survivor keeps its id, and the cluster runs exactly its two nodes.

Ansible is not run: the emulator's IPs are not machines. A module of its own: minutes of the aws
provider's polls, run by pytest-xdist beside the other moto modules.
"""

from __future__ import annotations

import json

import pytest
from fault_proxy import Faults
from moto_aws import aws, trainkit, write_spec

pytestmark = pytest.mark.usefixtures("tf_cli_config")


def test_a_lost_run_instances_answer_in_a_third_zone_leaks_nothing(repo, tmp_path, faulty_moto, monkeypatch):
    from trainkit.cluster.replace import replace_instances
    from trainkit.spec.resolve import load_cluster
    from trainkit.workspace import Workspace

    monkeypatch.delenv("CHECKOV", raising=False)  # replace plans in this process: no checkov, as in moto_aws.trainkit
    moto, proxy = faulty_moto
    zones = ["us-east-1a", "us-east-1b", "us-east-1c"]
    spec, ws_dir = write_spec(repo, tmp_path, proxy.url, zone=zones), tmp_path / "ws"
    trainkit("apply", spec, "--workdir", ws_dir, "--yes", "--no-provision")
    ec2 = aws(moto, "ec2")
    survivor, lost = json.loads((ws_dir / "outputs.json").read_text())["nodes"]
    ec2.terminate_instances(InstanceIds=[lost["id"]])
    proxy.faults = Faults(no_capacity={("us-east-1a", "g5.12xlarge"), ("us-east-1b", "g5.12xlarge")},
                          lose={"RunInstances": 1})

    cluster = load_cluster(spec)
    events = replace_instances(cluster, Workspace.for_cluster(cluster.name, ws_dir), [lost["name"]])

    kinds = [e["kind"] for e in events]
    assert kinds.count("placement_refused") == 2 and kinds[-1] == "replaced", events
    assert ("lose", "RunInstances") in proxy.faults_done
    removed = [e for e in events if e["kind"] == "strays_removed"]
    assert len(removed) == 1 and len(removed[0]["ids"]) == 1, events   # the SDK's second launch
    after = json.loads((ws_dir / "outputs.json").read_text())["nodes"]
    running = _running(ec2, "aws-moto")
    assert set(running) == {survivor["id"], after[1]["id"]}, (running, after)   # nothing else bills
    assert running[after[1]["id"]] == "us-east-1c" and after[0]["id"] == survivor["id"]
    assert removed[0]["ids"][0] not in running
    subnets = {s["AvailabilityZone"]: s["CidrBlock"] for s in ec2.describe_subnets(Filters=[
        {"Name": "tag:trainkit-cluster", "Values": ["aws-moto"]}])["Subnets"]}
    assert "us-east-1c" in subnets and "us-east-1b" not in subnets   # the refused zone's subnet went
    # no destroy: the moto fixture resets the emulator and the state lives in tmp_path (saves minutes)


def _running(ec2, cluster: str) -> dict[str, str]:
    """{instance id: zone} of the cluster's running (or starting) instances."""
    tagged = [{"Name": "tag:trainkit-cluster", "Values": [cluster]}]
    return {i["InstanceId"]: i["Placement"]["AvailabilityZone"]
            for r in ec2.describe_instances(Filters=tagged)["Reservations"]
            for i in r["Instances"] if i["State"]["Name"] in ("pending", "running")}
