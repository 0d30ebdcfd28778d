"""`hosts`: machines the user already has (on-premise, hybrid cloud), reached over SSH.

A room like the clouds' (SkyPilot's sky/clouds/ssh.py is one too): what differs is data. Nothing
is provisioned (no module, no catalog, no state backend); the nodes are the spec's `hosts:` (those
without `spare: true`), reached as root unless the spec says otherwise, with a key the user has
authorised already; a lost host is replaced by a spare host and fenced (it is not terminated, so
its processes are killed when it answers again). ttl/idle shut a host down with the node timer;
shared storage is the share the user mounted (trainkit creates none).
"""

from __future__ import annotations

from typing import Any

from trainkit.clouds.base import NODES_HOSTS, REPLACE_SPARE, Cloud
from trainkit.util import grammar


def _read_rules(s: Any) -> list[str]:
    """What `cloud: hosts` refuses as the spec is read; each string names its field first."""
    out: list[str] = []
    if not s.hosts:
        out.append("hosts: list at least one host (name, address) for cloud: hosts")
    names = [h.name for h in s.hosts]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        out.append(f"hosts: duplicate host names {dupes}")
    active = len([h for h in s.hosts if not h.spare])
    if s.hosts and not active:
        out.append("hosts: every host is a spare; mark at least one without `spare: true`")
    if "nodes" in s.model_fields_set and s.nodes != active:
        out.append(f"nodes: {s.nodes} but {active} active hosts are listed; drop `nodes`")
    return out + host_problems(s)


def host_problems(s: Any) -> list[str]:
    """`hosts`: each (address, port) once; no NAS that trainkit would have to create."""
    out: list[str] = []
    seen: dict[tuple[str, int], int] = {}
    for i, h in enumerate(s.hosts):
        key = (grammar.address_key(h.address), h.port)  # one IPv6 host, two spellings: one host
        if key in seen:
            out.append(f"hosts[{i}].address: {h.address}:{h.port} is also hosts[{seen[key]}]; each "
                       "host needs its own address (or port)")
        seen.setdefault(key, i)
    nas = s.storage.nas
    for field in ("type", "size_gb"):
        if getattr(nas, field) is not None:
            out.append(f"storage.nas.{field}: trainkit creates no NAS on cloud: hosts; it uses the "
                       f"share you mounted at storage.nas.mount_point. Remove `{field}`")
    return out


CLOUD = Cloud(
    name="hosts",
    title="machines over SSH",
    provider_source="",
    provider_version="",
    has_module=False,
    has_catalog=False,
    node_source=NODES_HOSTS,
    replacement=REPLACE_SPARE,
    fences_lost_nodes=True,
    default_ssh_user="root",
    installs_key=False,
    read_rules=_read_rules,
)
