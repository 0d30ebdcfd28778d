"""Huawei Cloud's REST APIs that trainkit/clouds/huaweicloud_sweep.py calls, answered from the store.

Requests: JSON over REST, signed by huaweicloudsdkcore's Signer (`Authorization: SDK-HMAC-SHA256
Access=<AK>, SignedHeaders=..., Signature=...` with X-Sdk-Date; Huawei API Gateway "AK/SK signing").
The gateway's own errors are {error_code, error_msg, request_id} (API Gateway "Error Codes"):
APIGW.0301 401 "Incorrect IAM authentication information", APIGW.0101 404 "The API does not exist
or has not been published in the environment", APIGW.0308 429 "The throttling threshold has been
reached"; each service's errors keep its own shape (ECS/EVS {error: {code, message}}, VPC v1 {code,
message}, SFS Turbo {errCode, errMsg}, NAT {error_code, error_msg}). A path names the project
(`/v1/{project_id}/...`), and the project a region: `keys["huaweicloud-project"]` maps them; a
project that is not there is refused as the gateway refuses a token for another project (APIGW.0301).

APIs: TMS v2.0 "ListResource" (POST /v2.0/resources/filter); ECS "Querying Details About an ECS",
"Deleting ECSs in a Batch", "Querying Task Execution Status"; VPC "Querying Subnet Details",
"Deleting a Subnet", "Deleting a VPC", "Deleting a Security Group", "Releasing an EIP"; EVS
"Deleting an EVS Disk"; SFS Turbo "Querying Details About a File System", "Deleting a File System";
NAT "Querying Details About a Specified NAT Gateway", "Deleting a NAT Gateway"; KPS "Deleting an SSH
Key Pair"; the placement preflight's ECS "Querying the Sales Policies of Flavors" (api_offers.py).
Error codes the reference pages do not name are the stand-in's, marked "(stand-in code)".
"""

from __future__ import annotations

import json
import re
import uuid

from . import api_offers, rules_huaweicloud
from .api import ApiError, Objects, Request, request_id
from .cloud import CloudError

CONTENT_TYPE = "application/json"  # the services' JSON answers
THROTTLED = ApiError(429, "APIGW.0308", "The throttling threshold has been reached: policy user over ratelimit,"
                                        "limit:XX,time:1 second")
# TMS resource types ("Querying Resources by Tag": resource_types, e.g. ecs:cloudservers) per terraform type
TMS = {"huaweicloud_compute_instance": "ecs:cloudservers", "huaweicloud_evs_volume": "evs:volumes",
       "huaweicloud_vpc": "vpc:vpcs", "huaweicloud_vpc_subnet": "vpc:subnets",
       "huaweicloud_networking_secgroup": "vpc:securityGroups", "huaweicloud_vpc_eip": "vpc:publicips",
       "huaweicloud_nat_gateway": "nat:natGateways", "huaweicloud_sfs_turbo": "sfs-turbo:sfs-turbos",
       "huaweicloud_kps_keypair": "kps:keypairs"}
TMS_LIMIT_MAX = 200     # ListResource limit: 1-200 (default 200)
SERVERS_MAX = 1000      # "Deleting ECSs in a Batch": at most 1000 servers a request


class Reply(Exception):
    """A service error in its own shape: (HTTP status, body)."""

    def __init__(self, status: int, body: dict):
        super().__init__(json.dumps(body))
        self.status, self.body = status, body


def claims(req: Request) -> bool:
    return req.headers.get("authorization", "").startswith("SDK-") or "x-sdk-date" in req.headers


def authenticate(req: Request, keys: dict) -> None:
    """The AK of the signature, and the project of the path (sets req.region)."""
    found = re.match(r"SDK-HMAC-SHA256 Access=([^,]+), SignedHeaders=[a-z0-9;-]+, Signature=[0-9a-f]{64}$",
                     req.headers.get("authorization", ""))
    if not found or not re.fullmatch(r"\d{8}T\d{6}Z", req.headers.get("x-sdk-date", "")):
        raise ApiError(401, "APIGW.0301", "Incorrect IAM authentication information: the request is not signed")
    if found.group(1) != keys.get("huaweicloud"):
        raise ApiError(401, "APIGW.0301", "Incorrect IAM authentication information: ak " + found.group(1) + " not exist")
    projects = keys.get("huaweicloud-project") or {}
    project = req.json().get("project_id") if req.path == "/v2.0/resources/filter" else \
        (re.match(r"/v\d(?:\.\d)?/([^/]+)/", req.path) or [None, None])[1]
    if project not in projects:
        raise ApiError(401, "APIGW.0301", f"Incorrect IAM authentication information: project {project} "
                                          "does not match the credential")
    req.region = projects[project]


def action(req: Request) -> str:
    return f"{req.method} {req.path}"


def error(req: Request, err: ApiError) -> tuple[int, dict, dict]:
    return err.status, {"error_code": err.code, "error_msg": err.message, "request_id": request_id()}, {}


def handle(req: Request, data: dict) -> tuple[int, dict | None]:
    objects = Objects(data, req.region)
    for method, pattern, handler in ROUTES:
        found = re.fullmatch(pattern, req.path)
        if found and method == req.method:
            try:
                return handler(req, objects, *found.groups())
            except Reply as reply:
                return reply.status, reply.body
    raise ApiError(404, "APIGW.0101", "The API does not exist or has not been published in the environment")


# ------------------------------------------------------------------------------------- TMS
def list_resources(req: Request, objects: Objects) -> tuple[int, dict]:
    """TMS v2.0 "Querying Resources by Tag" (ListResource): {project_id, resource_types, tags: [{key,
    values}], limit 1-200, offset}; answers {resources: [{resource_id, resource_name, resource_type,
    project_id, tags: [{key, value}]}], total_count}. An empty `values` matches any value."""
    body = req.json()
    limit, offset = body.get("limit", TMS_LIMIT_MAX), body.get("offset", 0)
    if not body.get("resource_types") or not isinstance(limit, int) or not 1 <= limit <= TMS_LIMIT_MAX:
        raise Reply(400, {"error_code": "TMS.0002", "error_msg": "Bad request: resource_types and a limit of 1-200"})
    rows = []
    for type_name, attrs in objects.tagged(TMS):
        tags = attrs.get("tags") or {}
        if TMS[type_name] in body["resource_types"] and all(
                t["key"] in tags and (not t.get("values") or tags[t["key"]] in t["values"]) for t in body.get("tags") or []):
            rows.append({"resource_id": attrs["id"], "resource_name": attrs.get("name"), "resource_type": TMS[type_name],
                         "project_id": body["project_id"], "resource_detail": {},
                         "tags": [{"key": k, "value": v} for k, v in sorted(tags.items())]})
    return 200, {"resources": rows[offset:offset + limit], "total_count": len(rows)}


# ------------------------------------------------------------------------------------- ECS
def _ecs_missing(what: str, rid: str) -> Reply:
    # ECS "Error Codes": Ecs.0114 "The ECS does not exist" (HTTP 404)
    return Reply(404, {"error": {"code": "Ecs.0114", "message": f"{what} [{rid}] could not be found."}})


def show_server(req: Request, objects: Objects, server: str) -> tuple[int, dict]:
    """ECS ShowServer (GET /v1/{project_id}/cloudservers/{server_id}): {server: {id, name, status,
    OS-EXT-AZ:availability_zone, flavor: {id}, metadata: {vpc_id}, addresses: {vpc_id: [{addr}]}}}."""
    attrs = objects.get("huaweicloud_compute_instance", server)
    if attrs is None:
        raise _ecs_missing("Instance", server)
    subnet = objects.get("huaweicloud_vpc_subnet", ((attrs.get("network") or [{}])[0]).get("uuid")) or {}
    vpc = subnet.get("vpc_id")
    return 200, {"server": {"id": server, "name": attrs.get("name"), "status": attrs.get("status") or "ACTIVE",
                            "OS-EXT-AZ:availability_zone": attrs.get("availability_zone"),
                            "flavor": {"id": attrs.get("flavor_id") or attrs.get("flavor_name")},
                            "metadata": {"vpc_id": vpc},
                            "addresses": {vpc: [{"addr": attrs.get("access_ip_v4"), "OS-EXT-IPS:type": "fixed"}]}}}


def delete_servers(req: Request, objects: Objects) -> tuple[int, dict]:
    """ECS "Deleting ECSs in a Batch" (POST /v1/{project_id}/cloudservers/delete): {servers: [{id}]
    (1-1000), delete_publicip, delete_volume}; answers {job_id}, the job ends SUCCESS. delete_volume
    true deletes the servers' data disks too; their attachments go either way."""
    body = req.json()
    ids = [s.get("id") for s in body.get("servers") or []]
    if not 1 <= len(ids) <= SERVERS_MAX:
        raise Reply(400, {"error": {"code": "Ecs.0005", "message": "Invalid parameter: servers"}})
    for rid in ids:
        if objects.get("huaweicloud_compute_instance", rid) is None:
            raise _ecs_missing("Instance", rid)
    for rid in ids:
        for att in [a for a in objects.of_type("huaweicloud_compute_volume_attach") if a.get("instance_id") == rid]:
            objects.remove("huaweicloud_compute_volume_attach", att["id"])
            if body.get("delete_volume"):
                objects.remove("huaweicloud_evs_volume", att.get("volume_id"))
        objects.remove("huaweicloud_compute_instance", rid)
    job = uuid.uuid4().hex
    objects.data.setdefault("api_jobs", {})[job] = {"status": "SUCCESS", "job_type": "deleteServer",
                                                    "entities": {"sub_jobs_total": len(ids)}}
    return 200, {"job_id": job}


def show_job(req: Request, objects: Objects, job: str) -> tuple[int, dict]:
    """ECS "Querying Task Execution Status" (GET /v1/{project_id}/jobs/{job_id}): {job_id, job_type,
    status (SUCCESS, RUNNING, FAIL, INIT), entities}."""
    found = objects.data.get("api_jobs", {}).get(job)
    if found is None:
        raise Reply(404, {"error": {"code": "Ecs.0100", "message": f"job {job} not found (stand-in code)"}})
    return 200, {"job_id": job, **found}


# ------------------------------------------------------------------------------------- VPC
def _subnet(objects: Objects, subnet: str) -> dict:
    attrs = objects.get("huaweicloud_vpc_subnet", subnet)
    if attrs is None:  # VPC "Error Codes": VPC.0202 "The subnet does not exist" (404)
        raise Reply(404, {"code": "VPC.0202", "message": f"Query resource by id {subnet} fail.the subnet could "
                                                          "not be found."})
    return attrs


def show_subnet(req: Request, objects: Objects, subnet: str) -> tuple[int, dict]:
    """VPC ShowSubnet (GET /v1/{project_id}/subnets/{subnet_id}): {subnet: {id, name, cidr, gateway_ip,
    vpc_id, availability_zone, status}}."""
    a = _subnet(objects, subnet)
    return 200, {"subnet": {"id": subnet, "name": a.get("name"), "cidr": a.get("cidr"), "gateway_ip": a.get("gateway_ip"),
                            "vpc_id": a.get("vpc_id"), "availability_zone": a.get("availability_zone"),
                            "status": "ACTIVE"}}


def _in_use(users: list[str], what: str) -> None:
    if users:
        raise Reply(409, {"code": "VPC.0213", "message": f"The {what} is still in use by {', '.join(users)} "
                                                         "(stand-in code)"})


def delete_subnet(req: Request, objects: Objects, vpc: str, subnet: str) -> tuple[int, None]:
    """VPC "Deleting a Subnet" (DELETE /v1/{project_id}/vpcs/{vpc_id}/subnets/{subnet_id}), 204; refused
    while ports are in it (rules_huaweicloud.delete_check: servers; here also SFS Turbo and NAT gateways)."""
    attrs = _subnet(objects, subnet)
    if attrs.get("vpc_id") != vpc:
        raise Reply(404, {"code": "VPC.0202", "message": f"subnet {subnet} is not in VPC {vpc}"})
    try:
        rules_huaweicloud.delete_check("huaweicloud_vpc_subnet", attrs, objects.view)
    except CloudError as err:
        body = json.loads(str(err).split("error message: ", 1)[1])["error"]
        raise Reply(409, {"code": body["code"], "message": body["message"]}) from None
    _in_use(objects.users("huaweicloud_sfs_turbo", lambda a: a.get("subnet_id") == subnet)
            + objects.users("huaweicloud_nat_gateway", lambda a: a.get("subnet_id") == subnet), "subnet")
    objects.remove("huaweicloud_vpc_subnet", subnet)
    return 204, None


def delete_vpc(req: Request, objects: Objects, vpc: str) -> tuple[int, None]:
    """VPC "Deleting a VPC" (DELETE /v1/{project_id}/vpcs/{vpc_id}), 204; a VPC with subnets, NAT
    gateways or SFS Turbo file systems in it is refused."""
    if objects.get("huaweicloud_vpc", vpc) is None:
        raise Reply(404, {"code": "VPC.0012", "message": f"vpc {vpc} could not be found (stand-in code)"})
    for type_name in ("huaweicloud_vpc_subnet", "huaweicloud_nat_gateway", "huaweicloud_sfs_turbo"):
        _in_use(objects.users(type_name, lambda a: a.get("vpc_id") == vpc), "VPC")
    objects.remove("huaweicloud_vpc", vpc)
    return 204, None


def _delete_simple(type_name: str, users=None):
    """A DELETE that answers 204, 404 for an unknown id, 409 while `users(objects, id)` names any."""

    def delete(req: Request, objects: Objects, rid: str) -> tuple[int, dict | None]:
        if objects.get(type_name, rid) is None:
            raise Reply(404, {"code": "Common.0404", "message": f"{rid} could not be found (stand-in code)"})
        if users:
            _in_use(users(objects, rid), type_name)
        objects.remove(type_name, rid)
        return (202, {"job_id": uuid.uuid4().hex}) if type_name == "huaweicloud_evs_volume" else (204, None)

    return delete


def _volume_users(objects: Objects, rid: str) -> list[str]:
    # EVS "Deleting an EVS Disk": "the disk must be in the available, error, ... state": an attached one
    # (in-use) is refused
    return objects.users("huaweicloud_compute_volume_attach", lambda a: a.get("volume_id") == rid)


def _group_users(objects: Objects, rid: str) -> list[str]:
    return (objects.users("huaweicloud_compute_instance", lambda a: rid in (a.get("security_group_ids") or []))
            + objects.users("huaweicloud_sfs_turbo", lambda a: a.get("security_group_id") == rid))


def _eip_users(objects: Objects, rid: str) -> list[str]:
    return objects.users("huaweicloud_nat_snat_rule", lambda a: a.get("floating_ip_id") == rid)


def _nat_users(objects: Objects, rid: str) -> list[str]:
    return objects.users("huaweicloud_nat_snat_rule", lambda a: a.get("nat_gateway_id") == rid)


# ------------------------------------------------------------------------------------- SFS Turbo / NAT
def show_share(req: Request, objects: Objects, share: str) -> tuple[int, dict]:
    """SFS Turbo ShowShare (GET /v1/{project_id}/sfs-turbo/shares/{share_id}): {id, name, vpc_id,
    subnet_id, security_group_id, export_location, status}; unknown: 404 SFS.TURBO.0002 (stand-in code)."""
    a = objects.get("huaweicloud_sfs_turbo", share)
    if a is None:
        raise Reply(404, {"errCode": "SFS.TURBO.0002", "errMsg": "cluster not found"})
    return 200, {"id": share, "name": a.get("name"), "vpc_id": a.get("vpc_id"), "subnet_id": a.get("subnet_id"),
                 "security_group_id": a.get("security_group_id"), "export_location": a.get("export_location"),
                 "status": "200"}


def show_nat(req: Request, objects: Objects, nat: str) -> tuple[int, dict]:
    """NAT v2 "Querying Details About a Specified NAT Gateway": {nat_gateway: {id, name, router_id (the
    VPC), internal_network_id (the subnet), status}}."""
    a = objects.get("huaweicloud_nat_gateway", nat)
    if a is None:
        raise Reply(404, {"error_code": "NAT.0100", "error_msg": f"nat gateway {nat} not found (stand-in code)"})
    return 200, {"nat_gateway": {"id": nat, "name": a.get("name"), "router_id": a.get("vpc_id"),
                                 "internal_network_id": a.get("subnet_id"), "status": "ACTIVE"}}


def _p(version: str, rest: str) -> str:
    """A path under /v<version>/{project_id}/."""
    return rf"/v{version}/[^/]+/{rest}"


ROUTES = [
    ("POST", r"/v2\.0/resources/filter", list_resources),
    ("GET", _p("1", r"cloudservers/flavor-sell-policies"), api_offers.list_flavor_sell_policies),  # before {server_id}
    ("GET", _p("1", r"cloudservers/([^/]+)"), show_server),
    ("POST", _p("1", r"cloudservers/delete"), delete_servers),
    ("GET", _p("1", r"jobs/([^/]+)"), show_job),
    ("GET", _p("1", r"subnets/([^/]+)"), show_subnet),
    ("DELETE", _p("1", r"vpcs/([^/]+)/subnets/([^/]+)"), delete_subnet),
    ("DELETE", _p("1", r"vpcs/([^/]+)"), delete_vpc),
    ("DELETE", _p("1", r"security-groups/([^/]+)"), _delete_simple("huaweicloud_networking_secgroup", _group_users)),
    ("DELETE", _p("1", r"publicips/([^/]+)"), _delete_simple("huaweicloud_vpc_eip", _eip_users)),
    ("DELETE", _p("2", r"cloudvolumes/([^/]+)"), _delete_simple("huaweicloud_evs_volume", _volume_users)),
    ("GET", _p("1", r"sfs-turbo/shares/([^/]+)"), show_share),
    ("DELETE", _p("1", r"sfs-turbo/shares/([^/]+)"), _delete_simple("huaweicloud_sfs_turbo")),
    ("GET", _p("2", r"nat_gateways/([^/]+)"), show_nat),
    ("DELETE", _p("2", r"nat_gateways/([^/]+)"), _delete_simple("huaweicloud_nat_gateway", _nat_users)),
    ("DELETE", _p("3", r"keypairs/([^/]+)"), _delete_simple("huaweicloud_kps_keypair")),
]
