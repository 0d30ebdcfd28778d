"""The cloud half of recovery for real: terraform against a moto server (the AWS API emulator on
127.0.0.1, standing in for AWS) behind the fault proxy (tests/infra/fault_proxy.py). Apply two
nodes with data disks and a NAS in the first of two zones, terminate one instance with boto3 (what
a spot reclaim does), and make EC2 answer InsufficientInstanceCapacity for the type in that zone
(spot capacity is gone where the reclaim came from). The recovery step
(trainkit.cluster.replace) is refused there, records it, and brings the replacement up in the
next zone: two running instances again, the survivor keeps its id and zone, the replacement has a
data volume attached in its own zone and none is left in the refused one, the NAS is untouched,
and the next plan keeps the placement. Ansible is not run: the emulator's IPs are not machines.
"""

from __future__ import annotations

import json

import pytest
from fault_proxy import Faults
from moto_aws import aws, trainkit, write_spec

pytestmark = pytest.mark.usefixtures("tf_cli_config")


def test_a_replacement_refused_in_its_zone_comes_up_in_the_next_and_the_survivor_stays(
        repo, tmp_path, faulty_moto, monkeypatch):
    from trainkit.cluster.replace import replace_instances
    from trainkit.spec.resolve import load_cluster
    from trainkit.workspace import Workspace

    monkeypatch.delenv("CHECKOV", raising=False)  # replace plans in this process: no checkov, as in moto_aws.trainkit
    moto, proxy = faulty_moto
    spec, ws_dir = write_spec(repo, tmp_path, proxy.url, zone=["us-east-1a", "us-east-1b"]), tmp_path / "ws"
    trainkit("apply", spec, "--workdir", ws_dir, "--yes", "--no-provision")
    ec2, efs = aws(moto, "ec2"), aws(moto, "efs")
    before = json.loads((ws_dir / "outputs.json").read_text())["nodes"]
    nas_before = [f["FileSystemId"] for f in efs.describe_file_systems()["FileSystems"]]
    survivor, lost = before[0], before[1]
    ec2.terminate_instances(InstanceIds=[lost["id"]])
    proxy.faults = Faults(no_capacity={("us-east-1a", "g5.12xlarge")})

    cluster = load_cluster(spec)
    events = replace_instances(cluster, Workspace.for_cluster(cluster.name, ws_dir), [lost["name"]])

    assert [e["kind"] for e in events] == ["placement_refused", "replaced"], events
    assert (events[0]["zone"], events[0]["code"]) == ("us-east-1a", "InsufficientInstanceCapacity")
    assert {what for what, _ in proxy.faults_done} == {"capacity:us-east-1a"}
    after = json.loads((ws_dir / "outputs.json").read_text())["nodes"]
    running = _running(ec2, "aws-moto")
    assert set(running) == {n["id"] for n in after} and len(running) == 2
    assert after[0]["id"] == survivor["id"] and running[survivor["id"]] == "us-east-1a"  # the survivor stays
    assert after[1]["name"] == lost["name"] and running[after[1]["id"]] == "us-east-1b"
    volumes = {v["VolumeId"]: v for v in ec2.describe_volumes(Filters=[
        {"Name": "tag:Name", "Values": ["aws-moto-data-*"]}])["Volumes"]}
    attached = {a["InstanceId"]: v["AvailabilityZone"] for v in volumes.values() for a in v.get("Attachments", [])
                if a.get("State") == "attached" and a.get("Device") == "/dev/sdf"}
    assert attached == {survivor["id"]: "us-east-1a", after[1]["id"]: "us-east-1b"}
    assert len(volumes) == 2   # the disk the refused try made in us-east-1a went with it
    assert [f["FileSystemId"] for f in efs.describe_file_systems()["FileSystems"]] == nas_before
    kept = json.loads((ws_dir / "placement.json").read_text())
    assert kept["nodes"]["1"]["zone"] == "us-east-1b" and kept["zone"] == "us-east-1a"
    proxy.faults = Faults()
    trainkit("plan", spec, "--workdir", ws_dir, "--detailed-exitcode")  # exit 0: nothing moves back
    # no destroy: the moto fixture resets the emulator and the state lives in tmp_path (saves minutes)


def _running(ec2, cluster: str) -> dict[str, str]:
    """{instance id: zone} of the cluster's running instances."""
    tagged = [{"Name": "tag:trainkit-cluster", "Values": [cluster]}]
    return {i["InstanceId"]: i["Placement"]["AvailabilityZone"]
            for r in ec2.describe_instances(Filters=tagged)["Reservations"]
            for i in r["Instances"] if i["State"]["Name"] == "running"}
