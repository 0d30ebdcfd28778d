"""Huawei Cloud as the huaweicloud provider meets it: ids, computed values and refusals.

Error text is shaped as the provider prints a failed ECS request (the gophercloud-style "Bad
request with: [METHOD URL], error message: {"error": {"code", "message"}}"); the rules come from
the ECS API reference: ecs_02_0209 / ecs_02_0210 "Modifying the Specifications of an ECS"
("Spot ECSs do not support specifications modification"), the ECS user guide ecs_03_0190 ("spot
instances cannot be converted to pay-per-use or yearly/monthly"), and the ECS error code page
(Ecs.0319 "The selected flavor has insufficient capacity", Ecs.0001 quota).
"""

from __future__ import annotations

import json
import random
import uuid

from .cloud import CloudError
from .rules_common import host_ip, public_ip, set_if_unset, too_soon

REGION_ENV = "HW_REGION_NAME"
# huaweicloud/provider.go: access_key / secret_key default to these variables.
CREDENTIALS = [("HW_ACCESS_KEY", "HW_SECRET_KEY")]
NO_CREDENTIALS = "The access key and secret key must be provided (HW_ACCESS_KEY and HW_SECRET_KEY)"


def error(method: str, path: str, code: str, message: str) -> str:
    body = json.dumps({"error": {"code": code, "message": message}})
    return (f"Bad request with: [{method} https://ecs.cn-north-4.myhuaweicloud.com{path}], "
            f"error message: {body}")


def new_id(type_name: str, attrs: dict, rng: random.Random) -> str:
    """Huawei ids are UUIDs (the key pair's is its name)."""
    if type_name == "huaweicloud_kps_keypair":
        return attrs["name"]
    if type_name == "huaweicloud_compute_volume_attach":
        return f"{attrs['instance_id']}/{attrs['volume_id']}"
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def fill(type_name: str, attrs: dict, view, before: dict | None = None) -> None:
    rng = random.Random(view.next())
    if type_name == "huaweicloud_compute_instance":
        net = (attrs.get("network") or [{}])[0]
        subnet = view.get("huaweicloud_vpc_subnet", net.get("uuid")) or {}
        taken = {i.get("access_ip_v4") for i in view.of_type("huaweicloud_compute_instance")}
        address = host_ip(subnet.get("cidr"), taken)
        set_if_unset(attrs, "access_ip_v4", address)
        for n in attrs.get("network") or []:
            set_if_unset(n, "fixed_ip_v4", address)
        set_if_unset(attrs, "public_ip", public_ip(rng) if attrs.get("eip_type") or attrs.get("bandwidth") else "")
        set_if_unset(attrs, "status", "ACTIVE")
    elif type_name == "huaweicloud_sfs_turbo":
        subnet = view.get("huaweicloud_vpc_subnet", attrs.get("subnet_id")) or {}
        taken = {i.get("access_ip_v4") for i in view.of_type("huaweicloud_compute_instance")}
        address = host_ip(subnet.get("cidr"), taken | {s.get("export_location", "").split(":")[0]
                                                       for s in view.of_type("huaweicloud_sfs_turbo")})
        set_if_unset(attrs, "export_location", f"{address}:/")
    elif type_name == "huaweicloud_vpc_eip":
        set_if_unset(attrs, "address", public_ip(rng))


def create_check(type_name: str, attrs: dict, view) -> None:
    if type_name != "huaweicloud_compute_instance":
        return
    if too_soon(attrs.get("auto_terminate_time")):
        raise CloudError("error creating server: " + error(
            "POST", "/v1.1/p/cloudservers", "Ecs.0005",  # stand-in code: the page names none
            "auto_terminate_time must be at least 30 minutes later than the current time."))
    flavor = attrs.get("flavor_id") or attrs.get("flavor_name")
    for sold_out in view.faults.get("capacity", []):
        if sold_out["zone"] == attrs.get("availability_zone") and sold_out["type"] == flavor:
            raise CloudError("error creating server: " + error(
                "POST", "/v1.1/p/cloudservers", "Ecs.0319", "The selected flavor has insufficient capacity."))


def update_check(type_name: str, before: dict, after: dict, view) -> None:
    if type_name != "huaweicloud_compute_instance":
        return
    path = f"/v1.1/p/cloudservers/{before['id']}"
    moved = after.get("auto_terminate_time") != before.get("auto_terminate_time")
    if moved and too_soon(after.get("auto_terminate_time")):
        # UpdateAutoTerminateTime (POST /v1/{project_id}/cloudservers/{server_id}/actions/
        # update-auto-terminate-time) takes the same rule as create (Huawei ECS docs, "Setting
        # Auto-Deletion Time": at least 30 minutes after now).
        raise CloudError("error updating auto-terminate time of server: " + error(
            "POST", f"/v1/p/cloudservers/{before['id']}/actions/update-auto-terminate-time", "Ecs.0005",
            "auto_terminate_time must be at least 30 minutes later than the current time."))
    resized = (before.get("flavor_id"), before.get("flavor_name")) != (after.get("flavor_id"), after.get("flavor_name"))
    if resized and before.get("charging_mode") == "spot":
        raise CloudError("error resizing server: " + error(
            "POST", path + "/resize", "Ecs.0001", "Spot ECSs do not support specifications modification."))
    if before.get("charging_mode") != after.get("charging_mode") and "spot" in (
            before.get("charging_mode"), after.get("charging_mode")):
        raise CloudError("error changing the charging mode of server: " + error(
            "POST", path + "/changemode", "Ecs.0001",
            "Spot instances cannot be converted to pay-per-use or yearly/monthly."))


def delete_check(type_name: str, attrs: dict, view) -> None:
    subnets = [s["id"] for s in view.of_type("huaweicloud_vpc_subnet") if s.get("vpc_id") == attrs["id"]]
    if type_name == "huaweicloud_vpc" and subnets:
        # VPC API "Deleting a VPC": its subnets must be deleted first (VPC.0213 is the stand-in's code for it)
        raise CloudError(error("DELETE", f"/v1/p/vpcs/{attrs['id']}", "VPC.0213",
                               f"The VPC still has subnets: {', '.join(subnets)}."))
    if type_name == "huaweicloud_vpc_subnet":
        users = [i["id"] for i in view.of_type("huaweicloud_compute_instance")
                 if any(n.get("uuid") == attrs["id"] for n in i.get("network") or [])]
        if users:
            raise CloudError(error("DELETE", f"/v1/p/subnets/{attrs['id']}", "VPC.0213",
                                   f"The subnet still has ports in use: {', '.join(users)}."))


def quota_error(type_name: str) -> str:
    return "error creating server: " + error("POST", "/v1.1/p/cloudservers", "Ecs.0001", "Insufficient ECS quota.")


def lost_response(type_name: str) -> str:
    return "error creating resource: Post \"https://ecs.cn-north-4.myhuaweicloud.com\": net/http: timeout awaiting response headers"


def not_found(type_name: str, object_id: str) -> str:
    return f"Resource not found: [GET https://ecs.cn-north-4.myhuaweicloud.com/v1/p/{object_id}]"


def read_data(type_name: str, attrs: dict, view) -> None:
    if type_name == "huaweicloud_images_image":
        attrs.update(id="5d1a4c0e-5d1a-4c0e-9a7b-2a7f0c9b1e22", name="Ubuntu 22.04 server 64bit",
                     status="active", visibility="public", os="Ubuntu")
    elif type_name == "huaweicloud_kms_key":
        attrs.update(id="0d0466b0-e727-4d9c-b35d-f84bb474a37f", key_state="2")
