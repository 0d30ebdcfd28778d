"""Alibaba Cloud as the alicloud provider meets it: ids, computed values and refusals.

Error text is shaped as the provider prints an SDK ServerError (resource_alicloud_*.go:
`WrapErrorf(err, DefaultErrorMsg, ...)` around alibaba-cloud-sdk-go's "SDK.ServerError / ErrorCode /
Recommend / RequestId / Message" block); codes and messages from the ECS, VPC and NAS API error
code pages (Alibaba Cloud OpenAPI Explorer: RunInstances, ModifyInstanceVpcAttribute, DeleteVSwitch,
DeleteDeploymentSet).
"""

from __future__ import annotations

import random

from .cloud import CloudError
from .rules_common import hex_id, host_ip, public_ip, set_if_unset, too_soon, unset

REGION_ENV = "ALICLOUD_REGION"
# alicloud/provider.go: access_key / secret_key default to these variables.
CREDENTIALS = [("ALICLOUD_ACCESS_KEY", "ALICLOUD_SECRET_KEY"),
               ("ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABA_CLOUD_ACCESS_KEY_SECRET")]
NO_CREDENTIALS = ("configuring Terraform Alibaba Cloud Provider: no valid credential sources for "
                  "Terraform Alibaba Cloud Provider found")

_PREFIX = {
    "alicloud_vpc": "vpc-", "alicloud_vswitch": "vsw-", "alicloud_security_group": "sg-",
    "alicloud_instance": "i-", "alicloud_ecs_disk": "d-", "alicloud_ecs_deployment_set": "ds-",
    "alicloud_eip_address": "eip-", "alicloud_nat_gateway": "ngw-",
}


def error(resource: str, action: str, code: str, message: str) -> str:
    return (f"[ERROR] terraform-provider-alicloud/alicloud/resource_{resource}.go: Resource {resource} "
            f"{action} Failed!!! [SDK alibaba-cloud-sdk-go ERROR]:\nSDK.ServerError\nErrorCode: {code}\n"
            f"Recommend: https://api.aliyun.com/troubleshoot?q={code}\nRequestId: standin\nMessage: {message}")


def new_id(type_name: str, attrs: dict, rng: random.Random) -> str:
    """Ids as the provider composes them (resource_alicloud_*.go, d.SetId)."""
    if type_name in _PREFIX:
        return hex_id(_PREFIX[type_name], rng)
    if type_name == "alicloud_ecs_key_pair":
        return attrs["key_pair_name"]
    if type_name == "alicloud_security_group_rule":
        return ":".join(str(attrs.get(k)) for k in ("security_group_id", "type", "ip_protocol", "port_range",
                                                     "nic_type", "cidr_ip", "policy", "priority"))
    if type_name == "alicloud_ecs_disk_attachment":
        return f"{attrs['disk_id']}:{attrs['instance_id']}"
    if type_name == "alicloud_eip_association":
        return f"{attrs['allocation_id']}:{attrs['instance_id']}"
    if type_name == "alicloud_snat_entry":
        return f"{attrs['snat_table_id']}:{hex_id('snat-', rng)}"
    if type_name == "alicloud_nas_file_system":
        return hex_id("", rng, 10)
    if type_name == "alicloud_nas_access_group":
        return f"{attrs['access_group_name']}:{attrs.get('file_system_type') or 'standard'}"
    if type_name == "alicloud_nas_access_rule":
        return f"{attrs['access_group_name']}:{rng.randrange(1, 99)}:{attrs.get('file_system_type') or 'standard'}"
    if type_name == "alicloud_nas_mount_target":
        return f"{attrs['file_system_id']}:{attrs['file_system_id']}-{hex_id('', rng, 5)}.{{region}}.nas.aliyuncs.com"
    return hex_id("", rng)


def fill(type_name: str, attrs: dict, view, before: dict | None = None) -> None:
    """The values the cloud computes, where the plan left them unknown."""
    rng = random.Random(view.next())
    if "{region}" in attrs.get("id", ""):
        attrs["id"] = attrs["id"].replace("{region}", view.region or "cn-hangzhou")
    set_if_unset(attrs, "status", "Available")
    if type_name == "alicloud_vpc":
        set_if_unset(attrs, "route_table_id", hex_id("vtb-", rng))
        set_if_unset(attrs, "router_id", hex_id("vrt-", rng))
    elif type_name == "alicloud_instance":
        vsw = view.get("alicloud_vswitch", attrs.get("vswitch_id")) or {}
        set_if_unset(attrs, "availability_zone", vsw.get("zone_id"))
        taken = {i.get("private_ip") for i in view.of_type("alicloud_instance")}
        set_if_unset(attrs, "private_ip", host_ip(vsw.get("cidr_block"), taken))
        set_if_unset(attrs, "public_ip", public_ip(rng) if (attrs.get("internet_max_bandwidth_out") or 0) > 0 else "")
        attrs["status"] = "Running"
        attrs["auto_release_time"] = to_minute(attrs.get("auto_release_time"))
    elif type_name == "alicloud_eip_address":
        set_if_unset(attrs, "ip_address", public_ip(rng))
    elif type_name == "alicloud_nat_gateway":
        set_if_unset(attrs, "snat_table_ids", hex_id("stb-", rng))
        set_if_unset(attrs, "forward_table_ids", hex_id("ftb-", rng))
    elif type_name == "alicloud_nas_mount_target":
        set_if_unset(attrs, "mount_target_domain", attrs["id"].split(":", 1)[1])
    elif type_name == "alicloud_nas_access_rule":
        set_if_unset(attrs, "access_rule_id", attrs["id"].split(":")[1])


def create_check(type_name: str, attrs: dict, view) -> None:
    if type_name != "alicloud_instance":
        return
    if too_soon(attrs.get("auto_release_time")):
        raise CloudError(error("alicloud_instance", "RunInstances", "InvalidAutoReleaseTime.Malformed",
                               "The specified AutoReleaseTime is invalid: it must be at least 30 minutes later "
                               "than the current time."))
    if attrs.get("deployment_set_id") and attrs.get("spot_strategy") not in (None, "NoSpot"):
        # ECS docs, "Deployment sets", limits: preemptible (spot) instances cannot be created in a
        # deployment set (stand-in code: the page names none).
        raise CloudError(error("alicloud_instance", "RunInstances", "InvalidParameter.DeploymentSet",
                               "Preemptible instances are not supported in a deployment set."))
    zone = attrs.get("availability_zone")
    if unset(zone):
        zone = (view.get("alicloud_vswitch", attrs.get("vswitch_id")) or {}).get("zone_id")
    for sold_out in view.faults.get("capacity", []):
        if sold_out["zone"] == zone and sold_out["type"] == attrs.get("instance_type"):
            raise CloudError(error("alicloud_instance", "RunInstances", "OperationDenied.NoStock",
                                   "The requested resource is sold out in the specified zone; try other "
                                   "types of resources or other regions and zones."))


def to_minute(when):
    """ECS keeps a release time to the minute: DescribeInstances answers '2023-07-26T23:50Z', which
    the provider's Read writes as '2023-07-26T23:50:00Z' (resource_alicloud_instance.go)."""
    return when[:16] + ":00Z" if isinstance(when, str) and len(when) >= 16 else when


def update_check(type_name: str, before: dict, after: dict, view) -> None:
    if type_name != "alicloud_instance":
        return
    moved = after.get("auto_release_time") != before.get("auto_release_time")
    if moved and too_soon(after.get("auto_release_time")):
        # ModifyInstanceAutoReleaseTime (ECS API 2014-05-26): "at least 30 minutes later than the
        # current time", as at create.
        raise CloudError(error("alicloud_instance", "ModifyInstanceAutoReleaseTime", "InvalidAutoReleaseTime.Malformed",
                               "The specified AutoReleaseTime is invalid: it must be at least 30 minutes later "
                               "than the current time."))
    if before.get("vswitch_id") == after.get("vswitch_id"):
        return
    old = (view.get("alicloud_vswitch", before.get("vswitch_id")) or {}).get("zone_id")
    new = (view.get("alicloud_vswitch", after.get("vswitch_id")) or {}).get("zone_id")
    if old != new:
        # ModifyInstanceVpcAttribute (ECS API 2014-05-26): "VSwitchId: the new vSwitch cannot be in
        # another zone", error InvalidVSwitchId.Mismatch (400).
        raise CloudError(error("alicloud_instance", "ModifyInstanceVpcAttribute", "InvalidVSwitchId.Mismatch",
                               "Specified instance and virtual switch are not in the same zone."))


def delete_check(type_name: str, attrs: dict, view) -> None:
    if type_name == "alicloud_vpc" and any(v.get("vpc_id") == attrs["id"] for v in view.of_type("alicloud_vswitch")):
        # DeleteVpc (VPC API 2016-04-28, error codes): 400 DependencyViolation.VSwitch, "Specified object has
        # dependent resources" while a vSwitch is in the VPC (the provider retries it until its delete timeout)
        raise CloudError(error("alicloud_vpc", "DeleteVpc", "DependencyViolation.VSwitch",
                               "Specified object has dependent resources."))
    if type_name == "alicloud_vswitch":
        users = [i["id"] for i in view.of_type("alicloud_instance") if i.get("vswitch_id") == attrs["id"]]
        if users:
            raise CloudError(error("alicloud_vswitch", "DeleteVSwitch", "DependencyViolation",
                                   f"The specified vswitch has resources in use: {', '.join(users)}."))
    if type_name == "alicloud_ecs_deployment_set":
        users = [i["id"] for i in view.of_type("alicloud_instance") if i.get("deployment_set_id") == attrs["id"]]
        if users:
            raise CloudError(error("alicloud_ecs_deployment_set", "DeleteDeploymentSet",
                                   "DependencyViolation.Instance",
                                   "The deployment set still contains instances."))


def quota_error(type_name: str) -> str:
    return error(type_name, "Create", "QuotaExceed.ElasticQuota",
                 "The number of vCPUs assigned to the ECS instances has exceeded the quota in the zone.")


def lost_response(type_name: str) -> str:
    return error(type_name, "Create", "SDK.TimeoutError", "The request timed out: read tcp: i/o timeout")


def not_found(type_name: str, object_id: str) -> str:
    return error(type_name, "Describe", "InvalidInstanceId.NotFound", f"{object_id} does not exist")


def read_data(type_name: str, attrs: dict, view) -> None:
    if type_name == "alicloud_images":
        image = {"id": "ubuntu_22_04_x64_20G_alibase_20241120.vhd", "name": "ubuntu_22_04_x64_20G_alibase_20241120.vhd",
                 "image_id": "ubuntu_22_04_x64_20G_alibase_20241120.vhd", "os_type": "linux",
                 "architecture": "x86_64", "status": "Available", "image_owner_alias": "system"}
        attrs["images"] = [image]
        attrs["ids"] = [image["id"]]
        attrs["id"] = "standin-images"
