"""Huawei Cloud: what trainkit's Python knows about it (provider huaweicloud/huaweicloud ~> 1.97).

Sources: the provider's `huaweicloud/provider.go` (credential variables), its guide
`docs/guides/remote_state_backend.md` (OBS through Terraform's s3 backend, with AWS_* variables
holding the Huawei keys), and the `huaweicloud_compute_instance` docs (`auto_terminate_time`,
`system_disk_size` 1-1024 GB). EVS: `huaweicloud_evs_volume` docs (data disk 10-32768 GB;
encryption only with a KMS key, `kms_id`). SFS Turbo: `huaweicloud_sfs_turbo` docs (name 4-64
characters; STANDARD/PERFORMANCE 500-32768 GB). Tags: Huawei Cloud docs "Tag Character Set
Specifications" (key 1-128 not starting with `_sys_`, value 0-255; letters, digits, spaces and
_ . : = + - @, `/` in values too) and TMS "Tag limits" (20 tags per resource).
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
    NasRules,
    TagRules,
    index_of,
    match_capacity,
    node_resize,
    port_range,
)


def _backend(b: Any, region: str, prefix: str, endpoints: dict[str, str]) -> tuple[str, dict[str, Any], list[str]]:
    endpoint = b.endpoint or f"https://obs.{region}.myhuaweicloud.com"
    args = {"bucket": b.bucket, "key": f"{prefix}/{b.key}", "region": region,
            "endpoints": {"s3": endpoint}, "skip_region_validation": True,
            "skip_credentials_validation": True, "skip_metadata_api_check": True,
            "skip_requesting_account_id": True, "skip_s3_checksum": True}
    return "s3", args, [
        "Huawei OBS through the s3 backend (huaweicloud provider guide remote_state_backend).",
        "Credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY; OBS offers no state lock."]


def _public_ip_node(r: dict) -> int | None:
    if r["type"] == "huaweicloud_compute_instance" and r["values"].get("eip_type"):
        return index_of(r)
    return None


def _unencrypted(r: dict) -> Iterator[str]:
    if r["type"] == "huaweicloud_evs_volume" and not r["values"].get("kms_id"):
        yield r["address"]


def _ingress(r: dict) -> Iterator[Ingress]:
    """A rule with neither remote_ip_prefix nor remote_group_id admits every source (the provider
    docs); one whose source is known only after apply (`unknown`, from the plan: a group being
    created in the same apply) is a member rule, never "open"."""
    v, unknown = r["values"], r.get("unknown") or {}
    if unknown.get("remote_group_id") or unknown.get("remote_ip_prefix"):
        return
    if (r["type"] == "huaweicloud_networking_secgroup_rule" and v.get("direction") == "ingress"
            and not v.get("remote_group_id")):
        ports = v.get("ports") or (f"{v['port_range_min']}-{v['port_range_max']}"
                                   if v.get("port_range_min") else None)
        world = "::/0" if v.get("ethertype") == "IPv6" else "0.0.0.0/0"
        yield (v.get("remote_ip_prefix") or world, *port_range(ports))



# ECS API error codes (https://support.huaweicloud.com/intl/en-us/api-ecs/ecs_07_0002.html):
# Ecs.0001 "Insufficient ECS quota" (instances, vCPUs and RAM count against it: "evaluate the number
# of ECSs, vCPUs, and memory capacity"); Ecs.0013 "Insufficient EIP quota"; Ecs.0319 "The selected
# flavor has insufficient capacity" (sold out in the AZ: the Migration Center FAQ "Other cloud
# service error codes" calls it "the ECS flavor's capacity is insufficient, it cannot be bought").
CAPACITY_CODES: tuple[CapacityCode, ...] = (
    (r"Ecs\.0319", "capacity", None),
    (r"Ecs\.0001", "quota", "ECS instances, vCPUs and memory (console: My Quotas)"),
    (r"Ecs\.0013", "quota", "EIPs (console: My Quotas)"),
)


def _spec_rules(spec: Any) -> list:
    """huaweicloud_compute_instance `auto_terminate_time` applies to pay-per-use (postPaid) instances
    only (provider docs, v1.97.1); the module's TTL cannot reach a spot node."""
    if spec.ttl is not None and spec.spot.enabled:
        return [("ttl", "Huawei Cloud sets an auto-terminate time only on pay-per-use instances, not on spot",
                 "remove ttl (spot nodes are reclaimed by the cloud; `idle:` still shuts a node down), "
                 "or set spot.enabled: false")]
    return []


def capacity_error(text: str) -> CapacityProblem | None:
    """The capacity/quota refusal in huaweicloud provider text ({"error": {"code": "Ecs.0319", ...}}
    in the job's failure), else None."""
    return match_capacity(text, CAPACITY_CODES, zone_re=r"\b([a-z]{2}-[a-z]+-\d+[a-z])\b",
                          type_re=r"\b([a-z][a-z0-9]*\.[a-z0-9]+\.\d+)\b")


BILLING = {   # what each resource bills as (Cloud.billing): charging_mode spot / prePaid / postPaid
    "huaweicloud_compute_instance": Billed(
        node=("flavor_id",),
        billing=(BillingRule(("charging_mode",), {"spot": "spot", "prePaid": "subscription"}, other="on_demand"),),
        max_price=("spot_maximum_price",), system_disk=(("system_disk_type",), ("system_disk_size",))),
    "huaweicloud_evs_volume": Billed(disk=(("volume_type",), ("size",))),
    "huaweicloud_sfs_turbo": Billed(nas=True),
}


def _in_place(rtype: str, before: dict, after: dict) -> tuple[str, str] | None:
    """huaweicloud_compute_instance: a flavor change stops the server ("You can modify the ECS
    specifications only when the ECS is stopped"; the provider resizes withStopServer) and is
    refused for spot ("Spot ECSs do not support specifications modification", ECS API ecs_02_0209);
    a charging_mode change to or from spot is refused ("spot instances cannot be converted to
    pay-per-use or yearly/monthly", ECS user guide ecs_03_0190)."""
    if rtype != "huaweicloud_compute_instance":
        return None
    modes = (before.get("charging_mode"), after.get("charging_mode"))
    if after.get("charging_mode") and modes[0] != modes[1] and "spot" in modes:
        return "refused", f"charging_mode {modes[0]} -> {modes[1]}: a spot ECS cannot change its billing"
    return node_resize(BILLING, rtype, before, after, "the server is stopped, resized and started",
                       spot_refused="Spot ECSs do not support specifications modification (ECS API)")


CLOUD = Cloud(
    name="huaweicloud",
    title="Huawei Cloud",
    provider_source="huaweicloud/huaweicloud",
    provider_version="~> 1.97",
    credentials=(CredentialSet(label="access key",
                               variables=(("HW_ACCESS_KEY", "OS_ACCESS_KEY"),
                                          ("HW_SECRET_KEY", "OS_SECRET_KEY"))),),
    region_variables=("HW_REGION_NAME", "OS_REGION_NAME"),
    backend_type="obs",
    # The OBS state backend is Terraform's s3 backend: it reads the Huawei keys from AWS_* names.
    backend_credentials=(CredentialSet(label="OBS keys (Huawei keys in AWS_* variables)",
                                       variables=(("AWS_ACCESS_KEY_ID",),
                                                  ("AWS_SECRET_ACCESS_KEY",))),),
    backend=_backend,
    spot_notice_url=None,
    spot_notice_token=None,  # no notice endpoint to read (docs/runs.md, "Spot notices")
    ttl_argument="auto_terminate_time",
    zone_pattern="{region}[a-z]",
    tags=TagRules(max_count=20, key_max=128, value_max=255, reserved_prefixes=("_sys_",),
                  key_pattern=r"[\w\s.:=+\-@]+", value_pattern=r"[\w\s.:/=+\-@]*",
                  allowed_text="letters, digits, spaces and _ . : = + - @ (and / in values)"),
    disks=DiskRules(system_size=(1, 1024), data_size={"*": (10, 32768)},
                    kms_key_argument="kms_id"),  # no key id: the account's evs/default key
    nas=NasRules(name_length=(4, 64), size={"STANDARD": (500, 32768), "PERFORMANCE": (500, 32768)}),
    # Huawei SFS Turbo docs "Mounting a file system": NFSv3 only.
    nfs_mount_options="vers=3,timeo=600,noresvport,nolock,tcp",
    public_ip_node=_public_ip_node,
    unencrypted=_unencrypted,
    ingress_rules=_ingress,
    capacity_error=capacity_error,
    billing=BILLING,
    in_place=_in_place,
    spec_rules=_spec_rules,
    # ECS docs, "Setting Auto-Deletion Time" (auto_terminate_time): at least 30 minutes and at most
    # three years after now; the same plan-to-create margin as Alibaba's release time (30 min).
    limits={"ttl_min_minutes": 30 + 30, "ttl_max_minutes": 3 * 365 * 24 * 60},
    # API Gateway APIGW.0301 "Incorrect IAM authentication information" (Huawei Cloud docs, "API
    # Gateway error codes"); the provider's "no auth means provided" (huaweicloud/config); the OBS
    # backend speaks S3 error codes; IAM "Policy doesn't allow" for missing permissions.
    credential_errors=(
        (r"APIGW\.0301|(?i:no auth means provided)|(?i:failed to authenticate)", "credentials"),
        (r"InvalidAccessKeyId|SignatureDoesNotMatch", "credentials"),
        (r"(?i)policy doesn'?t allow|APIGW\.0302|IAM\.\d{4}", "permission"),
    ),
    price_adapter="trainkit.clouds.prices_huaweicloud",
    offers_adapter="trainkit.clouds.offers_huaweicloud",
    tag_sweeper="trainkit.clouds.huaweicloud_sweep",
    # `endpoints:` reach only trainkit's own calls, never the provider block or the backend: the
    # sweeper's services, by the endpoint host's first label (huaweicloud_sweep: TMS `tms`, ECS `ecs`,
    # VPC `vpc`, EVS `evs`, SFS Turbo `sfs_turbo` for host sfs-turbo, NAT `nat`, KPS `kps`).
    supports_endpoints=True,
    endpoint_keys=("tms", "ecs", "vpc", "evs", "sfs_turbo", "nat", "kps"),
    # OBS docs, "Regions and Endpoints": obs.<region>.myhuaweicloud.com (S3-compatible API).
    object_store=("obs", "https://obs.{region}.myhuaweicloud.com"),
)
