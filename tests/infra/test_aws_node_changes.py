"""What a change does to running nodes, planned by the real terraform against a real moto server.

A node must never be replaced by surprise: not when a newer image is published (the module picks
the newest one through `data.aws_ami`), and not when the NAT gateway is switched on or off. A
spot toggle must reach the instances (replace them: EC2 cannot change the market of an instance)
and the review must say why.

The moto server here runs in this process (moto's ThreadedMotoServer: the same server app as
`python -m moto.server`) because one thing cannot be done through its API: moto's RegisterImage
always records the caller's account as the owner and no architecture (moto 5.2 `register_image`
takes only a name and a description), while the images the module looks for are published by
Amazon (owner alias "amazon", x86_64). The test sets those two fields on the registered image in
moto's backend, so it matches the module's filter as a real Amazon image would.
"""

from __future__ import annotations

import json
import urllib.request

import pytest
from moto_aws import aws, trainkit, write_spec
from ports import free_port

pytestmark = pytest.mark.usefixtures("tf_cli_config")

DLAMI = "Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) {}"  # terraform/modules/aws/image.tf


@pytest.fixture
def moto_inproc(monkeypatch):
    from moto.backends import get_backend
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "test")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "test")
    url = f"http://127.0.0.1:{port}"

    def publish(name: str) -> str:
        """Register an image as Amazon would publish it; its id."""
        image_id = aws(url, "ec2").register_image(Name=name, Architecture="x86_64",
                                                  RootDeviceName="/dev/sda1")["ImageId"]
        backend = get_backend("ec2")["123456789012"]["us-east-1"]
        backend.amis[image_id].owner_alias = "amazon"
        backend.amis[image_id].architecture = "x86_64"
        return image_id

    try:
        yield url, publish
    finally:  # the backends live in this process: empty them for whatever runs here next
        urllib.request.urlopen(urllib.request.Request(url + "/moto-api/reset", method="POST"), timeout=30)
        server.stop()


def _changes(spec, ws, *extra) -> dict[str, str]:
    rev = json.loads(trainkit("plan", spec, "--workdir", ws, "--format", "json", *extra).stdout)
    return {a["address"]: a["action"] for a in rev["changes"]["addresses"]}, rev


def _instances(url) -> dict[str, str]:
    res = aws(url, "ec2").describe_instances(Filters=[{"Name": "instance-state-name", "Values": ["running"]}])
    return {i["InstanceId"]: i["ImageId"] for r in res["Reservations"] for i in r["Instances"]}


def test_a_newer_image_replaces_no_node_until_upgrade_image(repo, tmp_path, moto_inproc):
    url, publish = moto_inproc
    first = publish(DLAMI.format("20250101"))
    spec = write_spec(repo, tmp_path, url, image=None, spot={"enabled": False},
                      storage={"data_disk": {"category": "gp3", "size_gb": 100}})
    ws = tmp_path / "ws"
    trainkit("apply", spec, "--workdir", ws, "--no-provision", "--yes")
    assert set(_instances(url).values()) == {first}

    newer = publish(DLAMI.format("20250601"))
    # The image lookup now answers the newer image: the nodes keep theirs, nothing to do.
    trainkit("plan", spec, "--workdir", ws, "--detailed-exitcode")
    changes, _ = _changes(spec, ws)
    assert not [a for a in changes if ".aws_instance." in a], changes

    # On purpose: every node is replaced onto the newer image, and the review says why.
    changes, rev = _changes(spec, ws, "--upgrade-image")
    assert {a for a, act in changes.items() if act == "replace"} >= {
        "module.cluster.aws_instance.node[0]", "module.cluster.aws_instance.node[1]"}
    trainkit("apply", spec, "--workdir", ws, "--no-provision", "--yes", "--upgrade-image")
    assert set(_instances(url).values()) == {newer}
    # no destroy: the fixture resets the in-process emulator, and the state lives in tmp_path;
    # destroy is proven in test_aws_lifecycle.py and test_aws_teardown.py (saves ~40 s)


def test_a_spot_toggle_replaces_the_nodes_and_nat_gateway_replaces_none(repo, tmp_path, moto):
    spec_off = write_spec(repo, tmp_path, moto, spot={"enabled": False},
                          network={"admin_cidrs": ["203.0.113.0/24"], "public_ip": "head",
                                   "placement_group": False, "nat_gateway": False},
                          storage={"data_disk": {"category": "gp3", "size_gb": 100}})
    ws = tmp_path / "ws"
    trainkit("apply", spec_off, "--workdir", ws, "--no-provision", "--yes")

    # spot on: EC2 cannot move a running instance to the spot market, so the nodes are replaced,
    # and the review says so, why, and what is lost.
    (tmp_path / "on").mkdir()
    spec_on = write_spec(repo, tmp_path / "on", moto, spot={"enabled": True, "max_price": 3.5},
                         network={"admin_cidrs": ["203.0.113.0/24"], "public_ip": "head",
                                  "placement_group": False, "nat_gateway": False},
                         storage={"data_disk": {"category": "gp3", "size_gb": 100}})
    changes, rev = _changes(spec_on, ws)
    assert changes["module.cluster.aws_instance.node[0]"] == "replace"
    assert changes["module.cluster.aws_instance.node[1]"] == "replace"
    node0, = [a for a in rev["changes"]["addresses"] if a["address"] == "module.cluster.aws_instance.node[0]"]
    assert "its billing record (max_price None -> 3.5; spot False -> True)" in node0["reason"]
    assert "public IP" in node0["loses"] and "job" in node0["loses"]
    text = trainkit("plan", spec_on, "--workdir", ws).stdout
    assert "!! REPLACE module.cluster.aws_instance.node[0]: replaced with its billing record (" in text
    assert "spot False -> True" in text and "loses its local disks" in text
    md = (ws / "review.md").read_text()
    assert "**REPLACE** `module.cluster.aws_instance.node[1]` (compute): replaced with its billing record" in md

    # nat_gateway on: routes change, the head keeps its subnet, no node is replaced.
    (tmp_path / "nat").mkdir()
    spec_nat = write_spec(repo, tmp_path / "nat", moto, spot={"enabled": False},
                          network={"admin_cidrs": ["203.0.113.0/24"], "public_ip": "head",
                                   "placement_group": False, "nat_gateway": True},
                          storage={"data_disk": {"category": "gp3", "size_gb": 100}})
    changes, _ = _changes(spec_nat, ws)
    assert "module.cluster.aws_nat_gateway.this[0]" in changes
    assert not [a for a in changes if ".aws_instance." in a or ".aws_eip.node" in a], changes
    # no destroy: the moto fixture resets the emulator (as in test_aws_replace.py)
