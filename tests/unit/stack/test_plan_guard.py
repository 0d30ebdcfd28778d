"""The plan guard's pure parts (trainkit.stack.plan_rules): what a recovery's plan may touch, which
destroyed disks and file systems lose data, and which in-place updates the cloud refuses or makes
by stopping the node. Plans in `terraform show -json` shape."""

from __future__ import annotations

from trainkit import clouds
from trainkit.stack.plan_rules import beyond_recovery, disruptions, refused_in_place, storage_losses

M = "module.cluster."


def change(address: str, actions: list[str], before: dict | None = None, after: dict | None = None,
           type_: str | None = None) -> dict:
    type_ = type_ or address.removeprefix(M).split(".")[0]
    return {"address": address, "type": type_, "mode": "managed",
            "change": {"actions": actions, "before": before, "after": after}}


def plan(*changes: dict) -> dict:
    return {"resource_changes": list(changes)}


def test_a_recovery_plan_may_touch_the_lost_nodes_and_add_a_zone_only():
    ok = plan(change(M + "aws_instance.node[1]", ["create"]), change(M + "aws_ebs_volume.data[1]", ["delete", "create"]),
              change(M + "aws_volume_attachment.data[1]", ["create"]), change(M + 'aws_subnet.zone["us-east-1b"]', ["create"]),
              change(M + "aws_instance.node[0]", ["no-op"]), change("data.aws_ami.x", ["read"]))
    assert beyond_recovery(ok, [1]) == []
    edited = plan(*ok["resource_changes"], change(M + "aws_ebs_volume.data[0]", ["update"]),
                  change(M + "aws_instance.node[0]", ["delete", "create"]),
                  change(M + 'aws_subnet.zone["us-east-1b"]', ["delete"], {"id": "subnet-b"}),
                  change(M + "aws_efs_file_system.this[0]", ["delete"]))
    edited["prior_state"] = _prior({"id": "i-0", "subnet_id": "subnet-b"}, {"id": "i-1", "subnet_id": "subnet-c"})
    assert beyond_recovery(edited, [1]) == [      # node 0 sits in that zone's subnet: not the recovery's to delete
        f"delete {M}aws_efs_file_system.this[0]", f'delete {M}aws_subnet.zone["us-east-1b"]',
        f"replace {M}aws_instance.node[0]", f"update {M}aws_ebs_volume.data[0]"]


def test_a_recovery_moving_on_deletes_the_zone_parts_only_its_refused_try_made():
    """Refused in us-east-1b too, the replacement of node 1 moves on to us-east-1c: the subnet (and
    its route table association) the refused try made in 1b goes, no survivor being in it."""
    moving = plan(change(M + "aws_instance.node[1]", ["create"]),
                  change(M + 'aws_subnet.zone["us-east-1b"]', ["delete"], {"id": "subnet-b"}),
                  change(M + 'aws_route_table_association.zone["us-east-1b"]', ["delete"],
                         {"id": "rtbassoc-1", "subnet_id": "subnet-b"}),
                  change(M + 'aws_subnet.zone["us-east-1c"]', ["create"]))
    moving["prior_state"] = _prior({"id": "i-0", "subnet_id": "subnet-a"})
    assert beyond_recovery(moving, [1]) == []


def _prior(*nodes: dict) -> dict:
    return {"values": {"root_module": {"child_modules": [{"resources": [
        {"address": f"{M}aws_instance.node[{i}]", "mode": "managed", "values": v} for i, v in enumerate(nodes)]}]}}}


def test_storage_losses_are_the_disks_of_running_nodes_and_the_shared_file_system():
    p = plan(change(M + "alicloud_ecs_disk.data[0]", ["delete", "create"], {"category": "cloud_essd", "size": 500}),
             change(M + "alicloud_ecs_disk.data[1]", ["update"], {"size": 500}),
             change(M + "alicloud_nas_file_system.this[0]", ["delete"], {"storage_type": "Performance"}),
             change(M + "alicloud_ecs_disk.data[2]", ["delete", "create"], {"size": 500}),
             change(M + "alicloud_instance.node[2]", ["create"]),   # never ran: its disk is empty
             change(M + "alicloud_vswitch.this", ["delete", "create"], {"zone_id": "a"}))
    assert storage_losses(clouds.get("alicloud"), p) == [M + "alicloud_ecs_disk.data[0]", M + "alicloud_nas_file_system.this[0]"]


def test_a_type_change_on_a_spot_node_is_refused_and_on_an_on_demand_node_stops_it():
    spot = {"instance_type": "ecs.a", "spot_strategy": "SpotAsPriceGo"}
    on_demand = {"instance_type": "ecs.a", "spot_strategy": "NoSpot"}
    p = plan(change(M + "alicloud_instance.node[0]", ["update"], spot, {**spot, "instance_type": "ecs.b"}),
             change(M + "alicloud_instance.node[1]", ["update"], on_demand, {**on_demand, "instance_type": "ecs.b"}),
             change(M + "alicloud_instance.node[2]", ["update"], on_demand, {**on_demand, "tags": {"a": "b"}}))
    found = disruptions(clouds.get("alicloud"), p)
    assert found[M + "alicloud_instance.node[0]"][0] == "refused"
    assert found[M + "alicloud_instance.node[1]"] == (
        "stops", "instance type ecs.a -> ecs.b: the provider stops the instance, calls ModifyInstanceSpec and starts it again")
    assert M + "alicloud_instance.node[2]" not in found
    assert list(refused_in_place(clouds.get("alicloud"), p)) == [M + "alicloud_instance.node[0]"]


def test_each_cloud_names_its_own_refusals():
    hssd = {"instance_type": "GN7.2XLARGE32", "system_disk_type": "CLOUD_HSSD", "instance_charge_type": "POSTPAID_BY_HOUR"}
    ssd = {**hssd, "system_disk_type": "CLOUD_SSD"}
    tc = plan(change(M + "tencentcloud_instance.node[0]", ["update"], hssd, {**hssd, "instance_type": "GN7.5XLARGE80"}),
              change(M + "tencentcloud_instance.node[1]", ["update"], ssd, {**ssd, "instance_type": "GN7.5XLARGE80"}))
    found = disruptions(clouds.get("tencentcloud"), tc)
    assert found[M + "tencentcloud_instance.node[0]"] == (
        "refused", "ResetInstancesType does not change instances whose system disk is CLOUD_HSSD")
    assert found[M + "tencentcloud_instance.node[1]"][0] == "stops"
    hw = {"flavor_id": "p2s.4xlarge.8", "charging_mode": "spot"}
    found = disruptions(clouds.get("huaweicloud"), plan(
        change(M + "huaweicloud_compute_instance.node[0]", ["update"], hw, {**hw, "flavor_id": "p2s.2xlarge.8"}),
        change(M + "huaweicloud_compute_instance.node[1]", ["update"], hw, {**hw, "charging_mode": "postPaid"})))
    assert "Spot ECSs do not support specifications modification" in found[M + "huaweicloud_compute_instance.node[0]"][1]
    assert found[M + "huaweicloud_compute_instance.node[1]"][0] == "refused"
