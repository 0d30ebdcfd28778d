"""Alibaba Cloud: find and delete what still carries a cluster's tag after `terraform destroy`.

`find` asks the Tag API (ListTagResources, version 2018-08-28, `Tags={"trainkit-cluster": name}`;
Alibaba Tag API doc "ListTagResources", ARNs `arn:acs:<service>:<region>:<account>:<type>/<id>`).
`delete` calls each product's delete action through the official SDK's generic `call_api`
(alibabacloud-tea-openapi, already a dependency of the ECS price adapter): ECS instances
(DeleteInstances Force=true, then waits until DescribeInstances no longer lists them), disks, NAS
file systems, security groups, vSwitches, VPCs, key pairs, in that order. A type with no delete
call here is reported. `in_network` tells which found instances, vSwitches and security groups sit
in a VPC the Terraform state holds (ECS DescribeInstances / DescribeSecurityGroups, VPC
DescribeVSwitches). Credentials: ALIBABA_CLOUD_ACCESS_KEY_ID / _SECRET (or ALICLOUD_*).
`cluster.spec.endpoints[<product>]` (e.g. `tag`, `ecs`), when present, overrides an endpoint.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from trainkit.clouds.prices_alicloud import _env
from trainkit.clouds.sweep_common import batches, gone_ok, in_order, in_vpcs, report_undeletable, wait_gone
from trainkit.util import progress

TAG = "trainkit-cluster"
TYPES = {"instance": "instance", "disk": "disk", "filesystem": "file-system", "securitygroup": "security-group",
         "vswitch": "vswitch", "vpc": "vpc", "keypair": "key-pair"}
# type -> (product, API version, action, the requests for a list of ids), in dependency order
DELETE = {
    "instance": ("ecs", "2014-05-26", "DeleteInstances",
                 lambda ids: [{"Force": "true", **{f"InstanceId.{n}": i for n, i in enumerate(ids, 1)}}]),
    "disk": ("ecs", "2014-05-26", "DeleteDisk", lambda ids: [{"DiskId": i} for i in ids]),
    "file-system": ("nas", "2017-06-26", "DeleteFileSystem", lambda ids: [{"FileSystemId": i} for i in ids]),
    "security-group": ("ecs", "2014-05-26", "DeleteSecurityGroup",
                       lambda ids: [{"SecurityGroupId": i} for i in ids]),
    "vswitch": ("vpc", "2016-04-28", "DeleteVSwitch", lambda ids: [{"VSwitchId": i} for i in ids]),
    "vpc": ("vpc", "2016-04-28", "DeleteVpc", lambda ids: [{"VpcId": i} for i in ids]),
    "key-pair": ("ecs", "2014-05-26", "DeleteKeyPairs", lambda ids: [{"KeyPairNames": json.dumps(ids)}]),
}
ORDER = tuple(DELETE)
WAIT_S = 600  # instance release takes minutes at most (ECS API doc "DeleteInstances")


class _Api:
    """One product's RPC API through the SDK's generic call_api (signed with the access key)."""

    def __init__(self, cluster, product: str, version: str):
        from alibabacloud_tea_openapi import (
            models as api_models,  # the Alibaba Cloud SDK: imported only when its API is called
        )
        from alibabacloud_tea_openapi.client import Client


        self.region, self.version = cluster.spec.region, version
        config = api_models.Config(
            access_key_id=_env("ALIBABA_CLOUD_ACCESS_KEY_ID", "ALICLOUD_ACCESS_KEY", "ALIBABACLOUD_ACCESS_KEY_ID"),
            access_key_secret=_env("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "ALICLOUD_SECRET_KEY",
                                   "ALIBABACLOUD_ACCESS_KEY_SECRET"),
            region_id=self.region)
        endpoint = (getattr(cluster.spec, "endpoints", None) or {}).get(product)
        scheme, _, host = (endpoint or "").rpartition("://")
        config.endpoint = host or f"{product}.{self.region}.aliyuncs.com"
        config.protocol = scheme or "https"
        self.client = Client(config)

    def call(self, action: str, params: dict[str, Any]) -> dict[str, Any]:
        from alibabacloud_tea_openapi import utils_models  # the Alibaba Cloud SDK: imported only when its API is called
        from alibabacloud_tea_openapi.utils import Utils
        from darabonba.runtime import RuntimeOptions

        api = utils_models.Params(action=action, version=self.version, protocol="HTTPS", pathname="/",
                                  method="POST", auth_type="AK", style="RPC", req_body_type="formData",
                                  body_type="json")
        request = utils_models.OpenApiRequest(query=Utils.query({"RegionId": self.region, **params}))
        return self.client.call_api(api, request, RuntimeOptions())["body"]


def find(cluster) -> list[dict[str, Any]]:
    """Resources tagged trainkit-cluster=<name> that still exist: [{type, id, arn}], in ORDER."""
    tag = _Api(cluster, "tag", "2018-08-28")
    found, token = {}, None
    while True:
        page = tag.call("ListTagResources", {"Tags": json.dumps({TAG: cluster.name}), "PageSize": 1000,
                                             **({"NextToken": token} if token else {})})
        rows = page.get("TagResources") or []
        for item in rows.get("TagResource", []) if isinstance(rows, dict) else rows:
            prefix, _, rid = item["ResourceARN"].rsplit(":", 1)[-1].partition("/")
            kind = TYPES.get(prefix, prefix)
            found[(kind, rid)] = {"type": kind, "id": rid, "arn": item["ResourceARN"]}
        token = page.get("NextToken")
        if not token:
            break
    return in_order(found, ORDER)


def _instance_vpcs(cluster, ids: list[str]) -> dict[str, set]:
    # ECS "DescribeInstances" (https://www.alibabacloud.com/help/doc-detail/25506.html): InstanceIds a
    # JSON array of at most 100, MaxResults at most 100; Instances.Instance[].VpcAttributes.VpcId
    ecs, out = _Api(cluster, "ecs", "2014-05-26"), {}
    for chunk in batches(ids, 100):
        page = ecs.call("DescribeInstances", {"InstanceIds": json.dumps(chunk), "MaxResults": 100})
        for item in (page.get("Instances") or {}).get("Instance") or []:
            out[item["InstanceId"]] = {(item.get("VpcAttributes") or {}).get("VpcId")}
    return out


def _security_group_vpcs(cluster, ids: list[str]) -> dict[str, set]:
    # ECS "DescribeSecurityGroups" (https://alibabacloud.com/help/doc-detail/25556.htm): SecurityGroupIds a
    # JSON array of at most 100, MaxResults at most 100; SecurityGroups.SecurityGroup[].VpcId
    ecs, out = _Api(cluster, "ecs", "2014-05-26"), {}
    for chunk in batches(ids, 100):
        page = ecs.call("DescribeSecurityGroups", {"SecurityGroupIds": json.dumps(chunk), "MaxResults": 100})
        for item in (page.get("SecurityGroups") or {}).get("SecurityGroup") or []:
            out[item["SecurityGroupId"]] = {item.get("VpcId")}
    return out


def _vswitch_vpcs(cluster, ids: list[str]) -> dict[str, set]:
    # VPC "DescribeVSwitches", 2016-04-28 (https://alibabacloud.com/help/en/vpc/developer-reference/
    # api-vpc-2016-04-28-describevswitches): one VSwitchId a call; VSwitches.VSwitch[].VpcId
    vpc, out = _Api(cluster, "vpc", "2016-04-28"), {}
    for vsw in ids:
        for item in (vpc.call("DescribeVSwitches", {"VSwitchId": vsw}).get("VSwitches") or {}).get("VSwitch") or []:
            out[item["VSwitchId"]] = {item.get("VpcId")}
    return out


# What sits in one VPC, and how to ask which: DeleteVpc needs the VPC's vSwitches and instances gone
# first ("DeleteVpc", VPC API 2016-04-28, https://www.alibabacloud.com/help/doc-detail/35738.htm), and a
# security group belongs to the VPC its VpcId names (ECS "DescribeSecurityGroups"). Left out: NAS file
# systems, which are in no VPC themselves (their mount targets are, and terraform mounts only the file
# system it tracks, so an untracked copy has none); disks and key pairs, which are in no network.
IN_VPC = {"instance": _instance_vpcs, "security-group": _security_group_vpcs, "vswitch": _vswitch_vpcs}


def in_network(cluster, found: list[dict[str, Any]], state_values: dict) -> list[dict[str, Any]]:
    """The resources of `found` (from `find`) that sit in a VPC the state holds (`terraform show -json`
    values): instances, vSwitches, security groups. Those hold up the state's DeleteVpc; nothing
    outside those VPCs is returned. Raises the SDK's error on a failed call."""
    return in_vpcs(cluster, found, state_values, "alicloud_vpc", IN_VPC)


def delete(cluster, found: list[dict[str, Any]]) -> None:
    """Delete `found` in dependency order; types with no delete call are reported, not skipped.

    Raises the SDK's error on the first failed call."""
    report_undeletable(found, DELETE, "arn", progress.info)
    for kind, (product, version, action, requests) in DELETE.items():
        ids = [r["id"] for r in found if r["type"] == kind]
        if not ids:
            continue
        api = _Api(cluster, product, version)
        for params in requests(ids):
            gone_ok(functools.partial(api.call, action, params))
        if kind == "instance":
            _wait_gone(api, ids)


def _wait_gone(ecs: _Api, ids: list[str]) -> None:
    def listed() -> bool:
        found = ecs.call("DescribeInstances", {"InstanceIds": json.dumps(ids)}).get("Instances") or {}
        return bool(found.get("Instance"))

    wait_gone(listed, ids, "DeleteInstances", WAIT_S)
