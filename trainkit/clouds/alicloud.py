"""Alibaba Cloud: what trainkit's Python knows about it (provider aliyun/alicloud ~> 1.289).

Sources: the provider's `alicloud/provider.go` (credential variables), Terraform's oss backend
(`internal/backend/remote-state/oss`), Alibaba ECS docs "Spot instance interruption events"
(metadata path `instance/spot/termination-time`) and the `alicloud_instance` docs (`auto_release_time`).
Tags: Alibaba Cloud Resource Management docs "Tag limits" (20 per resource, key 1-128 characters
not starting with `aliyun` or `acs:`, value 0-128, neither containing `http://` or `https://`).
Disks: `alicloud_ecs_disk` docs (cloud_essd PL0 1-65536, PL1 20-65536, PL2 461-65536,
PL3 1261-65536 GiB; cloud_auto 1-65536; cloud_essd_entry 10-32768; cloud_ssd/cloud_efficiency
20-32768), ECS docs "Block storage overview" (system disk 20-2048 GiB) and "GPU-accelerated
compute-optimized instance families" (gn7, gn7e, gn7i: ESSD family disks only).
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
    MetadataToken,
    TagRules,
    index_of,
    match_capacity,
    node_resize,
    port_range,
)

_KEYS = CredentialSet(
    label="access key",
    variables=(("ALICLOUD_ACCESS_KEY", "ALIBABA_CLOUD_ACCESS_KEY_ID", "ALIBABACLOUD_ACCESS_KEY_ID"),
               ("ALICLOUD_SECRET_KEY", "ALIBABA_CLOUD_ACCESS_KEY_SECRET",
                "ALIBABACLOUD_ACCESS_KEY_SECRET")),
    files=("~/.aliyun/config.json",),
)
_ESSD_FAMILY = ("cloud_essd", "cloud_auto")


def _backend(b: Any, region: str, prefix: str, endpoints: dict[str, str]) -> tuple[str, dict[str, Any], list[str]]:
    args = {"bucket": b.bucket, "prefix": prefix, "key": b.key, "region": region, "encrypt": b.encrypt}
    args.update({k: v for k, v in (("endpoint", b.endpoint),
                                   ("tablestore_endpoint", b.tablestore_endpoint),
                                   ("tablestore_table", b.tablestore_table)) if v is not None})
    notes = ["Alibaba OSS; credentials from ALICLOUD_ACCESS_KEY / ALICLOUD_SECRET_KEY."]
    if not b.tablestore_table:
        notes.append("No Tablestore table: this state is NOT locked (set backend.tablestore_table).")
    return "oss", args, notes


def _public_ip_node(r: dict) -> int | None:
    if r["type"] == "alicloud_instance" and r["values"].get("internet_max_bandwidth_out"):
        return index_of(r)
    return None


def _unencrypted(r: dict) -> Iterator[str]:
    if r["type"] == "alicloud_ecs_disk" and r["values"].get("encrypted") is False:
        yield r["address"]


def _ingress(r: dict) -> Iterator[Ingress]:
    v = r["values"]
    if r["type"] == "alicloud_security_group_rule" and v.get("type") == "ingress":
        for cidr in (v.get("cidr_ip"), v.get("ipv6_cidr_ip")):
            if cidr:
                yield (cidr, *port_range(v.get("port_range")))



# ECS API error codes of RunInstances / CreateInstance (Alibaba Cloud OpenAPI Explorer, ECS
# 2014-05-26, "RunInstances" -> error codes; ECS docs "Troubleshoot API error codes"):
# OperationDenied.NoStock "The requested resource is sold out in the specified zone; try other types
# of resources or other regions and zones"; Zone.NotOnSale / InvalidZoneId.NotOnSale "The specified
# zone is not available for purchase"; InvalidResourceType.NotSupported "This resource type is not
# supported" (the type is not sold in that zone); QuotaExceed.ElasticQuota "The number of vCPUs
# assigned to the ECS instances has exceeded the quota in the zone" (Quota Center, "ECS
# pay-as-you-go vCPU quota"); QuotaExceed.PostPaidDisk and QuotaExceed.DiskCapacity (disk quotas);
# QuotaExceed.SpotInstance / QuotaExceed.PreemptibleInstance (spot instance vCPU quota).
CAPACITY_CODES: tuple[CapacityCode, ...] = (
    (r"OperationDenied\.NoStock", "capacity", None),
    (r"(?:InvalidZoneId|Zone)\.NotOnSale", "capacity", None),
    (r"InvalidResourceType\.NotSupported", "capacity", None),
    (r"QuotaExceed\.ElasticQuota", "quota", "vCPUs of pay-as-you-go instances in the zone (Quota Center, ECS)"),
    (r"QuotaExceed\.(?:SpotInstance|PreemptibleInstance)", "quota", "vCPUs of spot instances (Quota Center, ECS)"),
    (r"QuotaExceed\.PostPaidDisk", "quota", "pay-as-you-go data disks (Quota Center, ECS)"),
    (r"QuotaExceed\.DiskCapacity", "quota", "disk capacity of this category in the zone (Quota Center, ECS)"),
)


# A LowLatency deployment set holds at most 20 instances, and spot (preemptible) instances cannot be
# created in a deployment set (ECS docs, "Deployment sets", limits; alicloud_instance
# `deployment_set_id`, provider v1.289.0).
DEPLOYMENT_SET_MAX = 20


def _spec_rules(spec: Any) -> list:
    out = []
    if spec.network.placement_group and spec.spot.enabled:
        out.append(("network.placement_group", "Alibaba Cloud creates no spot instances in a deployment set "
                    "(placement_group: true puts the nodes in a LowLatency set)",
                    "set network.placement_group: false to keep spot, or spot.enabled: false"))
    if spec.network.placement_group and spec.nodes > DEPLOYMENT_SET_MAX:
        out.append(("nodes", f"a LowLatency deployment set holds at most {DEPLOYMENT_SET_MAX} instances, "
                    f"got {spec.nodes}", f"set network.placement_group: false, or nodes: {DEPLOYMENT_SET_MAX} or fewer"))
    return out


def capacity_error(text: str) -> CapacityProblem | None:
    """The capacity/quota refusal in alicloud provider text (the SDK prints `ErrorCode: <code>`;
    the messages name neither zone nor type: the caller fills them from the spec), else None."""
    return match_capacity(text, CAPACITY_CODES, zone_re=r"ZoneId[\"=: ]+([a-z]{2}-[a-z0-9-]+)",
                          type_re=r"InstanceType[\"=: ]+(ecs\.[a-z0-9.-]+)")


BILLING = {   # what each resource bills as (Cloud.billing): spot_strategy other than NoSpot is spot,
    # instance_charge_type PrePaid a subscription (resource_alicloud_instance.go)
    "alicloud_instance": Billed(
        node=("instance_type",),
        billing=(BillingRule(("instance_charge_type",), {"PrePaid": "subscription"}),
                 BillingRule(("spot_strategy",), {"NoSpot": None}, other="spot")),
        billing_keys=("spot_strategy", "instance_charge_type"), max_price=("spot_price_limit",),
        system_disk=(("system_disk_category",), ("system_disk_size",))),
    "alicloud_ecs_disk": Billed(disk=(("category",), ("size",))),
    "alicloud_disk": Billed(disk=(("category",), ("size",))),
    "alicloud_nas_file_system": Billed(nas=True),
}


def _in_place(rtype: str, before: dict, after: dict) -> tuple[str, str] | None:
    """alicloud_instance: a type change stops the node (resource_alicloud_instance.go, update:
    stop, ModifyInstanceSpec, start); a vSwitch change too (ModifyInstanceVpcAttribute needs a
    stopped instance, ECS API 2014-05-26). A spot node is replaced instead (base.SPOT_RESIZE)."""
    if rtype != "alicloud_instance":
        return None
    resize = node_resize(BILLING, rtype, before, after, "the provider stops the instance, calls "
                         "ModifyInstanceSpec and starts it again")
    if resize or before.get("vswitch_id") == after.get("vswitch_id") or after.get("vswitch_id") is None:
        return resize
    return "stops", "vswitch_id changes: ModifyInstanceVpcAttribute works on a stopped instance only"


CLOUD = Cloud(
    name="alicloud",
    title="Alibaba Cloud",
    provider_source="aliyun/alicloud",
    provider_version="~> 1.289",
    credentials=(_KEYS,),
    region_variables=("ALICLOUD_REGION", "ALIBABA_CLOUD_REGION"),
    backend_type="oss",
    backend_credentials=(_KEYS,),
    backend=_backend,
    spot_notice_url="http://100.100.100.200/latest/meta-data/instance/spot/termination-time",
    # The module sets http_tokens = "required" (security hardening mode only). Alibaba ECS docs
    # "Instance metadata", security hardening mode: PUT /latest/api/token with
    # X-aliyun-ecs-metadata-token-ttl-seconds (1-21600), then GET with X-aliyun-ecs-metadata-token.
    spot_notice_token=MetadataToken("http://100.100.100.200/latest/api/token",
                                    "X-aliyun-ecs-metadata-token-ttl-seconds", "X-aliyun-ecs-metadata-token"),
    ttl_argument="auto_release_time",
    # GPU types with eRDMA interfaces: Alibaba Cloud PAI docs "eRDMA distributed training" (table of
    # GPU instance types and their eRDMA NIC counts). The network role installs the driver and
    # writes NCCL's eRDMA variables on these (ansible/roles/network).
    erdma_types=("ecs.ebmgn7v.", "ecs.ebmgn8v.", "ecs.ebmgn8is.", "ecs.ebmgn8i.", "ecs.gn8is.", "ecs.gn8is-"),
    ttl_releases_data_disks=True,  # alicloud_ecs_disk_attachment.delete_with_instance with ttl or spot
    zone_pattern="{region}-[a-z]",
    tags=TagRules(max_count=20, key_max=128, value_max=128, reserved_prefixes=("aliyun", "acs:"),
                  forbidden=("http://", "https://"),
                  allowed_text="any characters but http:// and https://, keys not starting "
                               "with aliyun or acs:"),
    disks=DiskRules(system_size=(20, 2048),
                    data_size={"cloud_essd": (1, 65536), "cloud_auto": (1, 65536),
                               "cloud_essd_entry": (10, 32768), "cloud_ssd": (20, 32768),
                               "cloud_efficiency": (20, 32768)},
                    level_min_size={"PL0": 1, "PL1": 20, "PL2": 461, "PL3": 1261},
                    leveled_categories=("cloud_essd",),
                    family_categories={"gn7": _ESSD_FAMILY, "gn7e": _ESSD_FAMILY,
                                       "gn7i": _ESSD_FAMILY},
                    kms_key_argument="kms_key_id"),
    # Alibaba NAS docs "Mount an NFS file system": NFSv3 with the recommended options.
    nfs_mount_options="vers=3,nolock,proto=tcp,rsize=1048576,wsize=1048576,hard,timeo=600,"
                      "retrans=2,_netdev,noresvport",
    public_ip_node=_public_ip_node,
    unencrypted=_unencrypted,
    ingress_rules=_ingress,
    capacity_error=capacity_error,
    billing=BILLING,
    in_place=_in_place,
    spec_rules=_spec_rules,
    # Alibaba OpenAPI common error codes (Alibaba Cloud docs, "Common error codes").
    credential_errors=(
        (r"InvalidAccessKeyId(\.NotFound|\.Inactive)?|SignatureDoesNotMatch|IncompleteSignature",
         "credentials"),
        (r"(?i)access.?key.*(empty|required|not set)", "credentials"),
        (r"Forbidden\.RAM|NoPermission|Forbidden\.NoPermission", "permission"),
    ),
    price_adapter="trainkit.clouds.prices_alicloud",
    offers_adapter="trainkit.clouds.offers_alicloud",
    tag_sweeper="trainkit.clouds.alicloud_sweep",
    # `endpoints:` reach only trainkit's own calls, never the provider block or the backend (an
    # emulator of these APIs; the provider has its own settings): the sweeper's products, by the
    # endpoint host's first label (alicloud_sweep: Tag 2018-08-28 `tag`, ECS 2014-05-26 `ecs`,
    # VPC 2016-04-28 `vpc`, NAS 2017-06-26 `nas`).
    supports_endpoints=True,
    endpoint_keys=("tag", "ecs", "vpc", "nas"),
    # ECS RunInstances AutoReleaseTime: "at least 30 minutes later than the current time";
    # ModifyInstanceAutoReleaseTime (help.aliyun.com/document_detail/47576.html): at most three
    # years after the current time. The module computes the release time at plan
    # (plantimestamp() + ttl) and the instance is created later: after the confirmation and the
    # network, disks and NAS (minutes; NAS alone takes a few). trainkit keeps a 30-minute margin
    # for that, so the shortest ttl is 60 minutes.
    limits={"ttl_min_minutes": 30 + 30, "ttl_max_minutes": 3 * 365 * 24 * 60},
    # OSS docs, "Use Amazon S3 SDKs to access OSS": endpoint s3.oss-<region>.aliyuncs.com.
    object_store=("oss", "https://s3.oss-{region}.aliyuncs.com"),
)
