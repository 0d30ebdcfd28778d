"""Tencent Cloud: find and delete what still carries a cluster's tag after `terraform destroy`.

`find` asks the Tag API (GetResources, version 2018-08-13, with TagFilters; Tencent Tag API doc
"GetResources", resource names `qcs::<service>:<region>:uin/<uin>:<prefix>/<id>`). `delete` calls
each product's delete action through the official SDK's CommonClient (tencentcloud-sdk-python-
common, already a dependency of the CVM price adapter): instances (CVM TerminateInstances, then
waits until DescribeInstances no longer lists them), CBS disks, CFS file systems, security
groups, subnets, VPCs, key pairs, in that order. A type with no delete call here is reported.
`in_network` tells which found instances, subnets and CFS file systems sit in a VPC the Terraform
state holds (CVM DescribeInstances, VPC DescribeSubnets, CFS DescribeMountTargets).
Credentials: TENCENTCLOUD_SECRET_ID / TENCENTCLOUD_SECRET_KEY. `cluster.spec.endpoints[<service>]`
(e.g. `tag`, `cvm`), when present, overrides a service's endpoint.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from trainkit.clouds.sweep_common import (
    batches,
    gone_ok,
    in_order,
    in_vpcs,
    report_undeletable,
    retry_throttled,
    wait_gone,
)
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
    return _Retrying(CommonClient(service, version, cred, cluster.spec.region, ClientProfile(httpProfile=http)))


class _Retrying:
    """A CommonClient whose call_json retries throttling (RequestLimitExceeded and its sub-codes, API 3.0
    "Common Error Codes"; sweep_common.retry_throttled). Not the SDK's StandardRetryer: in
    tencentcloud-sdk-python-common 3.1.195 it keeps the first attempt's error after a later attempt
    succeeds, so a call throttled once is retried to the last attempt and then raises that error."""

    def __init__(self, client):
        self._client = client

    def call_json(self, action: str, params: dict) -> dict:
        return retry_throttled(lambda: self._client.call_json(action, params),
                               lambda err: str(getattr(err, "code", "")).startswith("RequestLimitExceeded"))


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


def _instance_vpcs(cluster, ids: list[str]) -> dict[str, set]:
    # CVM "DescribeInstances" (https://tencentcloud.com/document/product/213/33258): InstanceIds.N at most
    # 100 a request, Limit default 20, at most 100; InstanceSet[].VirtualPrivateCloud.VpcId
    cvm, out = _client(cluster, "cvm", "2017-03-12"), {}
    for chunk in batches(ids, 100):
        page = cvm.call_json("DescribeInstances", {"InstanceIds": chunk, "Limit": 100})["Response"]
        for item in page.get("InstanceSet") or []:
            out[item["InstanceId"]] = {(item.get("VirtualPrivateCloud") or {}).get("VpcId")}
    return out


def _subnet_vpcs(cluster, ids: list[str]) -> dict[str, set]:
    # VPC "DescribeSubnets" (https://www.tencentcloud.com/document/api/215/15784): SubnetIds.N at most 100
    # a request, Limit a String, default 20, at most 100; SubnetSet[].VpcId
    vpc, out = _client(cluster, "vpc", "2017-03-12"), {}
    for chunk in batches(ids, 100):
        page = vpc.call_json("DescribeSubnets", {"SubnetIds": chunk, "Limit": "100"})["Response"]
        for item in page.get("SubnetSet") or []:
            out[item["SubnetId"]] = {item.get("VpcId")}
    return out


def _file_system_vpcs(cluster, ids: list[str]) -> dict[str, set]:
    # A CFS file system is created with a VPC and subnet, where its mount target sits (nas.tf); CFS
    # "DescribeMountTargets" (https://tencentcloud.com/document/api/582/34513): one FileSystemId a call;
    # MountTargets[].VpcId (DescribeCfsFileSystems' FileSystemInfo names no VPC)
    cfs, out = _client(cluster, "cfs", "2019-07-19"), {}
    for fs in ids:
        targets = cfs.call_json("DescribeMountTargets", {"FileSystemId": fs})["Response"].get("MountTargets") or []
        out[fs] = {t.get("VpcId") for t in targets}
    return out


# What sits in one VPC, and how to ask which: DeleteVpc needs the VPC empty of CVMs and the like, and
# DeleteSubnet the subnet empty of its resources (VPC API "DeleteVpc",
# https://www.tencentcloud.com/document/api/215/15775, "DeleteSubnet" .../215/15783). Security groups are
# left out: Tencent's are regional, not in a VPC ("instances with the same network security isolation
# demands in one region can be put into the same security group", security group "Introduction",
# https://www.tencentcloud.com/document/product/1098/52810; a group is created with no VpcId, and
# tencentcloud_security_group has none), so no VPC's delete waits on one. Disks and key pairs are in no
# network.
IN_VPC = {"instance": _instance_vpcs, "file-system": _file_system_vpcs, "subnet": _subnet_vpcs}


def in_network(cluster, found: list[dict[str, Any]], state_values: dict) -> list[dict[str, Any]]:
    """The resources of `found` (from `find`) that sit in a VPC the state holds (`terraform show -json`
    values): instances, CFS file systems, subnets. Those hold up the state's DeleteSubnet and DeleteVpc;
    nothing outside those VPCs is returned. Raises the SDK's error on a failed call."""
    return in_vpcs(cluster, found, state_values, "tencentcloud_vpc", IN_VPC)


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
