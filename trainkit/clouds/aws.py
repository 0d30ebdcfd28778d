"""AWS: what trainkit's Python knows about it (provider hashicorp/aws ~> 5.100).

Sources: the AWS provider and SDK credential chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or
AWS_PROFILE with ~/.aws/credentials), Terraform's s3 backend, EC2 docs "Spot Instance interruption
notices" (`spot/instance-action`, IMDSv2). EC2 has no release-at argument: TTL uses the node-side
timer with `instance_initiated_shutdown_behavior = "terminate"`. Tags: AWS General Reference,
"Tagging your AWS resources" (50 per resource, key 1-128, value 0-256, `aws:` reserved; characters
common to all services, which EFS enforces). EBS sizes: EC2 user guide "Amazon EBS volume types"
(gp2/gp3 1-16384 GiB, io2 4-65536 GiB, st1 125-16384 GiB).
"""

from __future__ import annotations

import re
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
)

_KEYS = (
    CredentialSet(label="access key", variables=(("AWS_ACCESS_KEY_ID",), ("AWS_SECRET_ACCESS_KEY",))),
    CredentialSet(label="profile", variables=(("AWS_PROFILE",),),
                  files=("~/.aws/credentials", "~/.aws/config")),
)


def _backend(b: Any, region: str, prefix: str,
             endpoints: dict[str, str]) -> tuple[str, dict[str, Any], list[str]]:
    args: dict[str, Any] = {"bucket": b.bucket, "key": f"{prefix}/{b.key}", "region": region,
                            "encrypt": b.encrypt}
    if b.dynamodb_table:
        args["dynamodb_table"] = b.dynamodb_table
    else:
        args["use_lockfile"] = True  # S3-native lock object (Terraform >= 1.10)
    args.update(_custom_s3_endpoints(b.endpoint, endpoints))
    return "s3", args, ["AWS S3; credentials from the usual AWS_* variables or profile."]


def _custom_s3_endpoints(backend_endpoint: str | None, endpoints: dict[str, str]) -> dict[str, Any]:
    """s3 backend arguments for custom endpoints (an emulator or an S3-compatible store); {} for AWS.

    The backend checks its credentials against STS and IAM: with custom endpoints those go to the
    same place, addressing is path-style and the AWS-only checks are skipped (Terraform docs,
    "Backend Type: s3", `endpoints`, `use_path_style`, `skip_*`). Credentials still come from the
    environment.
    """
    s3 = backend_endpoint or endpoints.get("s3")
    if not s3:
        return {}
    urls = {"s3": s3, **{k: endpoints[k] for k in ("sts", "iam") if k in endpoints}}
    return {"endpoints": urls, "use_path_style": True, "skip_credentials_validation": True,
            "skip_region_validation": True, "skip_requesting_account_id": True,
            "skip_metadata_api_check": True}


def _public_ip_node(r: dict) -> int | None:
    """The module gives a node its public IP through `aws_eip.node` (Name tag `<name>-node-<i>`);
    `associate_public_ip_address` would do it at launch."""
    v = r["values"]
    if r["type"] == "aws_eip":
        match = re.search(r"-node-(\d+)$", str((v.get("tags") or {}).get("Name", "")))
        return int(match.group(1)) if match else None
    if r["type"] == "aws_instance" and v.get("associate_public_ip_address") is True:
        return index_of(r)
    return None


# "Error codes for the Amazon EC2 API" (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/
# errors-overview.html): InsufficientInstanceCapacity "There is not enough capacity to fulfill your
# request... try launching an instance by selecting different instance types... or by not specifying
# an Availability Zone"; InsufficientCapacity (the same for other resources); Unsupported "The
# specified instance type is not supported in the requested Availability Zone"; InstanceLimitExceeded
# "You've reached the limit on the number of instances you can run concurrently"; VcpuLimitExceeded
# "You've reached the limit on the number of vCPUs ... assigned to the running instances" (Service
# Quotas, "Running On-Demand ... instances"); MaxSpotInstanceCountExceeded (the Spot request limit).
CAPACITY_CODES: tuple[CapacityCode, ...] = (
    ("InsufficientInstanceCapacity", "capacity", None),
    ("InsufficientCapacity", "capacity", None),
    ("Unsupported", "capacity", None),
    ("InstanceLimitExceeded", "quota", "On-Demand instances of this type (EC2 instance limit)"),
    ("VcpuLimitExceeded", "quota", "vCPUs of running On-Demand instances (Service Quotas, EC2, "
                                   "'Running On-Demand ... instances')"),
    ("MaxSpotInstanceCountExceeded", "quota", "vCPUs of Spot Instance requests (Service Quotas, EC2, "
                                              "'All ... Spot Instance Requests')"),
)


# aws_ebs_volume / root_block_device `kms_key_id`: "The ARN for the KMS encryption key" (provider
# docs); a bare key id or alias is refused by EC2 only at apply. Only a key ARN (AWS KMS docs, "Key
# identifiers (KeyId)"): EC2 accepts an alias ARN but reads back the key's ARN, and kms_key_id is
# ForceNew, so every plan would replace every data volume (terraform-provider-aws #2407, #7407).
KMS_ARN = r"arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key/[A-Za-z0-9-]+"
KMS_ALIAS_ARN = r"arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:alias/[A-Za-z0-9/_-]+"


def _spec_rules(spec: Any) -> list:
    key = spec.storage.data_disk.kms_key_id
    fix = ("write the key's ARN, arn:aws:kms:<region>:<account>:key/<key id> "
           "(`aws kms describe-key --key-id ...` prints it)")
    if key and re.fullmatch(KMS_ALIAS_ARN, key):
        return [("storage.data_disk.kms_key_id", f"{key!r} is an alias ARN: EC2 records the key's ARN instead, "
                 "so every later plan would replace every data volume (kms_key_id cannot change in place)", fix)]
    if key and not re.fullmatch(KMS_ARN, key):
        return [("storage.data_disk.kms_key_id", f"{key!r} is not a KMS key ARN (EC2 takes the ARN, not a key "
                 "id or alias name)", fix)]
    return []


def capacity_error(text: str) -> CapacityProblem | None:
    """The capacity/quota refusal in AWS provider text ("api error InsufficientInstanceCapacity: We
    currently do not have sufficient g5.12xlarge capacity in the Availability Zone you requested
    (us-east-1a)..."), else None."""
    if "Unsupported" in text and "Availability Zone" not in text:
        text = text.replace("Unsupported", "")  # Unsupported is a zone refusal only with that wording
    return match_capacity(text, CAPACITY_CODES,
                          zone_re=r"Availability Zone you requested \(([a-z0-9-]+)\)|"
                                  r"requested Availability Zone \(([a-z0-9-]+)\)",
                          type_re=r"sufficient ([a-z0-9-]+\.[a-z0-9]+) capacity|instance type \(([a-z0-9-]+\.[a-z0-9]+)\)")


def _import_id(kind: str, values: dict) -> str | None:
    """The import ID of a planned security group rule (see Cloud.import_id); None for other types.

    AuthorizeSecurityGroupIngress/Egress take no idempotency token: a retry after a lost answer
    fails with `InvalidPermission.Duplicate` ("The specified rule already exists"; "Error codes for
    the Amazon EC2 API"), and hashicorp/aws fails the create ("A duplicate Security Group rule was
    found"). `aws_security_group_rule` import IDs are
    SECURITYGROUPID_TYPE_PROTOCOL_FROMPORT_TOPORT_SOURCE[_SOURCE]*, a source being a CIDR, a prefix
    list, a security group ID or `self` (the resource's import documentation; hashicorp/aws 5.x
    resourceSecurityGroupRuleImport).
    """
    if kind != "aws_security_group_rule":
        return None
    sources = [*(values.get("cidr_blocks") or []), *(values.get("ipv6_cidr_blocks") or []),
               *(values.get("prefix_list_ids") or [])]
    if values.get("self"):
        sources.append("self")
    elif values.get("source_security_group_id"):
        sources.append(values["source_security_group_id"])
    group, protocol = values.get("security_group_id"), values.get("protocol")
    if not (sources and group and protocol and values.get("type") in ("ingress", "egress")):
        return None
    return "_".join([group, values["type"], str(protocol), str(values.get("from_port") or 0),
                     str(values.get("to_port") or 0), *sources])


def _unencrypted(r: dict) -> Iterator[str]:
    v = r["values"]
    if r["type"] == "aws_ebs_volume" and v.get("encrypted") is False:
        yield r["address"]
    if r["type"] == "aws_instance":
        if any(d.get("encrypted") is False for d in v.get("root_block_device") or []):
            yield r["address"] + " (root volume)"


def _ingress(r: dict) -> Iterator[Ingress]:
    t, v = r["type"], r["values"]
    if t == "aws_security_group":
        for rule in v.get("ingress") or []:
            for cidr in [*(rule.get("cidr_blocks") or []), *(rule.get("ipv6_cidr_blocks") or [])]:
                yield cidr, rule.get("from_port"), rule.get("to_port")
    elif t == "aws_security_group_rule" and v.get("type") == "ingress":
        for cidr in [*(v.get("cidr_blocks") or []), *(v.get("ipv6_cidr_blocks") or [])]:
            yield cidr, v.get("from_port"), v.get("to_port")
    elif t == "aws_vpc_security_group_ingress_rule":
        for cidr in (v.get("cidr_ipv4"), v.get("cidr_ipv6")):
            if cidr:
                yield cidr, v.get("from_port"), v.get("to_port")



BILLING = {   # what each resource bills as (Cloud.billing): aws_instance is spot when its lifecycle or
    # market type says so, with its root volume as the system disk
    "aws_instance": Billed(
        node=("instance_type",),
        billing=(BillingRule(("instance_lifecycle",), {"spot": "spot"}),
                 BillingRule(("instance_market_options", 0, "market_type"), {"spot": "spot"})),
        billing_keys=("instance_market_options", "instance_lifecycle"),
        max_price=("instance_market_options", 0, "spot_options", 0, "max_price"),
        system_disk=(("root_block_device", 0, "volume_type"), ("root_block_device", 0, "volume_size"))),
    "aws_ebs_volume": Billed(disk=(("type",), ("size",))),
    "aws_efs_file_system": Billed(nas=True),
}


def _in_place(rtype: str, before: dict, after: dict) -> tuple[str, str] | None:
    """aws_instance: a type change stops the instance (the provider stops it, calls
    ModifyInstanceAttribute and starts it); a one-time Spot Instance cannot be stopped (EC2 User
    Guide, "Stop a Spot Instance": only persistent requests can be stopped), so it is replaced."""
    if rtype != "aws_instance":
        return None
    return node_resize(BILLING, rtype, before, after, "EC2 stops the instance, changes its type and starts it",
                       spot_refused="a one-time Spot Instance cannot be stopped to change its type (EC2)")


def _replace_note(rc: dict, plan: dict) -> str | None:
    """aws_instance moved out of the nodes' subnet into the public one that this plan creates: a
    head node of a cluster applied before the module put the head in a public subnet of its own
    whenever public_ip = "head" (nat.tf; before, only with nat_gateway): subnet_id is ForceNew, so
    the head is replaced once (a single-node cluster loses its only node)."""
    paths = [p[0] for p in rc["change"].get("replace_paths") or [] if p]
    if rc["type"] != "aws_instance" or "subnet_id" not in paths:
        return None
    module = rc.get("module_address", "")
    new_public = any(o.get("module_address", "") == module and o["type"] == "aws_subnet" and o.get("name") == "public"
                     and o["change"]["actions"] == ["create"] for o in plan.get("resource_changes", []))
    if not new_public:
        return None
    return ("the head node moves to the cluster's public subnet, created by this plan (trainkit's AWS module "
            "keeps the head there with public_ip: head, so that switching nat_gateway replaces no node; a "
            "cluster applied before keeps it in the nodes' subnet): it is replaced once, its data volume stays")


CLOUD = Cloud(
    name="aws",
    title="AWS",
    provider_source="hashicorp/aws",
    provider_version="~> 5.100",
    credentials=_KEYS,
    region_variables=("AWS_REGION", "AWS_DEFAULT_REGION"),
    backend_type="s3",
    backend_credentials=_KEYS,
    backend=_backend,
    spot_notice_url="http://169.254.169.254/latest/meta-data/spot/instance-action",
    # The module sets metadata_options.http_tokens = "required": IMDSv2 only (EC2 user guide, "Use
    # the Instance Metadata Service to access instance metadata": PUT /latest/api/token, then GET
    # with the token; a GET without one is 401).
    spot_notice_token=MetadataToken("http://169.254.169.254/latest/api/token",
                                    "X-aws-ec2-metadata-token-ttl-seconds", "X-aws-ec2-metadata-token"),
    ttl_argument=None,
    zone_pattern="{region}[a-z]",
    tags=TagRules(max_count=50, key_max=128, value_max=256, reserved_prefixes=("aws:",),
                  key_pattern=r"[\w\s.:/=+\-@]+", value_pattern=r"[\w\s.:/=+\-@]*",
                  allowed_text="letters, digits, spaces and _ . : / = + - @"),
    # Key pair, security group and placement group names take 255 characters: no limit bites.
    disks=DiskRules(system_size=(8, 16384),
                    data_size={"gp3": (1, 16384), "gp2": (1, 16384), "io2": (4, 65536),
                               "st1": (125, 16384)},
                    kms_key_argument="kms_key_id"),
    # EFS recommended NFS options (AWS EFS user guide, "Mounting with NFS").
    nfs_mount_options="nfsvers=4.1,rsize=1048576,wsize=1048576,hard,timeo=600,retrans=2,noresvport,_netdev",
    public_ip_node=_public_ip_node,
    unencrypted=_unencrypted,
    ingress_rules=_ingress,
    in_place=_in_place,
    replace_note=_replace_note,
    price_adapter="trainkit.clouds.prices_aws",
    offers_adapter="trainkit.clouds.offers_aws",
    shutdown_terminates=True,  # aws_instance.instance_initiated_shutdown_behavior = "terminate"
    # None: boto3 resolves Amazon S3's own endpoint, honouring AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL.
    object_store=("s3", None),
    supports_endpoints=True,
    tag_sweeper="trainkit.clouds.aws_sweep",
    capacity_error=capacity_error,
    duplicate_error=r"InvalidPermission\.Duplicate",
    import_id=_import_id,
    billing=BILLING,
    spec_rules=_spec_rules,
    # AWS SDK / provider messages: aws-sdk-go-v2 credential chain ("no valid credential sources",
    # the IMDS fallback's 403), STS/EC2/S3 error codes (AWS docs "Common Errors" per API).
    credential_errors=(
        (r"(?i)no valid credential sources", "credentials"),
        (r"(?i)ec2imds.*(403|401)|failed to refresh cached credentials", "credentials"),
        (r"InvalidClientTokenId|SignatureDoesNotMatch|InvalidAccessKeyId|AuthFailure|ExpiredToken",
         "credentials"),
        (r"UnauthorizedOperation|AccessDenied|is not authorized to perform", "permission"),
    ),
)
