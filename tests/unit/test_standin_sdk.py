"""The provider stand-ins' SDK rules (tests/standin/sdk.py) and the stand-in cloud's refusals
(tests/standin/cloud.py, rules_*.py), without terraform: each check a real provider's SDK makes,
and each in-place change or create the cloud refuses, on the schema data read from the Go source."""

from __future__ import annotations

import pytest
from standin import cloud, rules_alicloud, rules_huaweicloud, rules_tencentcloud, schema, sdk
from standin.values import UNKNOWN, Unknown

ALI = schema.load("alicloud")
HW = schema.load("huaweicloud")


def _block(data: dict, rtype: str) -> dict:
    return data["resources"][rtype]["block"]


def _errors(diags: list[dict]) -> list[str]:
    return [d["detail"] for d in diags if d["severity"] == "error"]


def test_validate_checks_enums_ranges_conflicts_and_computed_only():
    block = _block(ALI, "alicloud_instance")
    good = {"instance_type": "ecs.a", "image_id": "img", "spot_strategy": "NoSpot"}
    assert _errors(sdk.validate(block, good)) == []
    found = " | ".join(_errors(sdk.validate(block, {**good, "spot_strategy": "Cheap", "http_put_response_hop_limit": 99,
                                                     "dedicated_host_id": "dh", "public_ip": "1.2.3.4"})))
    assert "expected spot_strategy to be one of" in found and "hop_limit to be in the range" in found
    assert '"dedicated_host_id": conflicts with spot_strategy' in found
    assert 'a value was set for "public_ip"' in found


def test_groups_count_unknowns_apart_as_the_sdk_does():
    block = _block(HW, "huaweicloud_nat_snat_rule")
    base = {"nat_gateway_id": "n", "floating_ip_id": "f"}
    assert "only one of" in " ".join(_errors(sdk.validate(block, {**base, "cidr": "10.0.0.0/24", "network_id": "x"})))
    assert _errors(sdk.validate(block, {**base, "cidr": "10.0.0.0/24", "subnet_id": UNKNOWN})) == []
    assert "must be specified" in " ".join(_errors(sdk.validate(block, base)))      # none of the group
    assert _errors(sdk.validate(block, {**base, "subnet_id": UNKNOWN})) == []       # known after apply


def test_required_with_names_the_whole_group():
    block = _block(HW, "huaweicloud_compute_instance")
    found = _errors(sdk.validate(block, {"name": "n", "eip_type": "5_bgp"}))
    assert any("all of `bandwidth,eip_type` must be specified" in e for e in found), found


def _applied(planned: dict) -> dict:
    """What apply leaves in the state: every value known (the cloud computed the unknowns; null here)."""
    return {k: (None if isinstance(v, Unknown) else v) for k, v in planned.items()}


def test_plan_sets_defaults_unknowns_and_force_new_paths():
    block = _block(ALI, "alicloud_instance")
    config = {"instance_type": "ecs.a", "image_id": "img", "spot_strategy": "NoSpot", "availability_zone": "z1"}
    planned, replace = sdk.plan(block, None, dict(config), config)
    assert replace == [] and isinstance(planned["id"], Unknown) and planned["period_unit"] == "Month"
    prior = {**_applied(planned), "id": "i-1", "private_ip": "10.0.0.4"}
    moved = {**config, "availability_zone": "z2"}
    planned, replace = sdk.plan(block, prior, {**prior, **moved}, moved)
    assert ["availability_zone"] in replace and planned["private_ip"] == "10.0.0.4"
    typed = {**config, "instance_type": "ecs.b"}
    assert sdk.plan(block, prior, {**prior, **typed}, typed)[1] == []          # an in-place update


def test_force_new_inside_a_list_block_and_on_its_count():
    block = _block(ALI, "alicloud_instance")
    disk = {"size": 100, "category": "cloud_essd"}
    config = {"instance_type": "ecs.a", "image_id": "img", "data_disks": [disk]}
    prior, _ = sdk.plan(block, None, dict(config), config)
    prior = {**_applied(prior), "id": "i-1"}
    bigger = {**config, "data_disks": [{**disk, "size": 200}]}
    assert ["data_disks", 0, "size"] in sdk.plan(block, prior, {**prior, **bigger}, bigger)[1]
    two = {**config, "data_disks": [disk, disk]}
    assert ["data_disks"] in sdk.plan(block, prior, {**prior, **two}, two)[1]


class _View(cloud.View):
    def __init__(self, objects: dict[str, dict]):
        super().__init__({"objects": {f"{t} {a['id']}": {"type": t, "attrs": a} for t, a in objects.items()},
                          "seq": 0, "faults": {}, "calls": []}, "r")


def test_the_clouds_refuse_the_in_place_changes_their_apis_refuse():
    with pytest.raises(cloud.CloudError, match="Spot ECSs do not support"):
        rules_huaweicloud.update_check("huaweicloud_compute_instance", {"id": "s", "flavor_id": "a", "charging_mode": "spot"},
                                       {"flavor_id": "b", "charging_mode": "spot"}, _View({}))
    with pytest.raises(cloud.CloudError, match="CLOUD_HSSD"):
        rules_tencentcloud.update_check("tencentcloud_instance", {"instance_type": "a", "system_disk_type": "CLOUD_HSSD"},
                                        {"instance_type": "b"}, _View({}))
    rules_tencentcloud.update_check("tencentcloud_instance", {"instance_type": "a", "system_disk_type": "CLOUD_SSD"},
                                    {"instance_type": "b"}, _View({}))
    view = cloud.View({"objects": {"alicloud_vswitch v1": {"type": "alicloud_vswitch", "attrs": {"id": "v1", "zone_id": "a"}},
                                   "alicloud_vswitch v2": {"type": "alicloud_vswitch", "attrs": {"id": "v2", "zone_id": "b"}}},
                       "seq": 0, "faults": {}, "calls": []}, "r")
    with pytest.raises(cloud.CloudError, match="InvalidVSwitchId.Mismatch"):
        rules_alicloud.update_check("alicloud_instance", {"vswitch_id": "v1"}, {"vswitch_id": "v2"}, view)


def test_quota_capacity_and_a_lost_answer_in_the_store():
    sky = cloud.for_provider("tencentcloud", None)
    sky.region = "ap-guangzhou"
    sky.store.set_faults(quota={"tencentcloud_key_pair": 1}, lose={"tencentcloud_vpc": 1},
                         capacity=[{"zone": "ap-guangzhou-3", "type": "GN7.2XLARGE32"}])
    first, problems = sky.apply("tencentcloud_key_pair", None, {"key_name": "a", "id": UNKNOWN}, {})
    assert problems == [] and first["id"].startswith("skey-")
    _, problems = sky.apply("tencentcloud_key_pair", None, {"key_name": "b", "id": UNKNOWN}, {})
    assert "LimitExceeded" in problems[0]["detail"]
    lost, problems = sky.apply("tencentcloud_vpc", None, {"name": "v", "id": UNKNOWN}, {})
    assert lost is None and "NetworkError" in problems[0]["detail"]
    assert len(sky.store.objects("tencentcloud_vpc")) == 1          # created, the answer lost
    _, problems = sky.apply("tencentcloud_instance", None, {"availability_zone": "ap-guangzhou-3",
                                                              "instance_type": "GN7.2XLARGE32", "id": UNKNOWN}, {})
    assert "ResourceInsufficient" in problems[0]["detail"] and sky.store.objects("tencentcloud_instance") == {}
    assert [c[0] for c in sky.store.read()["calls"]].count("refused") == 1
