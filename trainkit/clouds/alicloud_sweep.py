"""Alibaba Cloud: find and delete what still carries a cluster's tag after `terraform destroy`.

`find` asks the Tag API (ListTagResources, version 2018-08-28, `Tags={"trainkit-cluster": name}`;
Alibaba Tag API doc "ListTagResources", ARNs `arn:acs:<service>:<region>:<account>:<type>/<id>`).
`delete` calls each product's delete action through the official SDK's generic `call_api`
(alibabacloud-tea-openapi, already a dependency of the ECS price adapter): ECS instances
(DeleteInstances Force=true, then waits until DescribeInstances no longer lists them), disks, NAS
mount targets (then waits until DescribeMountTargets no longer lists them), NAS file systems, security
groups, vSwitches, VPCs, key pairs, in that order. A type with no delete call here is reported.
`untracked_parts` lists the NAS mount targets of the state's file systems that the state does not hold
(a mount target takes no tags, so the Tag API never finds one). `in_network` tells which found
instances, vSwitches and security groups sit in a VPC the Terraform state holds (ECS
DescribeInstances / DescribeSecurityGroups, VPC DescribeVSwitches). Credentials:
ALIBABA_CLOUD_ACCESS_KEY_ID / _SECRET (or ALICLOUD_*).
`cluster.spec.endpoints[<product>]` (e.g. `tag`, `ecs`), when present, overrides an endpoint.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from trainkit.clouds.prices_alicloud import env_value
from trainkit.clouds.sweep_common import (
    batches,
    gone_ok,
    in_order,
    in_vpcs,
    report_undeletable,
    retry_throttled,
    state_ids,
    wait_gone,
)
from trainkit.util import progress

TAG = "trainkit-cluster"
TYPES = {"instance": "instance", "disk": "disk", "filesystem": "file-system", "securitygroup": "security-group",
         "vswitch": "vswitch", "vpc": "vpc", "keypair": "key-pair"}
# type -> (product, API version, action, the requests for a list of found resources), in dependency order.
# A mount target ("mount-target", from `untracked_parts`: its id is the mount target domain) goes before
# its file system: NAS "DeleteMountTarget", 2017-06-26, FileSystemId and MountTargetDomain, both required
# (https://www.alibabacloud.com/help/en/nas/developer-reference/api-nas-2017-06-26-deletemounttarget).
DELETE = {
    "instance": ("ecs", "2014-05-26", "DeleteInstances",
                 lambda rows: [{"Force": "true", **{f"InstanceId.{n}": r["id"] for n, r in enumerate(rows, 1)}}]),
    "disk": ("ecs", "2014-05-26", "DeleteDisk", lambda rows: [{"DiskId": r["id"]} for r in rows]),
    "mount-target": ("nas", "2017-06-26", "DeleteMountTarget",
                     lambda rows: [{"FileSystemId": r["file_system"], "MountTargetDomain": r["id"]} for r in rows]),
    "file-system": ("nas", "2017-06-26", "DeleteFileSystem", lambda rows: [{"FileSystemId": r["id"]} for r in rows]),
    "security-group": ("ecs", "2014-05-26", "DeleteSecurityGroup",
                       lambda rows: [{"SecurityGroupId": r["id"]} for r in rows]),
    "vswitch": ("vpc", "2016-04-28", "DeleteVSwitch", lambda rows: [{"VSwitchId": r["id"]} for r in rows]),
    "vpc": ("vpc", "2016-04-28", "DeleteVpc", lambda rows: [{"VpcId": r["id"]} for r in rows]),
    "key-pair": ("ecs", "2014-05-26", "DeleteKeyPairs",
                 lambda rows: [{"KeyPairNames": json.dumps([r["id"] for r in rows])}]),
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
            access_key_id=env_value("ALIBABA_CLOUD_ACCESS_KEY_ID", "ALICLOUD_ACCESS_KEY", "ALIBABACLOUD_ACCESS_KEY_ID"),
            access_key_secret=env_value("ALIBABA_CLOUD_ACCESS_KEY_SECRET", "ALICLOUD_SECRET_KEY",
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
        # Throttling.User / Throttling.Api / Throttling (OpenAPI "Common error codes"): retried
        return retry_throttled(lambda: self.client.call_api(api, request, RuntimeOptions())["body"],
                               lambda err: str(getattr(err, "code", "")).startswith("Throttling"))


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


def untracked_parts(cluster, state_values: dict) -> list[dict[str, Any]]:
    """NAS mount targets of the state's file systems that the state does not hold: a mount target
    takes no tags, so the Tag API never finds one (a create cut off by an interrupted apply leaves
    one), yet DeleteFileSystem refuses a file system that still has mount targets. Only file systems
    the state holds are asked about, so every one returned is the cluster's. Each is {type:
    "mount-target", id: <mount target domain>, file_system}. Raises the SDK's error
    on a failed call."""
    file_systems = state_ids(state_values, "alicloud_nas_file_system")
    if not file_systems:
        return []
    # The provider's id for alicloud_nas_mount_target is "<file_system_id>:<mount_target_domain>" (the
    # bare domain before provider 1.95.0): terraform-provider-alicloud, website/docs/r/
    # nas_mount_target.html.markdown, "Attributes Reference" and "Import".
    held, nas = state_ids(state_values, "alicloud_nas_mount_target"), _Api(cluster, "nas", "2017-06-26")
    return [{"type": "mount-target", "id": domain, "arn": None, "file_system": fs}
            for fs in sorted(file_systems) for domain in _mount_targets(nas, fs)
            if f"{fs}:{domain}" not in held and domain not in held]


def _mount_targets(nas: _Api, file_system: str) -> list[str]:
    # NAS "DescribeMountTargets", 2017-06-26 ("File Storage NAS:DescribeMountTargets",
    # https://www.alibabacloud.com/help/en/nas/developer-reference/api-nas-2017-06-26-describemounttargets):
    # FileSystemId required; PageSize 1 to 100 (default 10), PageNumber from 1; the answer holds TotalCount
    # and MountTargets.MountTarget[].MountTargetDomain (the doc's JSON sample, also in AlibabaCloudDocs/nas
    # "DescribeMountTargets.md").
    domains, page = [], 1
    while True:
        answer = nas.call("DescribeMountTargets", {"FileSystemId": file_system, "PageSize": 100, "PageNumber": page})
        rows = (answer.get("MountTargets") or {}).get("MountTarget") or []
        domains += [r["MountTargetDomain"] for r in rows]
        if not rows or len(domains) >= int(answer.get("TotalCount") or 0):
            return domains
        page += 1


def delete(cluster, found: list[dict[str, Any]]) -> None:
    """Delete `found` in dependency order; types with no delete call are reported, not skipped.

    Raises the SDK's error on the first failed call."""
    report_undeletable(found, DELETE, "arn", progress.info)
    for kind, (product, version, action, requests) in DELETE.items():
        rows = [r for r in found if r["type"] == kind]
        if not rows:
            continue
        api = _Api(cluster, product, version)
        for params in requests(rows):
            gone_ok(functools.partial(api.call, action, params))
        if kind == "instance":
            _wait_gone(api, [r["id"] for r in rows])
        if kind == "mount-target":
            _wait_mount_targets_gone(api, rows)


def _wait_gone(ecs: _Api, ids: list[str]) -> None:
    def listed() -> bool:
        found = ecs.call("DescribeInstances", {"InstanceIds": json.dumps(ids)}).get("Instances") or {}
        return bool(found.get("Instance"))

    wait_gone(listed, ids, "DeleteInstances", WAIT_S)


def _wait_mount_targets_gone(nas: _Api, targets: list[dict[str, Any]]) -> None:
    """Poll DescribeMountTargets until no file system lists the deleted mount targets. The API doc does
    not say when a deleted one is gone; the provider itself polls DescribeMountTargets after
    DeleteMountTarget until MountTargets.MountTarget is empty, for up to its 40-minute delete timeout
    (terraform-provider-alicloud, resource_alicloud_nas_mount_target.go; docs "Timeouts")."""
    def listed() -> bool:
        return any({t["id"] for t in targets if t["file_system"] == fs} & set(_mount_targets(nas, fs))
                   for fs in sorted({t["file_system"] for t in targets}))

    wait_gone(listed, [t["id"] for t in targets], "DeleteMountTarget", WAIT_S, what="NAS mount targets")
