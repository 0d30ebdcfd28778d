"""What the review needs to know about each provider's resources, as data plus small readers.

Each reader takes the planned resources (`{type, index, address, values}`) and yields what it
found. Adding a cloud means adding rows here, not branches elsewhere.
"""

from __future__ import annotations

from typing import Iterable, Iterator

# (role, substrings of the resource type); the first match wins, so nas before storage.
ROLE_KEYWORDS = (
    ("nas", ("efs_", "_nas_", "_cfs_", "sfs_turbo")),
    ("storage", ("ebs_volume", "volume_attach", "ecs_disk", "cbs_storage", "evs_volume")),
    ("compute", ("_instance", "key_pair", "keypair", "placement_group", "deployment_set", "servergroup")),
    ("network", ("",)),
)

# Instance resource type -> how a public IP is asked for (attribute, predicate on its value).
PUBLIC_IP_ATTRS = {
    "aws_instance": ("associate_public_ip_address", lambda v: v is True),
    "alicloud_instance": ("internet_max_bandwidth_out", lambda v: bool(v)),
    "tencentcloud_instance": ("allocate_public_ip", lambda v: v is True),
    "huaweicloud_compute_instance": ("eip_type", lambda v: bool(v)),
}

# Disk resource type -> predicate on its planned values that is true when the disk is NOT encrypted.
# Huawei EVS encrypts only with a KMS key (`kms_id`); the others have a boolean.
UNENCRYPTED = {
    "aws_ebs_volume": lambda v: v.get("encrypted") is False,
    "alicloud_ecs_disk": lambda v: v.get("encrypted") is False,
    "tencentcloud_cbs_storage": lambda v: v.get("encrypt") is False,
    "huaweicloud_evs_volume": lambda v: not v.get("kms_id"),
}

SSH_PORT = 22


def _covers_ssh(lo: int | None, hi: int | None) -> bool:
    if lo is None or lo < 0:  # -1 / absent = all ports
        return True
    return lo <= SSH_PORT <= (hi if hi is not None else lo)


def _port_range(text: str | None) -> tuple[int | None, int | None]:
    """'22', '22/22', '20-30', '22,80', 'ALL', '-1/-1' -> a range that covers 22 or (0, 0)."""
    if not text or str(text).upper() == "ALL" or str(text).startswith("-1"):
        return None, None
    for part in str(text).split(","):
        lo, _, hi = part.strip().replace("/", "-").partition("-")
        if int(lo) <= SSH_PORT <= int(hi or lo):
            return SSH_PORT, SSH_PORT
    return 0, 0


def _rules(r: dict) -> Iterator[tuple[str, int | None, int | None]]:
    """(cidr, port_lo, port_hi) for every ingress rule a resource opens from a CIDR."""
    t, v = r["type"], r["values"]
    if t == "aws_security_group":
        for rule in v.get("ingress") or []:
            for cidr in rule.get("cidr_blocks") or []:
                yield cidr, rule.get("from_port"), rule.get("to_port")
    elif t == "aws_security_group_rule" and v.get("type") == "ingress":
        for cidr in v.get("cidr_blocks") or []:
            yield cidr, v.get("from_port"), v.get("to_port")
    elif t == "aws_vpc_security_group_ingress_rule" and v.get("cidr_ipv4"):
        yield v["cidr_ipv4"], v.get("from_port"), v.get("to_port")
    elif t == "alicloud_security_group_rule" and v.get("type") == "ingress" and v.get("cidr_ip"):
        yield (v["cidr_ip"], *_port_range(v.get("port_range")))
    elif t == "tencentcloud_security_group_rule_set":
        for rule in v.get("ingress") or []:
            if rule.get("cidr_block"):
                yield (rule["cidr_block"], *_port_range(rule.get("port")))
    elif t == "huaweicloud_networking_secgroup_rule" and v.get("direction") == "ingress":
        if not v.get("remote_group_id"):
            ports = v.get("ports") or (f"{v['port_range_min']}-{v['port_range_max']}"
                                       if v.get("port_range_min") else None)
            yield (v.get("remote_ip_prefix") or "0.0.0.0/0", *_port_range(ports))


def ssh_sources(resources: Iterable[dict]) -> Iterator[tuple[str, str]]:
    """(address, cidr) for every rule that lets `cidr` reach port 22."""
    for r in resources:
        for cidr, lo, hi in _rules(r):
            if _covers_ssh(lo, hi):
                yield r["address"], cidr


def public_ip_nodes(resources: Iterable[dict]) -> Iterator[str]:
    """Addresses of worker instances (index > 0) that get a public IP."""
    for r in resources:
        rule = PUBLIC_IP_ATTRS.get(r["type"])
        if rule and (r["index"] or 0) > 0 and rule[1](r["values"].get(rule[0])):
            yield r["address"]


def disks_unencrypted(resources: Iterable[dict]) -> Iterator[str]:
    for r in resources:
        unencrypted = UNENCRYPTED.get(r["type"])
        if unencrypted and unencrypted(r["values"]):
            yield r["address"]
        if r["type"] == "aws_instance":
            for dev in r["values"].get("root_block_device") or []:
                if dev.get("encrypted") is False:
                    yield r["address"] + " (root volume)"
