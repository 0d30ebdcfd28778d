"""Tencent Cloud: what trainkit's Python knows about it (provider tencentcloudstack/tencentcloud ~> 1.83).

Sources: the provider's `tencentcloud/provider.go` (credential variables), Terraform's cos backend
(`internal/backend/remote-state/cos`), Tencent CVM docs "Spot instance reclamation" (metadata path
`spot/termination-time`). CVM has no release-at argument: TTL uses the node-side timer.
Key pair names: the provider's `ValidateKeyPairName` (at most 25 characters; letters, digits and
underscores). Tags: Tencent Tag API CreateTag error codes (keys starting with `qcloud`,
`tencent` or `project` are reserved) and Tencent COS docs "Bucket Tag Overview" (updated
2025-09-24: 50 tags per resource, key 1-127 characters, value up to 255, `qcs:` reserved; UTF-8
letters, digits, spaces and + - = . _ : / @). CBS sizes: Tencent CBS docs "Cloud disk types" (data disks 20-32000 GB,
CLOUD_PREMIUM from 10 GB) and CVM "system disk" (20-1024 GB).
"""

from __future__ import annotations

from typing import Any, Iterator

from trainkit.clouds.base import (
    Billed,
    BillingRule,
    CapacityCode,
    CapacityProblem,
    Cloud,
    CredentialSet,
    DiskRules,
    Ingress,
    TagRules,
    index_of,
    match_capacity,
    node_resize,
    port_range,
)

_KEYS = CredentialSet(
    label="secret id and key",
    variables=(("TENCENTCLOUD_SECRET_ID",), ("TENCENTCLOUD_SECRET_KEY",)),
    files=("~/.tccli/default.credential",),
)
_TAG_TEXT = r"[\w\s+\-=.:/@]"


def _backend(b: Any, region: str, prefix: str, endpoints: dict[str, str]) -> tuple[str, dict[str, Any], list[str]]:
    args = {"bucket": b.bucket, "prefix": prefix, "key": b.key, "region": region, "encrypt": b.encrypt}
    if b.endpoint is not None:
        args["endpoint"] = b.endpoint
    return "cos", args, ["Tencent COS, locked by the backend itself; credentials from "
                         "TENCENTCLOUD_SECRET_ID / TENCENTCLOUD_SECRET_KEY."]


def _public_ip_node(r: dict) -> int | None:
    if r["type"] == "tencentcloud_instance" and r["values"].get("allocate_public_ip") is True:
        return index_of(r)
    return None


def _unencrypted(r: dict) -> Iterator[str]:
    if r["type"] == "tencentcloud_cbs_storage" and r["values"].get("encrypt") is False:
        yield r["address"]


def _ingress(r: dict) -> Iterator[Ingress]:
    if r["type"] == "tencentcloud_security_group_rule_set":
        for rule in r["values"].get("ingress") or []:
            for cidr in (rule.get("cidr_block"), rule.get("ipv6_cidr_block")):
                if cidr:
                    yield (cidr, *port_range(rule.get("port")))



# CVM API 2017-03-12 "RunInstances" error codes (https://www.tencentcloud.com/document/product/213/33237,
# section 5 "Error Codes"; the common codes at /213/33281): ResourceInsufficient.SpecifiedInstanceType
# "Insufficient resources of the specified instance type", ResourceInsufficient.ZoneSoldOutForSpecifiedInstance
# "The specified instance type is sold out in the selected AZ", ResourceInsufficient.CloudDiskSoldOut
# "The cloud disk is sold out", ResourcesSoldOut.SpecifiedInstanceType "The specified instance type is
# sold out", ResourcesSoldOut.PurchaseSourceHasNoStock / ResourcesSoldOut.AvailableZone (sold out in
# the zone); LimitExceeded.InstanceQuota "Quota limit exceeded" (instances of a type in the zone),
# LimitExceeded.SpotQuota / LimitExceeded.UserSpotQuota (spot instances), LimitExceeded.PrepayQuota
# (monthly subscription); any other LimitExceeded.*Quota code is read as a quota by name.
CAPACITY_CODES: tuple[CapacityCode, ...] = (
    (r"ResourceInsufficient\.[A-Za-z]+", "capacity", None),
    (r"ResourcesSoldOut(?:\.[A-Za-z]+)?", "capacity", None),
    (r"LimitExceeded\.(?:UserSpotQuota|SpotQuota)", "quota", "spot instances (CVM quota, console: CVM -> Quotas)"),
    (r"LimitExceeded\.PrepayQuota", "quota", "monthly-subscription instances (CVM quota)"),
    (r"LimitExceeded\.InstanceQuota", "quota", "instances of this type in the zone (CVM quota)"),
    (r"LimitExceeded\.[A-Za-z]*(?:Quota|Limit)[A-Za-z]*", "quota", "the CVM quota named in the error code"),
)


def capacity_error(text: str) -> CapacityProblem | None:
    """The capacity/quota refusal in tencentcloud provider text ("[TencentCloudSDKError]
    Code=ResourceInsufficient.SpecifiedInstanceType, Message=..."), else None."""
    return match_capacity(text, CAPACITY_CODES, zone_re=r"\b((?:ap|na|eu|sa)-[a-z]+-\d+)\b",
                          type_re=r"\b([A-Z]{1,4}[A-Z0-9]*\d[a-z]*\.[0-9A-Z]+[A-Z]+\d*)\b")


# ResetInstancesType (CVM API 2017-03-12, https://www.tencentcloud.com/document/api/213/33239):
# "You can only use this API to change the models of instances whose system disk type is
# CLOUD_BASIC, CLOUD_PREMIUM, or CLOUD_SSD" (the Chinese page, 213/15744, adds CLOUD_BSSD).
RESIZABLE_SYSTEM_DISKS = ("CLOUD_BASIC", "CLOUD_PREMIUM", "CLOUD_SSD", "CLOUD_BSSD")


def _in_place(rtype: str, before: dict, after: dict) -> tuple[str, str] | None:
    """tencentcloud_instance: a type change stops the node (ResetInstancesType) and is refused for a
    system disk ResetInstancesType does not take (CLOUD_HSSD, the catalog's default) and for a spot
    node (base.SPOT_RESIZE); the provider refuses to unset placement_group_id ("Deleting
    `placement_group_id` is not currently supported", resource_tc_instance.go update)."""
    if rtype != "tencentcloud_instance":
        return None
    if before.get("placement_group_id") and not after.get("placement_group_id") and "placement_group_id" in after:
        return "refused", "placement_group_id cannot be removed from an instance in place (provider)"
    resize = node_resize(BILLING, rtype, before, after, "ResetInstancesType shuts the instance down and starts it")
    disk = before.get("system_disk_type")
    if resize and disk and disk not in RESIZABLE_SYSTEM_DISKS:
        return "refused", f"ResetInstancesType does not change instances whose system disk is {disk}"
    return resize


BILLING = {   # what each resource bills as (Cloud.billing): SPOTPAID is spot, PREPAID a subscription
    "tencentcloud_instance": Billed(
        node=("instance_type",),
        billing=(BillingRule(("instance_charge_type",), {"SPOTPAID": "spot", "PREPAID": "subscription"},
                             other="on_demand"),),
        max_price=("spot_max_price",), system_disk=(("system_disk_type",), ("system_disk_size",))),
    "tencentcloud_cbs_storage": Billed(disk=(("storage_type",), ("storage_size",))),
    "tencentcloud_cfs_file_system": Billed(nas=True),
}


CLOUD = Cloud(
    name="tencentcloud",
    title="Tencent Cloud",
    provider_source="tencentcloudstack/tencentcloud",
    provider_version="~> 1.83",
    credentials=(_KEYS,),
    region_variables=("TENCENTCLOUD_REGION",),
    backend_type="cos",
    backend_credentials=(_KEYS,),
    backend=_backend,
    spot_notice_url="http://metadata.tencentyun.com/latest/meta-data/spot/termination-time",
    # None: a plain GET, as CVM docs "Spot instance repossession" read it (`curl .../spot/
    # termination-time`); the tencentcloud module turns on no token mode.
    spot_notice_token=None,
    ttl_argument=None,
    zone_pattern=r"{region}-\d+",
    tags=TagRules(max_count=50, key_max=127, value_max=255,
                  reserved_prefixes=("qcloud", "tencent", "project", "qcs:"),
                  key_pattern=_TAG_TEXT + "+", value_pattern=_TAG_TEXT + "*",
                  allowed_text="letters, digits, spaces and + - = . _ : / @"),
    # The module names the key pair after the cluster (dashes -> underscores).
    derived_names={"key pair": ("", 25)},
    disks=DiskRules(system_size=(20, 1024),
                    data_size={"CLOUD_PREMIUM": (10, 32000), "*": (20, 32000)},
                    kms_key_argument="kms_key_id"),
    # Tencent CFS docs "Mounting on Linux": NFSv3 defaults of the Tencent SDK.
    nfs_mount_options="vers=3,nolock,proto=tcp,noresvport",
    public_ip_node=_public_ip_node,
    unencrypted=_unencrypted,
    ingress_rules=_ingress,
    in_place=_in_place,
    price_adapter="trainkit.clouds.prices_tencentcloud",
    offers_adapter="trainkit.clouds.offers_tencentcloud",
    tag_sweeper="trainkit.clouds.tencentcloud_sweep",
    # `endpoints:` reach only trainkit's own calls, never the provider block or the backend: the
    # sweeper's services, by the CommonClient service name (tencentcloud_sweep: Tag `tag`, CVM `cvm`,
    # CBS `cbs`, CFS `cfs`, VPC `vpc`).
    supports_endpoints=True,
    endpoint_keys=("tag", "cvm", "cbs", "cfs", "vpc"),
    # COS docs, "Using AWS S3 SDK to Access COS": endpoint cos.<region>.myqcloud.com.
    object_store=("cos", "https://cos.{region}.myqcloud.com"),
    spot_needs_max_price=True,
    # GPU HCC families with an RDMA network: "Installation Instructions of TCCL on GPU Instances"
    # (https://www.tencentcloud.com/document/product/1236/62821) gives HCCPNV4sne 1.6 Tbps and
    # HCCPNV4sn 800 Gbps of RDMA. "RDMA Network Configuration Component rdma-agent Description"
    # (https://www.tencentcloud.com/document/product/1236/77056): the rdma-agent systemd service
    # configures that network; the network role checks it (ansible/roles/network/tasks/tencent_rdma.yml).
    rdma_agent_types=("HCCPNV4sn", "HCCPNV4sne"),
    capacity_error=capacity_error,
    billing=BILLING,
    # Tencent Cloud API 3.0 common error codes (docs "Common Error Codes": AuthFailure.*,
    # UnauthorizedOperation).
    credential_errors=(
        (r"AuthFailure(\.\w+)?", "credentials"),
        (r"(?i)secret_?id.*(empty|required|not set)", "credentials"),
        (r"UnauthorizedOperation(\.\w+)?|OperationDenied\.\w*Permission", "permission"),
    ),
)
