"""Alibaba Cloud: find and delete what still carries a cluster's tag after `terraform destroy`.

`find` asks the Tag API (ListTagResources, version 2018-08-28, `Tags={"trainkit-cluster": name}`;
Alibaba Tag API doc "ListTagResources", ARNs `arn:acs:<service>:<region>:<account>:<type>/<id>`).
`delete` calls each product's delete action through the official SDK's generic `call_api`
(alibabacloud-tea-openapi, already a dependency of the ECS price adapter): ECS instances
(DeleteInstances Force=true, then waits until DescribeInstances no longer lists them), disks, NAS
file systems, security groups, vSwitches, VPCs, key pairs, in that order. A type with no delete
call here is reported. Credentials: ALIBABA_CLOUD_ACCESS_KEY_ID / _SECRET (or ALICLOUD_*).
`cluster.spec.endpoints[<product>]` (e.g. `tag`, `ecs`), when present, overrides an endpoint.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from trainkit.clouds.prices_alicloud import _env
from trainkit.clouds.sweep_common import gone_ok, in_order, report_undeletable, wait_gone
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
