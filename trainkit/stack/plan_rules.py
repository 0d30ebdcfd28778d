"""What the review reads from planned resources: roles by resource type, plus the cloud rooms'
readers (ingress rules, public IPs, unencrypted disks). No cloud is named here; each room
(`trainkit.clouds.<cloud>`) reads its own provider's resources.

Each reader takes the planned resources (`{type, index, address, values}`) and yields what it
found. Adding a cloud means adding a room, not branches here.
"""

from __future__ import annotations

import calendar
import json
import re
import time
from typing import Iterable, Iterator

from trainkit.clouds import Cloud

# (role, substrings of the resource type); the first match wins, so nas before storage.
ROLE_KEYWORDS = (
    ("nas", ("efs_", "_nas_", "_cfs_", "sfs_turbo")),
    ("storage", ("ebs_volume", "volume_attach", "ecs_disk", "cbs_storage", "evs_volume")),
    ("compute", ("_instance", "key_pair", "keypair", "placement_group", "deployment_set", "servergroup")),
    ("network", ("",)),
)

SSH_PORT = 22


def _covers_ssh(lo: int | None, hi: int | None) -> bool:
    if lo is None or lo < 0:  # -1 / absent = all ports
        return True
    return lo <= SSH_PORT <= (hi if hi is not None else lo)


def ssh_sources(room: Cloud, resources: Iterable[dict]) -> Iterator[tuple[str, str]]:
    """(address, cidr) for every rule that lets `cidr` reach port 22."""
    for r in resources:
        for cidr, lo, hi in room.ingress_rules(r):
            if _covers_ssh(lo, hi):
                yield r["address"], cidr


def public_ip_nodes(room: Cloud, resources: Iterable[dict]) -> Iterator[str]:
    """Addresses of resources that give a worker (node index > 0) a public IP."""
    for r in resources:
        node = room.public_ip_node(r)
        if node is not None and node > 0:
            yield r["address"]


def disks_unencrypted(room: Cloud, resources: Iterable[dict]) -> Iterator[str]:
    """Addresses (with a note for root volumes) of disks that will not be encrypted."""
    for r in resources:
        yield from room.unencrypted(r)


def disruptions(room: Cloud, plan: dict) -> dict[str, tuple[str, str]]:
    """address -> ("refused" | "stops", cause) of every in-place update in `plan` (terraform show
    -json) that the cloud refuses or makes by stopping the node (the room's `in_place`), and
    ("moves", cause) of every replacement the room's module makes of its own accord (`replace_note`)."""
    out = {}
    for rc in plan.get("resource_changes", []):
        change = rc["change"]
        if rc.get("mode") != "data" and set(change["actions"]) == {"create", "delete"}:
            note = room.replace_note(rc, plan)
            if note:
                out[rc["address"]] = ("moves", note)
        if rc.get("mode") == "data" or change["actions"] != ["update"]:
            continue
        found = room.in_place(rc["type"], change.get("before") or {}, change.get("after") or {})
        if found:
            out[rc["address"]] = found
    return out


def refused_in_place(room: Cloud, plan: dict) -> dict[str, str]:
    """address -> cause of the in-place updates the cloud refuses: plan them replaced instead."""
    return {a: cause for a, (verdict, cause) in disruptions(room, plan).items() if verdict == "refused"}


def storage_losses(room: Cloud, plan: dict) -> list[str]:
    """Addresses of the disks and shared file systems `plan` destroys or replaces, whose data is
    lost with them (what the room's `billed` calls a disk or the nas). The disk `data[i]` of a
    node `node[i]` the plan creates (none ran before: an apply refused half way made the disk)
    holds nothing yet and is left out."""
    new_nodes = set()
    for rc in plan.get("resource_changes", []):
        part = _NODE_PARTS.search(rc["address"])
        if part and part.group(1) == "node" and rc["change"]["actions"] == ["create"]:
            new_nodes.add(int(part.group(2)))
    out = []
    for rc in plan.get("resource_changes", []):
        if rc.get("mode") == "data" or "delete" not in rc["change"]["actions"]:
            continue
        billed = room.billed({"type": rc["type"], "values": rc["change"].get("before") or {}}) or {}
        part = _NODE_PARTS.search(rc["address"])
        if billed.get("disk") and part and int(part.group(2)) in new_nodes:
            continue
        if billed.get("disk") or billed.get("nas"):
            out.append(rc["address"])
    return sorted(out)


# Every module names an instance `<type>.node[i]`, its data disk and attachment `<type>.data[i]`, and
# what one more zone needs (a subnet, its NAT and NAS rules) `<type>.zone["<zone>"]` (the module
# interface; cluster/replace.py).
_NODE_PARTS = re.compile(r"\.(node|data|born)\[(\d+)\]$")
# A node's creation time (`terraform_data.born[i]`, where the cloud releases a node at a time counted
# from it: the alicloud and huaweicloud modules) is replaced with its node.
_INSTANCE = re.compile(r"^(.*\.)[a-z0-9_]*instance\.node\[(\d+)\]$")


def with_born(addresses: Iterable[str], present: Iterable[str]) -> list[str]:
    """`addresses` to `-replace`, plus `terraform_data.born[i]` of the same module beside every
    instance `...instance.node[i]` among them where `present` (the state's addresses) holds it, so
    a replaced node's release time counts from its own creation."""
    out, held = list(addresses), set(present)
    for a in list(out):
        m = _INSTANCE.match(a)
        born = m and f"{m.group(1)}terraform_data.born[{m.group(2)}]"
        if born and born in held and born not in out:
            out.append(born)
    return out
_ZONE_PART = re.compile(r'\.zone\["[^"]+"\]$')


def beyond_recovery(plan: dict, indexes: list[int]) -> list[str]:
    """"<action> <address>" of every change in `plan` that replacing the nodes `indexes` does not
    need: anything but their own node and data resources, the creation of another zone's parts,
    and the deletion of a zone's parts that no other node uses (a refused try's subnet, left
    behind when the replacement moves on to the next zone). A non-empty answer means the
    configuration changed since the last apply."""
    out = []
    others = _other_nodes(plan, indexes)
    for rc in plan.get("resource_changes", []):
        actions = rc["change"]["actions"]
        if rc.get("mode") == "data" or actions in (["no-op"], ["read"]):
            continue
        own = _NODE_PARTS.search(rc["address"])
        if own and int(own.group(2)) in indexes:
            continue
        if _ZONE_PART.search(rc["address"]) and (actions == ["create"] or (
                actions == ["delete"] and not _used_by(rc["change"].get("before") or {}, others))):
            continue
        out.append(f"{'replace' if len(actions) > 1 else actions[0]} {rc['address']}")
    return sorted(out)


def _other_nodes(plan: dict, indexes: list[int]) -> list[str]:
    """The prior state's instances (`<type>.node[i]`) other than `indexes`, each as its values' text."""
    out, stack = [], [((plan.get("prior_state") or {}).get("values") or {}).get("root_module") or {}]
    while stack:
        module = stack.pop()
        stack.extend(module.get("child_modules") or [])
        for r in module.get("resources") or []:
            own = _NODE_PARTS.search(r.get("address", ""))
            if own and own.group(1) == "node" and int(own.group(2)) not in indexes:
                out.append(json.dumps(r.get("values") or {}))
    return out


def _used_by(before: dict, nodes: list[str]) -> bool:
    """Whether a zone part (its values before the change) is named by any of `nodes`: its id (a
    subnet the instance sits in) or the subnet it ties to (a route table association)."""
    ids = [v for k, v in before.items() if k in ("id", "subnet_id", "vswitch_id") and isinstance(v, str) and v]
    return any(f'"{i}"' in node for i in ids for node in nodes)


def release_times(room: Cloud, resources: Iterable[dict]) -> list[float]:
    """The release times (epoch seconds) the nodes among `resources` ({type, values}) carry in the
    room's ttl_argument (RFC 3339 UTC, e.g. alicloud auto_release_time "2026-12-05T03:59:00Z");
    [] where the room has none or no node carries one."""
    out = []
    for r in resources if room.ttl_argument else []:
        value = (r.get("values") or {}).get(room.ttl_argument) if (room.billed(r) or {}).get("node") else None
        if isinstance(value, str) and value:
            try:
                out.append(calendar.timegm(time.strptime(value.replace("Z", ""), "%Y-%m-%dT%H:%M:%S")))
            except ValueError:
                continue
    return out


def release_moves(room: Cloud, plan: dict) -> list[tuple[str, float, float | None]]:
    """(address, release time before, after) in epoch seconds of every node that `plan` keeps
    (no-op or in-place update) and that carries a release time in the room's ttl_argument; `after`
    is None where the plan clears it (ttl removed) and equals `before` where it stays."""
    out = []
    for rc in plan.get("resource_changes", []):
        change = rc["change"]
        if rc.get("mode") == "data" or change["actions"] not in (["no-op"], ["update"]):
            continue
        held = release_times(room, [{"type": rc["type"], "values": change.get("before") or {}}])
        if held:
            after = release_times(room, [{"type": rc["type"], "values": change.get("after") or {}}])
            out.append((rc["address"], held[0], after[0] if after else None))
    return out
