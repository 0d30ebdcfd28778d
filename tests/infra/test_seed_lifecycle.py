"""The three seed clouds through the real terraform: trainkit's own commands against the providers'
schema-served stand-ins and the stateful stand-in cloud behind them (tests/standin).

Per cloud, from the shipped example: plan (the review reads the real plan JSON) -> apply without
provisioning -> outputs.json -> re-plan "No changes" -> status -> destroy, and the stand-in cloud
holds nothing of the cluster afterwards.
"""

from __future__ import annotations

import ipaddress
import json

import pytest
import yaml
from seed_clouds import CLOUDS, plan_actions, trainkit, write_spec

from trainkit import errors

pytestmark = pytest.mark.usefixtures("tf_cli_config")

# What each example creates (examples/clusters/<cloud>.yaml: 2 nodes, data disks, NAS, NAT).
NODES = {"alicloud": "alicloud_instance", "tencentcloud": "tencentcloud_instance",
         "huaweicloud": "huaweicloud_compute_instance"}
DISKS = {"alicloud": "alicloud_ecs_disk", "tencentcloud": "tencentcloud_cbs_storage",
         "huaweicloud": "huaweicloud_evs_volume"}


@pytest.mark.parametrize("cloud", CLOUDS)
def test_apply_replan_status_destroy(repo, tmp_path, seed_cloud, cloud):
    spec, ws = write_spec(repo, tmp_path, cloud), tmp_path / "ws"
    review = json.loads(trainkit("plan", spec, "--workdir", ws, "--format", "json").stdout)
    assert not review["blocking"], review["findings"]
    created = [a["address"] for a in review["changes"]["addresses"]]
    assert sum(f".{NODES[cloud]}.node[" in a for a in created) == 2
    assert sum(f".{DISKS[cloud]}.data[" in a for a in created) == 2
    assert all(actions == ["create"] for actions in plan_actions(ws).values())
    # the review and the cost read the real plan JSON: two nodes at the example's type and billing,
    # priced from the catalog; what the plan does not price is named, never guessed
    example = yaml.safe_load(spec.read_text())
    billing = "spot" if example.get("spot", {}).get("enabled") else "on-demand"
    node_item, = [i for i in review["cost"]["items"] if i["item"] == f"{example['instance']['type']} ({billing})"]
    assert node_item["quantity"] == 2 and node_item["unit"] == "node"
    assert review["cost"]["currency"] in ("CNY", "USD") and review["cost"]["current_per_hour"] == 0
    assert [f["code"] for f in review["findings"] if f["severity"] != "info"] == []

    trainkit("apply", spec, "--workdir", ws, "--no-provision")
    outputs = json.loads((ws / "outputs.json").read_text())
    subnet = ipaddress.ip_network(yaml.safe_load(spec.read_text())["network"].get("subnet_cidr", "10.42.1.0/24"))
    nodes = outputs["nodes"]
    assert [ipaddress.ip_address(n["private_ip"]) in subnet for n in nodes] == [True, True]
    assert [n["public_ip"] is not None for n in nodes] == [True, False]  # public_ip: head
    assert outputs["nas"]["server"]
    held = seed_cloud.objects(NODES[cloud])
    assert sorted(held) == sorted(n["id"] for n in nodes)

    again = trainkit("plan", spec, "--workdir", ws, "--format", "json", "--detailed-exitcode")
    assert json.loads(again.stdout)["changes"]["addresses"] == []
    status = trainkit("status", spec, "--workdir", ws)
    assert all(n["name"] in status.stdout for n in nodes)

    trainkit("destroy", spec, "--workdir", ws, "--yes")
    assert seed_cloud.objects() == {}
    assert trainkit("status", spec, "--workdir", ws, check_rc=None).returncode in (0, errors.BAD_INPUT)
