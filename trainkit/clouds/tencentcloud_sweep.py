"""Tencent Cloud: find and delete what still carries a cluster's tag after `terraform destroy`.

`find` asks the Tag API (GetResources, version 2018-08-13, with TagFilters; Tencent Tag API doc
"GetResources", resource names `qcs::<service>:<region>:uin/<uin>:<prefix>/<id>`). `delete` calls
each product's delete action through the official SDK's CommonClient (tencentcloud-sdk-python-
common, already a dependency of the CVM price adapter): instances (CVM TerminateInstances, then
waits until DescribeInstances no longer lists them), CBS disks, CFS file systems, security
groups, subnets, VPCs, key pairs, in that order. A type with no delete call here is reported.
Credentials: TENCENTCLOUD_SECRET_ID / TENCENTCLOUD_SECRET_KEY. `cluster.spec.endpoints[<service>]`
(e.g. `tag`, `cvm`), when present, overrides a service's endpoint.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from trainkit.clouds.sweep_common import gone_ok, in_order, report_undeletable, wait_gone
from trainkit.util import progress

TAG = "trainkit-cluster"
# resource prefix in the six-segment resource name -> the type trainkit reports
TYPES = {"instance": "instance", "volume": "disk", "disk": "disk", "filesystem": "file-system",
         "sg": "security-group", "securitygroup": "security-group", "subnet": "subnet", "vpc": "vpc",
         "keypair": "key-pair"}
# type -> (service, API version, action, the request for a list of ids), in dependency order
DELETE = {
    "instance": ("cvm", "2017-03-12", "TerminateInstances", lambda ids: [{"InstanceIds": ids}]),
    "disk": ("cbs", "2017-03-12", "TerminateDisks", lambda ids: [{"DiskIds": ids}]),
    "file-system": ("cfs", "2019-07-19", "DeleteCfsFileSystem", lambda ids: [{"FileSystemId": i} for i in ids]),
    "security-group": ("vpc", "2017-03-12", "DeleteSecurityGroup",
                       lambda ids: [{"SecurityGroupId": i} for i in ids]),
    "subnet": ("vpc", "2017-03-12", "DeleteSubnet", lambda ids: [{"SubnetId": i} for i in ids]),
    "vpc": ("vpc", "2017-03-12", "DeleteVpc", lambda ids: [{"VpcId": i} for i in ids]),
    "key-pair": ("cvm", "2017-03-12", "DeleteKeyPairs", lambda ids: [{"KeyIds": ids}]),
}
ORDER = tuple(DELETE)
WAIT_S = 600  # instance termination: minutes at most (CVM API doc "TerminateInstances")


def _client(cluster, service: str, version: str):
    from tencentcloud.common import credential  # the Tencent Cloud SDK: imported only when its API is called
    from tencentcloud.common.common_client import CommonClient
    from tencentcloud.common.profile.client_profile import ClientProfile
    from tencentcloud.common.profile.http_profile import HttpProfile

    cred = credential.Credential(os.environ.get("TENCENTCLOUD_SECRET_ID", ""),
                                 os.environ.get("TENCENTCLOUD_SECRET_KEY", ""))
    endpoint = (getattr(cluster.spec, "endpoints", None) or {}).get(service)
    http = HttpProfile(endpoint=endpoint.split("://", 1)[-1], protocol=endpoint.split("://")[0]) \
        if endpoint else HttpProfile()
    return CommonClient(service, version, cred, cluster.spec.region, ClientProfile(httpProfile=http))


def find(cluster) -> list[dict[str, Any]]:
    """Resources tagged trainkit-cluster=<name> that still exist: [{type, id, resource}], in ORDER."""
    tag = _client(cluster, "tag", "2018-08-13")
    found, token = {}, ""
    while True:
        page = tag.call_json("GetResources", {"TagFilters": [{"TagKey": TAG, "TagValue": [cluster.name]}],
                                              "MaxResults": 200, **({"PaginationToken": token} if token else {})}
                             )["Response"]
        for item in page.get("ResourceTagMappingList") or []:
            prefix, _, rid = item["Resource"].split(":", 5)[-1].partition("/")
            kind = TYPES.get(prefix, prefix)
            found[(kind, rid)] = {"type": kind, "id": rid, "resource": item["Resource"]}
        token = page.get("PaginationToken") or ""
        if not token:
            break
    return in_order(found, ORDER)


def delete(cluster, found: list[dict[str, Any]]) -> None:
    """Delete `found` in dependency order; types with no delete call are reported, not skipped.

    Raises the SDK's error on the first failed call."""
    report_undeletable(found, DELETE, "resource", progress.info)
    for kind, (service, version, action, requests) in DELETE.items():
        ids = [r["id"] for r in found if r["type"] == kind]
        if not ids:
            continue
        client = _client(cluster, service, version)
        for params in requests(ids):
            gone_ok(functools.partial(client.call_json, action, params))
        if kind == "instance":
            _wait_gone(client, ids)


def _wait_gone(cvm, ids: list[str]) -> None:
    def listed() -> bool:
        return bool(cvm.call_json("DescribeInstances", {"InstanceIds": ids})["Response"].get("InstanceSet"))

    wait_gone(listed, ids, "TerminateInstances", WAIT_S)
