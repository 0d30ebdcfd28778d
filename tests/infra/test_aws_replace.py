"""The cloud half of recovery for real: terraform against a moto server (the AWS API emulator on
127.0.0.1, standing in for AWS) behind the fault proxy (tests/infra/fault_proxy.py). Apply two
nodes with data disks and a NAS in the first of two zones, terminate one instance with boto3 (what
a spot reclaim does), and make EC2 answer InsufficientInstanceCapacity for the type in that zone
(spot capacity is gone where the reclaim came from). The recovery step
(trainkit.cluster.replace) is refused there, records it, and brings the replacement up in the
next zone: two running instances again, the survivor keeps its id and zone, the replacement has a
data volume attached in its own zone and none is left in the refused one, the NAS is untouched,
and the next plan keeps the placement. Ansible is not run: the emulator's IPs are not machines.

The recovery runs as the cloud controller's loop does (issue 42): in `<dir>/ws` beside the key
pair the hand-off made in `<dir>/ssh/`, with INSTANCE_IDENTITY set. Its render adds that key
(`extra_authorized_keys`): a plan then changes no running node, and the replacement alone carries
it in its cloud-init user data (describe_instance_attribute userData), the survivor none.
"""

from __future__ import annotations

import base64
import json

import pytest
import yaml
from fault_proxy import Faults
from moto_aws import aws, trainkit, write_spec

from trainkit.clouds.credentials import INSTANCE_IDENTITY

pytestmark = pytest.mark.usefixtures("tf_cli_config")
# The controller's key (a fixed line: no ssh-keygen needed; the module validates its form).
CTL_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFakeControllerKeyForReplace000000000000000 trainkit-ctl"


def test_a_replacement_refused_in_its_zone_comes_up_in_the_next_and_the_survivor_stays(
        repo, tmp_path, faulty_moto, monkeypatch):
    from trainkit.cluster.replace import replace_instances
    from trainkit.spec.resolve import load_cluster
    from trainkit.workspace import Workspace

    monkeypatch.delenv("CHECKOV", raising=False)  # replace plans in this process: no checkov, as in moto_aws.trainkit
    moto, proxy = faulty_moto
    ctl_dir = tmp_path / "launch-controller" / "run-1"   # controller.HandOff's layout: <dir>/ws, <dir>/ssh/
    spec, ws_dir = write_spec(repo, tmp_path, proxy.url, zone=["us-east-1a", "us-east-1b"]), ctl_dir / "ws"
    trainkit("apply", spec, "--workdir", ws_dir, "--yes", "--no-provision")
    ec2, efs = aws(moto, "ec2"), aws(moto, "efs")
    before = json.loads((ws_dir / "outputs.json").read_text())["nodes"]
    assert [_user_data(ec2, n["id"]) for n in before] == [None, None]   # the user's render adds no key
    (ctl_dir / "ssh").mkdir()
    (ctl_dir / "ssh" / "id_ed25519.pub").write_text(CTL_KEY + "\n")
    monkeypatch.setenv(INSTANCE_IDENTITY, "1")   # from here on, as in the controller's loop
    trainkit("plan", spec, "--workdir", ws_dir, "--detailed-exitcode")  # exit 0: the key touches no running node
    assert json.loads((ws_dir / "terraform" / "terraform.tfvars.json").read_text())["extra_authorized_keys"] == [CTL_KEY]
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
    user_data = _user_data(ec2, after[1]["id"])   # cloud-init's #cloud-config: the controller gets in
    assert user_data.startswith("#cloud-config\n") and yaml.safe_load(user_data) == {"ssh_authorized_keys": [CTL_KEY]}
    assert _user_data(ec2, survivor["id"]) is None
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


def _user_data(ec2, instance_id: str) -> str | None:
    """The instance's user data as text (EC2 answers it base64-encoded), None when it has none."""
    value = ec2.describe_instance_attribute(InstanceId=instance_id, Attribute="userData")["UserData"].get("Value")
    return base64.b64decode(value).decode() if value else None
