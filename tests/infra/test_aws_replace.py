"""The cloud half of recovery for real: terraform against a moto server (the AWS API emulator on
127.0.0.1, standing in for AWS). Apply two spot nodes with data disks and a NAS, terminate one
instance with boto3 (what a spot reclaim does), run the recovery step (trainkit.cluster.replace):
two running instances again, the survivor keeps its id, the replacement has a data volume
attached, the NAS is untouched. Ansible is not run: the emulator's IPs are not machines.
"""

from __future__ import annotations

import json

import boto3
import pytest
from test_aws_lifecycle import trainkit, write_spec

pytestmark = pytest.mark.usefixtures("tf_cli_config")


def test_recovery_step_replaces_only_the_terminated_instance(repo, tmp_path, moto, monkeypatch):
    from trainkit.cluster.replace import replace_instances
    from trainkit.spec.resolve import load_cluster
    from trainkit.workspace import Workspace

    monkeypatch.delenv("CHECKOV", raising=False)  # replace plans in this process: no checkov, as in moto_aws.trainkit
    spec, ws_dir = write_spec(repo, tmp_path, moto), tmp_path / "ws"
    trainkit("apply", spec, "--workdir", ws_dir, "--yes", "--no-provision")
    ec2 = boto3.client("ec2", endpoint_url=moto, region_name="us-east-1", aws_access_key_id="test",
                       aws_secret_access_key="test")
    efs = boto3.client("efs", endpoint_url=moto, region_name="us-east-1", aws_access_key_id="test",
                       aws_secret_access_key="test")
    before = json.loads((ws_dir / "outputs.json").read_text())["nodes"]
    nas_before = [f["FileSystemId"] for f in efs.describe_file_systems()["FileSystems"]]
    survivor, lost = before[0], before[1]
    ec2.terminate_instances(InstanceIds=[lost["id"]])

    cluster = load_cluster(spec)
    replace_instances(cluster, Workspace.for_cluster(cluster.name, ws_dir), [lost["name"]])

    after = json.loads((ws_dir / "outputs.json").read_text())["nodes"]
    running = _running(ec2, "aws-moto")
    assert len(running) == 2 and {n["id"] for n in after} == set(running)
    assert after[0]["id"] == survivor["id"]                         # the survivor keeps its id
    assert after[1]["name"] == lost["name"] and after[1]["id"] != lost["id"]
    attached = {a["InstanceId"] for v in ec2.describe_volumes()["Volumes"] for a in v.get("Attachments", [])
                if a.get("State") == "attached" and a.get("Device") == "/dev/sdf"}
    assert after[1]["id"] in attached and survivor["id"] in attached
    assert [f["FileSystemId"] for f in efs.describe_file_systems()["FileSystems"]] == nas_before
    # no destroy: the moto fixture resets the emulator and the state lives in tmp_path (saves minutes)


def _running(ec2, cluster: str) -> list[str]:
    tagged = [{"Name": "tag:trainkit-cluster", "Values": [cluster]}]
    return [i["InstanceId"] for r in ec2.describe_instances(Filters=tagged)["Reservations"]
            for i in r["Instances"] if i["State"]["Name"] == "running"]
