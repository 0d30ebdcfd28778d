"""Tencent Cloud as the tencentcloud provider meets it: ids, computed values and refusals.

Error text is shaped as the provider prints a TencentCloudSDKError ("[TencentCloudSDKError]
Code=..., Message=..., RequestId=..."); codes from the CVM API's error code pages (API 213/15722
RunInstances, 213/15744 ResetInstancesType) and the CVM placement group docs.
"""

from __future__ import annotations

import random

from .cloud import CloudError
from .rules_common import hex_id, host_ip, public_ip, set_if_unset

REGION_ENV = "TENCENTCLOUD_REGION"
# tencentcloud/provider.go: secret_id / secret_key default to these variables.
CREDENTIALS = [("TENCENTCLOUD_SECRET_ID", "TENCENTCLOUD_SECRET_KEY")]
NO_CREDENTIALS = "Please set your `secret_id` and `secret_key`."

_PREFIX = {
    "tencentcloud_vpc": "vpc-", "tencentcloud_subnet": "subnet-", "tencentcloud_security_group": "sg-",
    "tencentcloud_key_pair": "skey-", "tencentcloud_placement_group": "ps-", "tencentcloud_instance": "ins-",
    "tencentcloud_cbs_storage": "disk-", "tencentcloud_cfs_file_system": "cfs-",
    "tencentcloud_cfs_access_group": "pgroup-", "tencentcloud_cfs_access_rule": "rule-",
    "tencentcloud_eip": "eip-", "tencentcloud_nat_gateway": "nat-", "tencentcloud_route_table": "rtb-",
}
# ResetInstancesType (API 213/15744): "only instances whose system disk is CLOUD_BASIC,
# CLOUD_PREMIUM, CLOUD_SSD or CLOUD_BSSD" can change type. The page names no error code for it.
RESIZABLE_SYSTEM_DISKS = ("CLOUD_BASIC", "CLOUD_PREMIUM", "CLOUD_SSD", "CLOUD_BSSD")


def error(code: str, message: str) -> str:
    return f"[TencentCloudSDKError] Code={code}, Message={message}, RequestId=standin"


def new_id(type_name: str, attrs: dict, rng: random.Random) -> str:
    """Ids as the provider composes them (resource_tc_*.go, d.SetId)."""
    if type_name in _PREFIX:
        return hex_id(_PREFIX[type_name], rng, 8)
    if type_name == "tencentcloud_security_group_rule_set":
        return attrs["security_group_id"]
    if type_name == "tencentcloud_cbs_storage_attachment":
        return attrs["storage_id"]
    if type_name == "tencentcloud_route_table_entry":
        return f"{rng.randrange(10000, 99999)}.{attrs['route_table_id']}"
    if type_name == "tencentcloud_eip_association":
        return f"{attrs.get('eip_id')}::{attrs.get('instance_id')}"
    return hex_id("", rng, 8)


def fill(type_name: str, attrs: dict, view, before: dict | None = None) -> None:
    rng = random.Random(view.next())
    if type_name == "tencentcloud_vpc":
        set_if_unset(attrs, "default_route_table_id", hex_id("rtb-", rng, 8))
    elif type_name == "tencentcloud_instance":
        subnet = view.get("tencentcloud_subnet", attrs.get("subnet_id")) or {}
        taken = {i.get("private_ip") for i in view.of_type("tencentcloud_instance")}
        set_if_unset(attrs, "private_ip", host_ip(subnet.get("cidr_block"), taken))
        set_if_unset(attrs, "public_ip", public_ip(rng) if attrs.get("allocate_public_ip") else "")
        set_if_unset(attrs, "instance_status", "RUNNING")
    elif type_name == "tencentcloud_cfs_file_system":
        subnet = view.get("tencentcloud_subnet", attrs.get("subnet_id")) or {}
        set_if_unset(attrs, "fs_id", attrs["id"])
        taken = {i.get("private_ip") for i in view.of_type("tencentcloud_instance")}
        taken |= {f.get("mount_ip") for f in view.of_type("tencentcloud_cfs_file_system")}
        set_if_unset(attrs, "mount_ip", host_ip(subnet.get("cidr_block"), taken))
    elif type_name == "tencentcloud_eip":
        set_if_unset(attrs, "public_ip", public_ip(rng))
    elif type_name == "tencentcloud_subnet":
        set_if_unset(attrs, "route_table_id", (view.get("tencentcloud_vpc", attrs.get("vpc_id")) or {}).get("default_route_table_id"))


def create_check(type_name: str, attrs: dict, view) -> None:
    if type_name != "tencentcloud_instance":
        return
    for sold_out in view.faults.get("capacity", []):
        if sold_out["zone"] == attrs.get("availability_zone") and sold_out["type"] == attrs.get("instance_type"):
            raise CloudError(error("ResourceInsufficient.SpecifiedInstanceType",
                                   "Insufficient resources of the specified instance type."))


def update_check(type_name: str, before: dict, after: dict, view) -> None:
    if type_name != "tencentcloud_instance":
        return
    if before.get("instance_type") != after.get("instance_type") and \
            before.get("system_disk_type") not in RESIZABLE_SYSTEM_DISKS:
        raise CloudError(error("UnsupportedOperation",
                               f"ResetInstancesType does not support system disk type {before.get('system_disk_type')}."))


def delete_check(type_name: str, attrs: dict, view) -> None:
    subnets = [s["id"] for s in view.of_type("tencentcloud_subnet") if s.get("vpc_id") == attrs["id"]]
    if type_name == "tencentcloud_vpc" and subnets:
        # VPC API "DeleteVpc" (215/15775): the VPC must hold no resources first; ResourceInUse
        raise CloudError(error("ResourceInUse", f"The VPC still has subnets: {', '.join(subnets)}."))
    if type_name == "tencentcloud_placement_group":
        users = [i["id"] for i in view.of_type("tencentcloud_instance") if i.get("placement_group_id") == attrs["id"]]
        if users:
            # CVM docs, "Placement Group": only empty placement groups can be deleted.
            raise CloudError(error("ResourceInUse.DisasterRecoverGroup",
                                   "The placement group still contains instances and cannot be deleted."))
    if type_name == "tencentcloud_subnet":
        users = [i["id"] for i in view.of_type("tencentcloud_instance") if i.get("subnet_id") == attrs["id"]]
        if users:
            raise CloudError(error("ResourceInUse", f"The subnet still has resources: {', '.join(users)}."))


def quota_error(type_name: str) -> str:
    return error("LimitExceeded.InstanceQuota", "The quota of instances is used up.")


def lost_response(type_name: str) -> str:
    return error("ClientError.NetworkError", "read tcp: i/o timeout")


def not_found(type_name: str, object_id: str) -> str:
    return error("InvalidInstanceId.NotFound", f"{object_id} not found")


def read_data(type_name: str, attrs: dict, view) -> None:
    if type_name == "tencentcloud_images":
        image = {"image_id": "img-487zeit5", "image_name": "Ubuntu Server 22.04 LTS 64bit", "os_name":
                 "Ubuntu Server 22.04 LTS 64bit", "image_type": "PUBLIC_IMAGE", "architecture": "x86_64",
                 "image_state": "NORMAL", "platform": "Ubuntu", "snapshots": []}
        attrs["images"] = [image]
        attrs["id"] = "standin-images"
