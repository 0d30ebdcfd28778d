"""What the review reads from planned resources: roles by resource type, plus the cloud rooms'
readers (ingress rules, public IPs, unencrypted disks). No cloud is named here; each room
(`trainkit.clouds.<cloud>`) reads its own provider's resources.

Each reader takes the planned resources (`{type, index, address, values}`) and yields what it
found. Adding a cloud means adding a room, not branches here.
"""

from __future__ import annotations

from typing import Iterable, Iterator

from trainkit import clouds

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


def ssh_sources(cloud: str, resources: Iterable[dict]) -> Iterator[tuple[str, str]]:
    """(address, cidr) for every rule that lets `cidr` reach port 22."""
    room = clouds.get(cloud)
    for r in resources:
        for cidr, lo, hi in room.ingress_rules(r):
            if _covers_ssh(lo, hi):
                yield r["address"], cidr


def public_ip_nodes(cloud: str, resources: Iterable[dict]) -> Iterator[str]:
    """Addresses of resources that give a worker (node index > 0) a public IP."""
    room = clouds.get(cloud)
    for r in resources:
        node = room.public_ip_node(r)
        if node is not None and node > 0:
            yield r["address"]


def disks_unencrypted(cloud: str, resources: Iterable[dict]) -> Iterator[str]:
    """Addresses (with a note for root volumes) of disks that will not be encrypted."""
    room = clouds.get(cloud)
    for r in resources:
        yield from room.unencrypted(r)
