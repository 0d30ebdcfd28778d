"""Tencent Cloud's APIs that trainkit/clouds/tencentcloud_sweep.py calls, answered from the store.

Requests (tencentcloud-sdk-python-common CommonClient.call_json): POST / with a JSON body, the action,
version and region in X-TC-Action / X-TC-Version / X-TC-Region, signed with TC3-HMAC-SHA256
(`Authorization: TC3-HMAC-SHA256 Credential=<SecretId>/<date>/<service>/tc3_request, SignedHeaders=...,
Signature=...`, X-TC-Timestamp): the service is the credential scope's (Tencent Cloud API 3.0,
"Signature v3"). Answers are HTTP 200 with {"Response": {..., "RequestId"}}; an error is
{"Response": {"Error": {"Code", "Message"}, "RequestId"}} (API 3.0 "Responses"), with the common
codes of "Common Error Codes": AuthFailure.SignatureFailure, AuthFailure.SecretIdNotFound,
InvalidAction, NoSuchVersion, MissingParameter, UnknownParameter, InvalidParameterValue,
RequestLimitExceeded ("The number of requests exceeds the frequency limit").

APIs (each handler cites its reference page): Tag 2018-08-13 GetResources; CVM 2017-03-12
DescribeInstances, TerminateInstances, DeleteKeyPairs; CBS 2017-03-12 TerminateDisks; CFS 2019-07-19
DescribeMountTargets, DeleteCfsFileSystem; VPC 2017-03-12 DescribeSubnets, DeleteSubnet, DeleteVpc,
DeleteSecurityGroup; the placement preflight's CVM DescribeZoneInstanceConfigInfos (api_offers.py).
The Tag API is global (every region's resources); the others see X-TC-Region's.
"""

from __future__ import annotations

import re

from . import api_offers, rules_tencentcloud
from .api import ApiError, Objects, Request, request_id
from .cloud import CloudError

# The stand-in's account: Tencent account ids (uin) are 10-12 digits.
UIN = "100012345678"
CONTENT_TYPE = "application/json"  # API 3.0 answers; the SDK reads an Error only under exactly this type (abstract_client._check_error)
THROTTLED = ApiError(200, "RequestLimitExceeded", "The number of requests exceeds the frequency limit.")
# Tag "GetResources" resource names, qcs::<service>:<region>:uin/<uin>:<prefix>/<id> (Tag API, "Resource
# description": six segments), and the prefix of each type (CAM docs, "Resource description method").
QCS = {"tencentcloud_instance": ("cvm", "instance"), "tencentcloud_cbs_storage": ("cvm", "volume"),
       "tencentcloud_cfs_file_system": ("cfs", "filesystem"), "tencentcloud_security_group": ("cvm", "sg"),
       "tencentcloud_subnet": ("vpc", "subnet"), "tencentcloud_vpc": ("vpc", "vpc"),
       "tencentcloud_key_pair": ("cvm", "keypair"), "tencentcloud_placement_group": ("cvm", "ps"),
       "tencentcloud_eip": ("cvm", "eip"), "tencentcloud_nat_gateway": ("vpc", "nat"),
       "tencentcloud_route_table": ("vpc", "rtb")}
TAG_PAGE_MAX = 200     # GetResources MaxResults: 1-200
IDS_MAX = 100          # InstanceIds / DiskIds / SubnetIds / KeyIds a request, and Limit: at most 100


def claims(req: Request) -> bool:
    return "x-tc-action" in req.headers or req.headers.get("authorization", "").startswith("TC3-")


def authenticate(req: Request, keys: dict) -> None:
    auth = req.headers.get("authorization", "")
    found = re.match(r"TC3-HMAC-SHA256 Credential=([^/]+)/\d{4}-\d{2}-\d{2}/([a-z]+)/tc3_request, "
                     r"SignedHeaders=[a-z;-]+, Signature=[0-9a-f]{64}$", auth)
    if not found or "x-tc-timestamp" not in req.headers:
        raise ApiError(200, "AuthFailure.SignatureFailure", "The provided credentials could not be validated. "
                                                             "Please check your signature is correct.")
    key = keys.get("tencentcloud")
    if not key or found.group(1) != key:
        raise ApiError(200, "AuthFailure.SecretIdNotFound", "The SecretId is not found, please ensure that your "
                                                             "SecretId is correct.")


def action(req: Request) -> str:
    return req.headers.get("x-tc-action", "")


def _service(req: Request) -> str:
    return re.search(r"Credential=[^/]+/[^/]+/([a-z]+)/", req.headers["authorization"]).group(1)


def error(req: Request, err: ApiError) -> tuple[int, dict, dict]:
    return 200, {"Response": {"Error": {"Code": err.code, "Message": err.message}, "RequestId": request_id()}}, {}


def handle(req: Request, data: dict) -> tuple[int, dict]:
    service, version = _service(req), req.headers.get("x-tc-version")
    if (service, version) not in {(s, v) for s, v, _ in HANDLERS}:
        raise ApiError(200, "NoSuchVersion", "The API version does not exist.")
    entry = HANDLERS.get((service, version, action(req)))
    if entry is None:
        raise ApiError(200, "InvalidAction", "The API does not exist.")
    handler, allowed = entry
    body = req.json()
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise ApiError(200, "UnknownParameter", f"The parameter `{unknown[0]}` is not recognized.")
    region = None if service == "tag" else req.headers.get("x-tc-region")
    if service != "tag" and not region:
        raise ApiError(200, "MissingParameter", "The request is missing a required parameter `Region`.")
    return 200, {"Response": {**handler(body, Objects(data, region)), "RequestId": request_id()}}


# ------------------------------------------------------------------------------------- parameters
def _required(body: dict, name: str):
    if body.get(name) in (None, "", []):
        raise ApiError(200, "MissingParameter", f"The request is missing a required parameter `{name}`.")
    return body[name]


def _ids(body: dict, name: str, required: bool = False) -> list[str] | None:
    ids = _required(body, name) if required else body.get(name)
    if ids is not None and (not isinstance(ids, list) or len(ids) > IDS_MAX):
        raise ApiError(200, "InvalidParameterValue", f"The value of `{name}` is invalid (at most {IDS_MAX} ids).")
    return ids


def _limit(body: dict, default: int, most: int) -> int:
    try:
        limit = int(body.get("Limit", default))
    except (TypeError, ValueError):
        limit = 0
    if not 1 <= limit <= most:
        raise ApiError(200, "InvalidParameterValue", f"The value of `Limit` must be 1-{most}.")
    return limit


def _refuse(text: str) -> ApiError:
    """A rules_tencentcloud refusal ("[TencentCloudSDKError] Code=X, Message=Y, ...") as the API's error."""
    found = re.search(r"Code=([^,]+), Message=(.*), RequestId=", text)
    return ApiError(200, found.group(1), found.group(2)) if found else ApiError(200, "ResourceInUse", text)


def _in_use(users: list[str], what: str) -> None:
    if users:
        raise ApiError(200, "ResourceInUse", f"The {what} is in use by {', '.join(users)}.")


def _tag_set(attrs: dict) -> list[dict]:
    return [{"Key": k, "Value": v} for k, v in sorted((attrs.get("tags") or {}).items())]


# ------------------------------------------------------------------------------------- Tag
def get_resources(body: dict, objects: Objects) -> dict:
    """Tag 2018-08-13 "GetResources": TagFilters [{TagKey, TagValue: [values]}] (every filter must
    match), MaxResults 1-200 (default 50), PaginationToken; answers {PaginationToken (empty on the
    last page), ResourceTagMappingList: [{Resource, Tags: [{TagKey, TagValue}]}]}."""
    filters = body.get("TagFilters") or []
    size = body.get("MaxResults", 50)
    if not isinstance(size, int) or not 1 <= size <= TAG_PAGE_MAX:
        raise ApiError(200, "InvalidParameterValue", f"The value of `MaxResults` must be 1-{TAG_PAGE_MAX}.")
    start, rows = int(body.get("PaginationToken") or 0), []
    for type_name, attrs in objects.tagged(QCS):
        tags = attrs.get("tags") or {}
        if all(f.get("TagKey") in tags and (not f.get("TagValue") or tags[f["TagKey"]] in f["TagValue"])
               for f in filters):
            service, prefix = QCS[type_name]
            region = objects.region_of(type_name, attrs["id"])
            rows.append({"Resource": f"qcs::{service}:{region}:uin/{UIN}:{prefix}/{attrs['id']}",
                         "Tags": [{"TagKey": k, "TagValue": v} for k, v in sorted(tags.items())]})
    more = start + size < len(rows)
    return {"PaginationToken": str(start + size) if more else "", "ResourceTagMappingList": rows[start:start + size]}


# ------------------------------------------------------------------------------------- CVM / CBS
def describe_instances(body: dict, objects: Objects) -> dict:
    """CVM "DescribeInstances" (API 213/15728): InstanceIds at most 100, Limit default 20, at most 100;
    answers {TotalCount, InstanceSet: [{InstanceId, InstanceName, InstanceState, InstanceType, Placement:
    {Zone}, VirtualPrivateCloud: {VpcId, SubnetId, AsVpcGateway}, PrivateIpAddresses, Tags: [{Key,
    Value}]}]}. Unknown ids are left out."""
    ids, limit = _ids(body, "InstanceIds"), _limit(body, 20, IDS_MAX)
    rows = [{"InstanceId": a["id"], "InstanceName": a.get("instance_name"),
             "InstanceState": a.get("instance_status") or "RUNNING", "InstanceType": a.get("instance_type"),
             "Placement": {"Zone": a.get("availability_zone")},
             "VirtualPrivateCloud": {"VpcId": a.get("vpc_id"), "SubnetId": a.get("subnet_id"), "AsVpcGateway": False},
             "PrivateIpAddresses": [a["private_ip"]] if a.get("private_ip") else [], "Tags": _tag_set(a)}
            for a in objects.of_type("tencentcloud_instance") if ids is None or a["id"] in ids]
    offset = int(body.get("Offset") or 0)
    return {"TotalCount": len(rows), "InstanceSet": rows[offset:offset + limit]}


def terminate_instances(body: dict, objects: Objects) -> dict:
    """CVM "TerminateInstances" (API 213/15723): InstanceIds at most 100; an unknown id:
    InvalidInstanceId.NotFound and nothing is terminated. Attached CBS disks are detached and stay
    (only disks bought with the instance go with it); EIPs are unbound."""
    ids = _ids(body, "InstanceIds", required=True)
    missing = [i for i in ids if objects.get("tencentcloud_instance", i) is None]
    if missing:
        raise ApiError(200, "InvalidInstanceId.NotFound", f"The instance {missing[0]} does not exist.")
    for rid in ids:
        for att in objects.where("tencentcloud_cbs_storage_attachment", "instance_id", rid):
            objects.remove("tencentcloud_cbs_storage_attachment", att)
        for assoc in objects.where("tencentcloud_eip_association", "instance_id", rid):
            objects.remove("tencentcloud_eip_association", assoc)
        objects.remove("tencentcloud_instance", rid)
    return {}


def terminate_disks(body: dict, objects: Objects) -> dict:
    """CBS "TerminateDisks" (API 362/16321): DiskIds at most 100; an unknown id: InvalidDiskId.NotFound;
    a disk still attached must be detached first (UnsupportedOperation.Attached is the stand-in's code
    for it)."""
    ids = _ids(body, "DiskIds", required=True)
    for disk in ids:
        if objects.get("tencentcloud_cbs_storage", disk) is None:
            raise ApiError(200, "InvalidDiskId.NotFound", f"The disk {disk} does not exist.")
        if objects.where("tencentcloud_cbs_storage_attachment", "storage_id", disk):
            raise ApiError(200, "UnsupportedOperation.Attached", f"The disk {disk} is attached to an instance.")
    for disk in ids:
        objects.remove("tencentcloud_cbs_storage", disk)
    return {}


def delete_key_pairs(body: dict, objects: Objects) -> dict:
    """CVM "DeleteKeyPairs" (API 213/15700): KeyIds at most 100; an unknown id: InvalidKeyPairId.NotFound."""
    ids = _ids(body, "KeyIds", required=True)
    missing = [k for k in ids if objects.get("tencentcloud_key_pair", k) is None]
    if missing:
        raise ApiError(200, "InvalidKeyPairId.NotFound", f"The key pair {missing[0]} does not exist.")
    for key in ids:
        objects.remove("tencentcloud_key_pair", key)
    return {}


# ------------------------------------------------------------------------------------- CFS
def _file_system(body: dict, objects: Objects) -> dict:
    fs = objects.get("tencentcloud_cfs_file_system", _required(body, "FileSystemId"))
    if fs is None:
        raise ApiError(200, "ResourceNotFound.FileSystemNotFound", "The file system does not exist.")
    return fs


def describe_mount_targets(body: dict, objects: Objects) -> dict:
    """CFS "DescribeMountTargets" (API 582/38154): FileSystemId; answers {MountTargets: [{FileSystemId,
    MountTargetId, IpAddress, FSID, LifeCycleState, NetworkInterface, VpcId, SubnetId}],
    NumberOfMountTargets}: the one mount target a file system is created with, in its VPC and subnet."""
    fs = _file_system(body, objects)
    row = {"FileSystemId": fs["id"], "MountTargetId": f"mount-{fs['id']}", "IpAddress": fs.get("mount_ip"),
           "FSID": fs.get("fs_id"), "LifeCycleState": "available", "NetworkInterface": "VPC",
           "VpcId": fs.get("vpc_id"), "SubnetId": fs.get("subnet_id")}
    return {"MountTargets": [row], "NumberOfMountTargets": 1}


def delete_cfs_file_system(body: dict, objects: Objects) -> dict:
    """CFS "DeleteCfsFileSystem" (API 582/38176): FileSystemId; an unknown one:
    ResourceNotFound.FileSystemNotFound."""
    objects.remove("tencentcloud_cfs_file_system", _file_system(body, objects)["id"])
    return {}


# ------------------------------------------------------------------------------------- VPC
def describe_subnets(body: dict, objects: Objects) -> dict:
    """VPC "DescribeSubnets" (API 215/15784): SubnetIds at most 100, Limit a String, default 20, at most
    100; answers {TotalCount, SubnetSet: [{SubnetId, VpcId, SubnetName, CidrBlock, Zone, RouteTableId,
    TagSet: [{Key, Value}]}]}."""
    if not isinstance(body.get("Limit", ""), str) or not isinstance(body.get("Offset", ""), str):
        raise ApiError(200, "InvalidParameter", "`Limit` and `Offset` are Strings.")
    ids, limit = _ids(body, "SubnetIds"), _limit(body, 20, IDS_MAX)
    rows = [{"SubnetId": a["id"], "VpcId": a.get("vpc_id"), "SubnetName": a.get("name"), "CidrBlock": a.get("cidr_block"),
             "Zone": a.get("availability_zone"), "RouteTableId": a.get("route_table_id"), "TagSet": _tag_set(a)}
            for a in objects.of_type("tencentcloud_subnet") if ids is None or a["id"] in ids]
    offset = int(body.get("Offset") or 0)
    return {"TotalCount": len(rows), "SubnetSet": rows[offset:offset + limit]}


def delete_subnet(body: dict, objects: Objects) -> dict:
    """VPC "DeleteSubnet" (API 215/15783): "make sure the subnet has no resources (CVM, CFS, ...)":
    ResourceInUse (rules_tencentcloud.delete_check: instances; here also CFS file systems); an unknown
    id: ResourceNotFound."""
    subnet = objects.get("tencentcloud_subnet", _required(body, "SubnetId"))
    if subnet is None:
        raise ApiError(200, "ResourceNotFound", "The subnet does not exist.")
    try:
        rules_tencentcloud.delete_check("tencentcloud_subnet", subnet, objects.view)
    except CloudError as err:
        raise _refuse(str(err)) from None
    _in_use(objects.users("tencentcloud_cfs_file_system", lambda a: a.get("subnet_id") == subnet["id"]), "subnet")
    objects.remove("tencentcloud_subnet", subnet["id"])
    return {}


def delete_vpc(body: dict, objects: Objects) -> dict:
    """VPC "DeleteVpc" (API 215/15775): "before deleting a VPC, make sure it holds no resources (CVMs,
    ... NAT gateways)": ResourceInUse while subnets, instances, CFS file systems or NAT gateways are in
    it; an unknown id: ResourceNotFound."""
    vpc = _required(body, "VpcId")
    if objects.get("tencentcloud_vpc", vpc) is None:
        raise ApiError(200, "ResourceNotFound", "The VPC does not exist.")
    for type_name in ("tencentcloud_subnet", "tencentcloud_instance", "tencentcloud_cfs_file_system",
                      "tencentcloud_nat_gateway"):
        _in_use(objects.users(type_name, lambda a: a.get("vpc_id") == vpc), "VPC")
    objects.remove("tencentcloud_vpc", vpc)
    return {}


def delete_security_group(body: dict, objects: Objects) -> dict:
    """VPC "DeleteSecurityGroup" (API 215/15822): a group instances still use: ResourceInUse; an unknown
    id: ResourceNotFound. Its rule set goes with it."""
    group = _required(body, "SecurityGroupId")
    if objects.get("tencentcloud_security_group", group) is None:
        raise ApiError(200, "ResourceNotFound", "The security group does not exist.")
    _in_use(objects.users("tencentcloud_instance", lambda a: group in (a.get("orderly_security_groups") or [])
                          or group in (a.get("security_groups") or [])), "security group")
    objects.remove("tencentcloud_security_group_rule_set", group)
    objects.remove("tencentcloud_security_group", group)
    return {}


# (service, version, action) -> (handler, the parameters the action takes)
HANDLERS = {
    ("tag", "2018-08-13", "GetResources"): (get_resources, {"TagFilters", "MaxResults", "PaginationToken",
                                                            "ResourceList", "Category"}),
    ("cvm", "2017-03-12", "DescribeInstances"): (describe_instances, {"InstanceIds", "Filters", "Offset", "Limit"}),
    ("cvm", "2017-03-12", "TerminateInstances"): (terminate_instances, {"InstanceIds", "ReleaseAddress"}),
    ("cvm", "2017-03-12", "DeleteKeyPairs"): (delete_key_pairs, {"KeyIds"}),
    ("cbs", "2017-03-12", "TerminateDisks"): (terminate_disks, {"DiskIds", "DeleteSnapshot"}),
    ("cfs", "2019-07-19", "DescribeMountTargets"): (describe_mount_targets, {"FileSystemId"}),
    ("cfs", "2019-07-19", "DeleteCfsFileSystem"): (delete_cfs_file_system, {"FileSystemId"}),
    ("vpc", "2017-03-12", "DescribeSubnets"): (describe_subnets, {"SubnetIds", "Filters", "Offset", "Limit"}),
    ("vpc", "2017-03-12", "DeleteSubnet"): (delete_subnet, {"SubnetId"}),
    ("vpc", "2017-03-12", "DeleteVpc"): (delete_vpc, {"VpcId"}),
    ("vpc", "2017-03-12", "DeleteSecurityGroup"): (delete_security_group, {"SecurityGroupId"}),
    ("cvm", "2017-03-12", "DescribeZoneInstanceConfigInfos"): (api_offers.describe_zone_instance_config_infos,
                                                             {"Filters"}),
}
