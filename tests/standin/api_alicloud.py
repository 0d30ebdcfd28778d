"""Alibaba Cloud's RPC APIs that trainkit/clouds/alicloud_sweep.py calls, answered from the store.

Requests (alibabacloud-tea-openapi `call_api`, style RPC): the action and version in the
x-acs-action / x-acs-version headers (or Action / Version query parameters, the older RPC form),
parameters in the query or a form body, signed with ACS3-HMAC-SHA256 in `Authorization:
ACS3-HMAC-SHA256 Credential=<AccessKeyId>,SignedHeaders=...,Signature=...` (or AccessKeyId and
Signature query parameters). Errors: HTTP 4xx with {RequestId, HostId, Code, Message, Recommend}
(Alibaba Cloud OpenAPI, "Common error codes": IncompleteSignature 400, InvalidAccessKeyId.NotFound
404 "Specified access key is not found.", InvalidAction.NotFound 404 "Specified api is not found,
please check your url and method.", InvalidVersion 400, MissingParameter 400, Throttling.User 400
"Request was denied due to user flow control.").

APIs (each handler cites its reference page; response shapes are the pages' JSON samples):
Tag 2018-08-28 ListTagResources; ECS 2014-05-26 DescribeInstances, DescribeSecurityGroups,
DeleteInstances, DeleteDisk, DeleteSecurityGroup, DeleteKeyPairs; VPC 2016-04-28 DescribeVSwitches,
DeleteVSwitch, DeleteVpc; NAS 2017-06-26 DescribeMountTargets, DeleteMountTarget, DeleteFileSystem;
the placement preflight's ECS DescribeAvailableResource (api_offers.py).
Every call names its RegionId and sees only that region's objects.
"""

from __future__ import annotations

import json
import re

from . import api_offers, rules_alicloud
from .api import ApiError, Objects, Request, request_id
from .cloud import CloudError

# The stand-in's account id: Alibaba account (UID) ids are 16 digits.
ACCOUNT = "1234567890123456"
CONTENT_TYPE = "application/json;charset=utf-8"  # the OpenAPI gateway's JSON answers
THROTTLED = ApiError(400, "Throttling.User", "Request was denied due to user flow control.")
# Tag API "ListTagResources" ARNs, arn:acs:<service>:<region>:<account>:<type>/<id> (RAM docs, "ARN").
ARN = {"alicloud_instance": ("ecs", "instance"), "alicloud_ecs_disk": ("ecs", "disk"),
       "alicloud_security_group": ("ecs", "securitygroup"), "alicloud_ecs_key_pair": ("ecs", "keypair"),
       "alicloud_vpc": ("vpc", "vpc"), "alicloud_vswitch": ("vpc", "vswitch"),
       "alicloud_nat_gateway": ("vpc", "natgateway"), "alicloud_eip_address": ("vpc", "eip"),
       "alicloud_nas_file_system": ("nas", "filesystem")}
TAG_PAGE_MAX = 1000        # ListTagResources PageSize: 1-1000
ECS_PAGE_MAX = 100         # DescribeInstances / DescribeSecurityGroups MaxResults and ids a call: at most 100
VSW_PAGE_MAX = 50          # DescribeVSwitches PageSize: at most 50
NAS_PAGE_MAX = 100         # DescribeMountTargets PageSize: 1-100
NUMBERED_MAX = 100         # DeleteInstances InstanceId.N, DeleteKeyPairs KeyPairNames: at most 100


def claims(req: Request) -> bool:
    auth = req.headers.get("authorization", "")
    return "x-acs-action" in req.headers or "Action" in req.params or auth.startswith(("ACS3-", "acs "))


def authenticate(req: Request, keys: dict) -> None:
    """The access key id from the ACS3 Authorization header or the RPC AccessKeyId parameter."""
    auth = req.headers.get("authorization", "")
    found = re.match(r"ACS3-HMAC-SHA256 Credential=([^,]+),SignedHeaders=[^,]+,Signature=\w+$", auth)
    if found and {"x-acs-date", "x-acs-signature-nonce", "x-acs-content-sha256"} <= set(req.headers):
        given = found.group(1)
    elif not auth and req.params.get("Signature") and req.params.get("SignatureNonce"):
        given = req.params.get("AccessKeyId")
    else:
        raise ApiError(400, "IncompleteSignature", "The request signature does not conform to Aliyun standards.")
    key = keys.get("alicloud")
    if not key or given != key:
        raise ApiError(404, "InvalidAccessKeyId.NotFound", "Specified access key is not found.")


def action(req: Request) -> str:
    return req.headers.get("x-acs-action") or req.params.get("Action", "")


def error(req: Request, err: ApiError) -> tuple[int, dict, dict]:
    return err.status, {"RequestId": request_id(), "HostId": req.headers.get("host", ""), "Code": err.code,
                        "Message": err.message, "Recommend": f"https://api.aliyun.com/troubleshoot?q={err.code}"}, {}


def handle(req: Request, data: dict) -> tuple[int, dict]:
    version = req.headers.get("x-acs-version") or req.params.get("Version")
    if version not in {v for v, _ in HANDLERS}:
        raise ApiError(400, "InvalidVersion", "Specified parameter Version is not valid.")
    handler = HANDLERS.get((version, action(req)))
    if handler is None:
        raise ApiError(404, "InvalidAction.NotFound", "Specified api is not found, please check your url and method.")
    objects = Objects(data, _required(req.params, "RegionId"))
    return 200, {"RequestId": request_id(), **handler(req.params, objects)}


# ------------------------------------------------------------------------------------- parameters
def _required(params: dict, name: str) -> str:
    if not params.get(name):
        raise ApiError(400, "MissingParameter",
                       f'The input parameter "{name}" that is mandatory for processing this request is not supplied.')
    return params[name]


def _json_list(params: dict, name: str, most: int) -> list[str] | None:
    """A JSON-array parameter (`InstanceIds='["i-1"]'`), None when absent."""
    if name not in params:
        return None
    try:
        value = json.loads(params[name])
    except ValueError:
        value = None
    if not isinstance(value, list) or len(value) > most:
        raise ApiError(400, f"InvalidParameter.{name}", f"The specified parameter {name} is not valid.")
    return [str(v) for v in value]


def _numbered(params: dict, name: str) -> list[str]:
    """`Name.1`, `Name.2`, ... in order."""
    return [params[f"{name}.{n}"] for n in range(1, NUMBERED_MAX + 1) if f"{name}.{n}" in params]


def _page_size(params: dict, name: str, default: int, most: int) -> int:
    try:
        size = int(params.get(name, default))
    except ValueError:
        size = 0
    if not 1 <= size <= most:
        raise ApiError(400, f"InvalidParameter.{name}", f"The specified parameter {name} is not valid.")
    return size


def _tags(attrs: dict, key: str = "Key", value: str = "Value") -> list[dict]:
    return [{key: k, value: v} for k, v in sorted((attrs.get("tags") or {}).items())]


def _refuse(text: str) -> ApiError:
    """A rules_alicloud refusal (provider text: "ErrorCode: X ... Message: Y") as the API's error."""
    code = re.search(r"ErrorCode: (\S+)", text)
    message = re.search(r"Message: (.*)", text)
    return ApiError(400, code.group(1) if code else "DependencyViolation", message.group(1) if message else text)


# ------------------------------------------------------------------------------------- Tag
def list_tag_resources(params: dict, objects: Objects) -> dict:
    """Tag 2018-08-28 "ListTagResources": Tags a JSON object {key: value or [values]} (every key must
    match), PageSize 1-1000, NextToken; answers {NextToken, TagResources: [{ResourceARN, Tags: [{Key,
    Value}]}]}, an empty NextToken on the last page."""
    try:
        wanted = json.loads(_required(params, "Tags"))
    except ValueError:
        wanted = None
    if not isinstance(wanted, dict) or not wanted:
        raise ApiError(400, "InvalidParameter.Tags", "The specified parameter Tags is not valid.")
    size, start = _page_size(params, "PageSize", 50, TAG_PAGE_MAX), int(params.get("NextToken") or 0)
    rows = []
    for type_name, attrs in objects.tagged(ARN):
        tags = attrs.get("tags") or {}
        if all(k in tags and tags[k] in (v if isinstance(v, list) else [v]) for k, v in wanted.items()):
            service, kind = ARN[type_name]
            arn = f"arn:acs:{service}:{objects.region}:{ACCOUNT}:{kind}/{attrs['id']}"
            rows.append({"ResourceARN": arn, "Tags": _tags(attrs)})
    more = start + size < len(rows)
    return {"NextToken": str(start + size) if more else "", "TagResources": rows[start:start + size]}


# ------------------------------------------------------------------------------------- ECS
def _vpc_of_vswitch(objects: Objects, vswitch: str | None) -> str | None:
    return (objects.get("alicloud_vswitch", vswitch) or {}).get("vpc_id")


def describe_instances(params: dict, objects: Objects) -> dict:
    """ECS "DescribeInstances": InstanceIds a JSON array of at most 100, MaxResults at most 100;
    answers {TotalCount, NextToken, Instances: {Instance: [{InstanceId, RegionId, ZoneId, Status,
    InstanceType, InstanceNetworkType, VpcAttributes: {VpcId, VSwitchId, PrivateIpAddress: {IpAddress}},
    SecurityGroupIds: {SecurityGroupId}, Tags: {Tag: [{TagKey, TagValue}]}}]}}. Unknown ids are left out."""
    ids = _json_list(params, "InstanceIds", ECS_PAGE_MAX)
    size = _page_size(params, "MaxResults", 10, ECS_PAGE_MAX)
    rows = [{"InstanceId": a["id"], "RegionId": objects.region, "ZoneId": a.get("availability_zone"),
             "Status": a.get("status") or "Running", "InstanceType": a.get("instance_type"),
             "InstanceNetworkType": "vpc", "InstanceName": a.get("instance_name"),
             "VpcAttributes": {"VpcId": _vpc_of_vswitch(objects, a.get("vswitch_id")), "VSwitchId": a.get("vswitch_id"),
                               "PrivateIpAddress": {"IpAddress": [a["private_ip"]] if a.get("private_ip") else []}},
             "SecurityGroupIds": {"SecurityGroupId": list(a.get("security_groups") or [])},
             "Tags": {"Tag": _tags(a, "TagKey", "TagValue")}}
            for a in objects.of_type("alicloud_instance") if ids is None or a["id"] in ids]
    return {"TotalCount": len(rows), "NextToken": "", "Instances": {"Instance": rows[:size]}}


def describe_security_groups(params: dict, objects: Objects) -> dict:
    """ECS "DescribeSecurityGroups": SecurityGroupIds a JSON array of at most 100, MaxResults at most
    100; answers {RegionId, TotalCount, NextToken, SecurityGroups: {SecurityGroup: [{SecurityGroupId,
    SecurityGroupName, SecurityGroupType, VpcId, Tags: {Tag}}]}}."""
    ids = _json_list(params, "SecurityGroupIds", ECS_PAGE_MAX)
    size = _page_size(params, "MaxResults", 10, ECS_PAGE_MAX)
    rows = [{"SecurityGroupId": a["id"], "SecurityGroupName": a.get("security_group_name"),
             "SecurityGroupType": a.get("security_group_type") or "normal", "VpcId": a.get("vpc_id"),
             "Tags": {"Tag": _tags(a, "TagKey", "TagValue")}}
            for a in objects.of_type("alicloud_security_group") if ids is None or a["id"] in ids]
    return {"RegionId": objects.region, "TotalCount": len(rows), "NextToken": "",
            "SecurityGroups": {"SecurityGroup": rows[:size]}}


def delete_instances(params: dict, objects: Objects) -> dict:
    """ECS "DeleteInstances": InstanceId.N (1-100); a running instance only with Force=true (else 403
    IncorrectInstanceStatus); an unknown id 404 InvalidInstanceId.NotFound, and nothing is deleted. The
    instance's disk attachments go with it, and the disks attached with DeleteWithInstance too (ECS
    "DeleteInstances": "data disks for which DeleteWithInstance is true are released")."""
    ids = _numbered(params, "InstanceId")
    if not ids:
        _required(params, "InstanceId.1")
    for rid in ids:
        inst = objects.get("alicloud_instance", rid)
        if inst is None:
            raise ApiError(404, "InvalidInstanceId.NotFound", "The specified InstanceId does not exist.")
        if params.get("Force") != "true" and (inst.get("status") or "Running") != "Stopped":
            raise ApiError(403, "IncorrectInstanceStatus", "The current status of the resource does not support "
                                                           "this operation.")
    for rid in ids:
        for att in [a for a in objects.of_type("alicloud_ecs_disk_attachment") if a.get("instance_id") == rid]:
            objects.remove("alicloud_ecs_disk_attachment", att["id"])
            if att.get("delete_with_instance"):
                objects.remove("alicloud_ecs_disk", att.get("disk_id"))
        for assoc in [a for a in objects.of_type("alicloud_eip_association") if a.get("instance_id") == rid]:
            objects.remove("alicloud_eip_association", assoc["id"])
        objects.remove("alicloud_instance", rid)
    return {}


def delete_disk(params: dict, objects: Objects) -> dict:
    """ECS "DeleteDisk": DiskId; 404 InvalidDiskId.NotFound; a disk still attached: 403
    IncorrectDiskStatus (only an Available disk can be released)."""
    disk = _required(params, "DiskId")
    if objects.get("alicloud_ecs_disk", disk) is None:
        raise ApiError(404, "InvalidDiskId.NotFound", "The specified disk does not exist.")
    if objects.users("alicloud_ecs_disk_attachment", lambda a: a.get("disk_id") == disk):
        raise ApiError(403, "IncorrectDiskStatus", "The current disk status does not support this operation.")
    objects.remove("alicloud_ecs_disk", disk)
    return {}


def delete_security_group(params: dict, objects: Objects) -> dict:
    """ECS "DeleteSecurityGroup": SecurityGroupId; 404 InvalidSecurityGroupId.NotFound; instances still
    in it: 403 DependencyViolation. Its rules go with it."""
    group = _required(params, "SecurityGroupId")
    if objects.get("alicloud_security_group", group) is None:
        raise ApiError(404, "InvalidSecurityGroupId.NotFound", "The specified SecurityGroupId does not exist.")
    if objects.users("alicloud_instance", lambda a: group in (a.get("security_groups") or [])):
        raise ApiError(403, "DependencyViolation", "There is still instance(s) in the specified security group.")
    for rule in objects.users("alicloud_security_group_rule", lambda a: a.get("security_group_id") == group):
        objects.remove("alicloud_security_group_rule", rule)
    objects.remove("alicloud_security_group", group)
    return {}


def delete_key_pairs(params: dict, objects: Objects) -> dict:
    """ECS "DeleteKeyPairs": KeyPairNames a JSON array of 1-100 names; instances keep a deleted key."""
    names = _json_list(params, "KeyPairNames", NUMBERED_MAX) or _required(params, "KeyPairNames") and []
    for name in names:
        objects.remove("alicloud_ecs_key_pair", name)
    return {}


# ------------------------------------------------------------------------------------- VPC
def describe_vswitches(params: dict, objects: Objects) -> dict:
    """VPC 2016-04-28 "DescribeVSwitches": VSwitchId, VpcId filters, PageSize at most 50; answers
    {TotalCount, PageNumber, PageSize, VSwitches: {VSwitch: [{VSwitchId, VpcId, ZoneId, CidrBlock,
    Status, VSwitchName}]}}."""
    size, number = _page_size(params, "PageSize", 10, VSW_PAGE_MAX), int(params.get("PageNumber") or 1)
    rows = [{"VSwitchId": a["id"], "VpcId": a.get("vpc_id"), "ZoneId": a.get("zone_id"),
             "CidrBlock": a.get("cidr_block"), "Status": "Available", "VSwitchName": a.get("vswitch_name")}
            for a in objects.of_type("alicloud_vswitch")
            if params.get("VSwitchId") in (None, a["id"]) and params.get("VpcId") in (None, a.get("vpc_id"))]
    return {"TotalCount": len(rows), "PageNumber": number, "PageSize": size,
            "VSwitches": {"VSwitch": rows[(number - 1) * size:number * size]}}


def delete_vswitch(params: dict, objects: Objects) -> dict:
    """VPC 2016-04-28 "DeleteVSwitch": "release or remove all resources in the vSwitch first": 400
    DependencyViolation (rules_alicloud.delete_check: instances; here also NAS mount targets, NAT
    gateways and SNAT entries); an unknown id: 404 InvalidVSwitchId.NotFound."""
    vsw = _required(params, "VSwitchId")
    attrs = objects.get("alicloud_vswitch", vsw)
    if attrs is None:
        raise ApiError(404, "InvalidVSwitchId.NotFound", "Specified virtual switch does not exist.")
    try:
        rules_alicloud.delete_check("alicloud_vswitch", attrs, objects.view)
    except CloudError as err:
        raise _refuse(str(err)) from None
    inside = (objects.users("alicloud_nas_mount_target", lambda a: a.get("vswitch_id") == vsw)
              + objects.users("alicloud_nat_gateway", lambda a: a.get("vswitch_id") == vsw)
              + objects.users("alicloud_snat_entry", lambda a: a.get("source_vswitch_id") == vsw))
    if inside:
        raise ApiError(400, "DependencyViolation", f"Specified object has dependent resources: {', '.join(inside)}.")
    objects.remove("alicloud_vswitch", vsw)
    return {}


def delete_vpc(params: dict, objects: Objects) -> dict:
    """VPC 2016-04-28 "DeleteVpc" (error codes): 400 DependencyViolation.VSwitch, .SecurityGroup,
    .Instance (a NAT gateway) "Specified object has dependent resources"; 404 InvalidVpcId.NotFound."""
    vpc = _required(params, "VpcId")
    if objects.get("alicloud_vpc", vpc) is None:
        raise ApiError(404, "InvalidVpcId.NotFound", "Specified VPC does not exist.")
    for type_name, code in (("alicloud_vswitch", "VSwitch"), ("alicloud_security_group", "SecurityGroup"),
                            ("alicloud_nat_gateway", "Instance")):
        if objects.users(type_name, lambda a: a.get("vpc_id") == vpc):
            raise ApiError(400, f"DependencyViolation.{code}", "Specified object has dependent resources.")
    objects.remove("alicloud_vpc", vpc)
    return {}


# ------------------------------------------------------------------------------------- NAS
def _file_system(params: dict, objects: Objects) -> str:
    fs = _required(params, "FileSystemId")
    if objects.get("alicloud_nas_file_system", fs) is None:
        raise ApiError(404, "InvalidFileSystem.NotFound", "The specified file system does not exist.")
    return fs


def _mount_targets(objects: Objects, fs: str) -> list[dict]:
    return [a for a in objects.of_type("alicloud_nas_mount_target") if a.get("file_system_id") == fs]


def describe_mount_targets(params: dict, objects: Objects) -> dict:
    """NAS 2017-06-26 "DescribeMountTargets": FileSystemId required, PageSize 1-100 (default 10),
    PageNumber from 1; answers {TotalCount, PageSize, PageNumber, MountTargets: {MountTarget:
    [{MountTargetDomain, Status, NetworkType, VpcId, VswId, AccessGroup}]}}."""
    fs = _file_system(params, objects)
    size, number = _page_size(params, "PageSize", 10, NAS_PAGE_MAX), int(params.get("PageNumber") or 1)
    rows = [{"MountTargetDomain": a["id"].split(":", 1)[1], "Status": "Active", "NetworkType": "Vpc",
             "VpcId": a.get("vpc_id"), "VswId": a.get("vswitch_id"), "AccessGroup": a.get("access_group_name")}
            for a in _mount_targets(objects, fs)]
    return {"TotalCount": len(rows), "PageSize": size, "PageNumber": number,
            "MountTargets": {"MountTarget": rows[(number - 1) * size:number * size]}}


def delete_mount_target(params: dict, objects: Objects) -> dict:
    """NAS 2017-06-26 "DeleteMountTarget": FileSystemId and MountTargetDomain, both required; an
    unknown mount target: 404 InvalidMountTarget.NotFound."""
    fs, domain = _file_system(params, objects), _required(params, "MountTargetDomain")
    if objects.get("alicloud_nas_mount_target", f"{fs}:{domain}") is None:
        raise ApiError(404, "InvalidMountTarget.NotFound", "The specified mount target does not exist.")
    objects.remove("alicloud_nas_mount_target", f"{fs}:{domain}")
    return {}


def delete_file_system(params: dict, objects: Objects) -> dict:
    """NAS 2017-06-26 "DeleteFileSystem": "before you delete a file system, you must delete all mount
    targets of the file system" (the page names no code for it: 403 Forbidden.MountTargetExists is the
    stand-in's)."""
    fs = _file_system(params, objects)
    if _mount_targets(objects, fs):
        raise ApiError(403, "Forbidden.MountTargetExists", "The file system still has mount targets.")
    objects.remove("alicloud_nas_file_system", fs)
    return {}


HANDLERS = {
    ("2018-08-28", "ListTagResources"): list_tag_resources,
    ("2014-05-26", "DescribeInstances"): describe_instances,
    ("2014-05-26", "DescribeSecurityGroups"): describe_security_groups,
    ("2014-05-26", "DeleteInstances"): delete_instances,
    ("2014-05-26", "DeleteDisk"): delete_disk,
    ("2014-05-26", "DeleteSecurityGroup"): delete_security_group,
    ("2014-05-26", "DeleteKeyPairs"): delete_key_pairs,
    ("2016-04-28", "DescribeVSwitches"): describe_vswitches,
    ("2016-04-28", "DeleteVSwitch"): delete_vswitch,
    ("2016-04-28", "DeleteVpc"): delete_vpc,
    ("2017-06-26", "DescribeMountTargets"): describe_mount_targets,
    ("2017-06-26", "DeleteMountTarget"): delete_mount_target,
    ("2017-06-26", "DeleteFileSystem"): delete_file_system,
    ("2014-05-26", "DescribeAvailableResource"): api_offers.describe_available_resource,
}
