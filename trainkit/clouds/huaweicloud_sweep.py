"""Huawei Cloud: find and delete what still carries a cluster's tag after `terraform destroy`.

`find` asks the Tag Management Service (TMS API v2.0 "ListResource", POST /v2.0/resources/filter
with `tags=[{key, values}]` and the resource types trainkit creates). `delete` calls each
service's REST delete API, signed with the official SDK core's AK/SK signer (huaweicloudsdkcore,
already a dependency of the BSS price adapter; no per-service SDK is needed): ECS servers (batch
delete with their volumes, then waits for the job), NAT gateways, SFS Turbo file systems, EVS
disks, EIPs, security groups, subnets, VPCs, KPS key pairs, in that order. A type with no delete
call here is reported. `in_network` tells which found servers, NAT gateways, SFS Turbo file systems
and subnets sit in a VPC the Terraform state holds (each service's "query details" API).
Credentials: HW_ACCESS_KEY / HW_SECRET_KEY, HW_PROJECT_ID (the region's project id; HW_DOMAIN_ID is
sent to the global TMS when set). `cluster.spec.endpoints[<service>]`
(e.g. `tms`, `ecs`, `sfs_turbo`), when present, overrides a service's endpoint.
"""

from __future__ import annotations

import functools
import json
import os
import time
from typing import Any

from trainkit.clouds.sweep_common import in_order, in_vpcs, retry_throttled
from trainkit.errors import InputError
from trainkit.util import progress

TAG = "trainkit-cluster"
# TMS resource type -> the type trainkit reports, in dependency (delete) order
TYPES = {"ecs:cloudservers": "instance", "nat:natGateways": "nat-gateway", "sfs-turbo:sfs-turbos": "file-system",
         "evs:volumes": "disk", "vpc:publicips": "eip", "vpc:securityGroups": "security-group",
         "vpc:subnets": "subnet", "vpc:vpcs": "vpc", "kps:keypairs": "key-pair"}
ORDER = tuple(TYPES.values())
# type -> (service, method, path) for one resource; {p} is the project id, {id} the resource
DELETE = {"nat-gateway": ("nat", "DELETE", "/v2/{p}/nat_gateways/{id}"),
          "file-system": ("sfs-turbo", "DELETE", "/v1/{p}/sfs-turbo/shares/{id}"),
          "disk": ("evs", "DELETE", "/v2/{p}/cloudvolumes/{id}"),
          "eip": ("vpc", "DELETE", "/v1/{p}/publicips/{id}"),
          "security-group": ("vpc", "DELETE", "/v1/{p}/security-groups/{id}"),
          "vpc": ("vpc", "DELETE", "/v1/{p}/vpcs/{id}"),
          "key-pair": ("kps", "DELETE", "/v3/{p}/keypairs/{id}")}
# What sits in one VPC: type -> (service, GET path of its "query details" API, the keys down to the VPC
# id in the answer). A subnet holds its servers, NAT gateway and SFS Turbo file system, and the VPC its
# subnets: each must go before what holds it. Security groups are left out: Huawei's are not in a VPC
# (the create API's vpc_id "is only used as a prompt and does not restrict that the security group must
# be associated with the VPC", VPC API "Creating a Security Group",
# https://support.huaweicloud.com/intl/en-us/api-vpc/vpc_sg01_0001.html), so no VPC's delete waits on
# one. Disks, EIPs and key pairs are in no VPC.
IN_VPC = {
    # ECS "Querying Details About an ECS" (ShowServer, https://support.huaweicloud.com/api-ecs/ecs_02_0104.html):
    # {server: {metadata: {vpc_id}}}, a metadata field the system adds: the VPC the server belongs to
    "instance": ("ecs", "/v1/{p}/cloudservers/{id}", ("server", "metadata", "vpc_id")),
    # NAT "Querying Details About a Specified NAT Gateway" (API v2,
    # https://support.huaweicloud.com/intl/es-us/api-natgateway/nat_apiv2_0007.html): {nat_gateway: {router_id}},
    # router_id "Specifies the VPC ID"
    "nat-gateway": ("nat", "/v2/{p}/nat_gateways/{id}", ("nat_gateway", "router_id")),
    # SFS Turbo "Querying Details About a File System" (ShowShare,
    # https://support.huaweicloud.com/intl/en-us/api-sfsturbo/ShowShare.html): top-level vpc_id
    "file-system": ("sfs-turbo", "/v1/{p}/sfs-turbo/shares/{id}", ("vpc_id",)),
    # VPC "Querying Subnet Details" (ShowSubnet, https://support.huaweicloud.com/api-vpc/vpc_subnet01_0002.md):
    # {subnet: {vpc_id}}
    "subnet": ("vpc", "/v1/{p}/subnets/{id}", ("subnet", "vpc_id")),
}
WAIT_S, POLL_S = 600, 5  # ECS batch delete is an async job (ECS API doc "Deleting ECSs in a Batch")


# API Gateway "Error Codes": APIGW.0308 "The throttling threshold has been reached", HTTP 429: retried
THROTTLED = 429


class _Throttled(Exception):
    def __init__(self, resp):
        super().__init__(f"HTTP {resp.status_code}")
        self.resp = resp


class _Api:
    """Signed JSON calls to one cluster's Huawei services (credentials from the environment)."""

    def __init__(self, cluster):
        env = {n: os.environ.get(n) for n in ("HW_ACCESS_KEY", "HW_SECRET_KEY", "HW_PROJECT_ID")}
        missing = [n for n, v in env.items() if not v]
        if missing:
            raise InputError(f"the Huawei leftover check needs {', '.join(missing)} in the environment",
                             fix="export the access key and the region's project id")
        self.project, self.region = env["HW_PROJECT_ID"], cluster.spec.region
        self.endpoints = getattr(cluster.spec, "endpoints", None) or {}
        self._keys = (env["HW_ACCESS_KEY"], env["HW_SECRET_KEY"])

    def call(self, service: str, method: str, path: str, body: dict | None = None) -> dict[str, Any]:
        import requests  # with the Huawei Cloud SDK: imported only when its API is called
        from huaweicloudsdkcore.auth.credentials import BasicCredentials
        from huaweicloudsdkcore.sdk_request import SdkRequest
        from huaweicloudsdkcore.signer.signer import Signer

        default = "tms.myhuaweicloud.com" if service == "tms" else f"{service}.{self.region}.myhuaweicloud.com"
        # the spec's key is the service with "_" for "-" (sfs_turbo): endpoint keys are identifiers
        scheme, _, host = (self.endpoints.get(service.replace("-", "_")) or "").rpartition("://")
        headers = {"Content-Type": "application/json"}
        if service == "tms" and os.environ.get("HW_DOMAIN_ID"):
            headers["X-Domain-Id"] = os.environ["HW_DOMAIN_ID"]
        req = SdkRequest(method=method, schema=scheme or "https", host=host or default, resource_path=path,
                         query_params=[], header_params=headers,
                         body=json.dumps(body) if body is not None else "")
        def send():
            Signer(BasicCredentials(*self._keys, self.project)).sign(req)  # a fresh X-Sdk-Date each time
            resp = requests.request(method, f"{req.schema}://{req.host}{req.uri}", headers=req.header_params,
                                    data=req.body or None, timeout=60)
            if resp.status_code == THROTTLED:
                raise _Throttled(resp)
            return resp

        try:
            resp = retry_throttled(send, lambda err: isinstance(err, _Throttled))
        except _Throttled as err:
            resp = err.resp
        if method == "DELETE" and resp.status_code == 404:
            return {}  # gone already (e.g. a volume deleted with its server)
        if resp.status_code >= 400:
            raise RuntimeError(f"Huawei {service} {method} {path}: HTTP {resp.status_code} {resp.text[:300]}")
        return resp.json() if resp.content else {}


def find(cluster) -> list[dict[str, Any]]:
    """Resources tagged trainkit-cluster=<name> that still exist: [{type, id, name, resource_type}]."""
    api, found, offset = _Api(cluster), {}, 0
    while True:
        page = api.call("tms", "POST", "/v2.0/resources/filter",
                        {"project_id": api.project, "resource_types": list(TYPES), "limit": 200, "offset": offset,
                         "tags": [{"key": TAG, "values": [cluster.name]}]})
        rows = page.get("resources") or []
        for row in rows:
            kind = TYPES.get(row["resource_type"], row["resource_type"])
            found[(kind, row["resource_id"])] = {"type": kind, "id": row["resource_id"],
                                                 "name": row.get("resource_name"),
                                                 "resource_type": row["resource_type"]}
        offset += len(rows)
        if not rows or offset >= int(page.get("total_count") or 0):
            break
    return in_order(found, ORDER)


def in_network(cluster, found: list[dict[str, Any]], state_values: dict) -> list[dict[str, Any]]:
    """The resources of `found` (from `find`) that sit in a VPC the state holds (`terraform show -json`
    values): servers, NAT gateways, SFS Turbo file systems, subnets. Those hold up the state's subnet and
    VPC deletes; nothing outside those VPCs is returned. Raises on a failed call."""
    return in_vpcs(cluster, found, state_values, "huaweicloud_vpc",
                   {kind: functools.partial(_vpc_of_each, kind) for kind in IN_VPC})


def _vpc_of_each(kind: str, cluster, ids: list[str]) -> dict[str, set]:
    """An `in_vpcs` ask: each id's VPC from its "query details" API (IN_VPC: one GET an id)."""
    api, (service, path, keys) = _Api(cluster), IN_VPC[kind]
    out = {}
    for rid in ids:
        value: Any = api.call(service, "GET", path.format(p=api.project, id=rid))
        for key in keys:
            value = (value or {}).get(key)
        out[rid] = {value}
    return out


def delete(cluster, found: list[dict[str, Any]]) -> None:
    """Delete `found` in dependency order; types with no delete call are reported, not skipped.

    Raises on the first failed call."""
    api = _Api(cluster)
    for res in found:
        if res["type"] not in ORDER:
            progress.info(f"cannot delete {res['resource_type']} {res['id']} here: delete it in the console")
    servers = [r["id"] for r in found if r["type"] == "instance"]
    if servers:
        job = api.call("ecs", "POST", f"/v1/{api.project}/cloudservers/delete",
                       {"servers": [{"id": s} for s in servers], "delete_publicip": False, "delete_volume": True})
        _wait_job(api, job["job_id"])
    for kind in ORDER[1:]:
        for res in (r for r in found if r["type"] == kind):
            if kind == "subnet":  # the delete path names the subnet's VPC
                vpc = api.call("vpc", "GET", f"/v1/{api.project}/subnets/{res['id']}")["subnet"]["vpc_id"]
                api.call("vpc", "DELETE", f"/v1/{api.project}/vpcs/{vpc}/subnets/{res['id']}")
                continue
            service, method, path = DELETE[kind]
            rid = res.get("name") if kind == "key-pair" and res.get("name") else res["id"]
            api.call(service, method, path.format(p=api.project, id=rid))


def _wait_job(api: _Api, job_id: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while (status := api.call("ecs", "GET", f"/v1/{api.project}/jobs/{job_id}").get("status")) != "SUCCESS":
        if status == "FAIL" or time.monotonic() > deadline:
            raise RuntimeError(f"ECS delete job {job_id} ended {status or 'unfinished'} after {WAIT_S}s at most")
        time.sleep(POLL_S)
