"""The spec rules that depend on the target, read from its room (trainkit.clouds): where a cloud
needs a region, a zone and admin CIDRs, the cloud-only fields that do nothing on a target with no
catalog, custom endpoints, the room's own `read_rules`, and its capabilities (safety nets, shared
storage, node limits). spec/schema.py's validator calls `problems(spec, spec.room)`; no target is
named here.
"""

from __future__ import annotations

import re
from typing import Any

from trainkit import clouds
from trainkit.clouds import Cloud
from trainkit.clouds.base import NODES_SCHEDULER
from trainkit.spec import controller_block
from trainkit.spec.slurm_block import PROVISIONED_FIELDS

# An endpoint trainkit calls itself: scheme, host (a name of at most 253 characters, RFC 1035 2.3.4, or an
# address, IPv6 in brackets) and an optional port (1-65535), nothing after it: the SDKs take a host and
# would put a path or a query in the wrong place.
_ENDPOINT_URL = re.compile(r"https?://(?:[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])"
                           r"(?::(\d{1,5}))?")
_PORT_MAX = 65535


def _endpoint_problems(endpoints: dict[str, str], room: Cloud) -> list[str]:
    """`endpoints:` of a room whose endpoints only trainkit's own API calls use (room.endpoint_keys):
    known keys, each an http(s)://host[:port] URL. Each string names its field first."""
    out = []
    for key, value in endpoints.items():
        if key not in room.endpoint_keys:
            out.append(f"endpoints.{key}: trainkit calls no {room.title} API by that name; the keys are "
                       f"{', '.join(room.endpoint_keys)}")
        elif not isinstance(value, str) or not (url := _ENDPOINT_URL.fullmatch(value)) \
                or not 1 <= int(url.group(1) or 1) <= _PORT_MAX:
            out.append(f"endpoints.{key}: {value!r} is not an endpoint; give http(s)://host[:port], "
                       "e.g. http://127.0.0.1:8080")
    return out


def problems(s: Any, room: Cloud) -> list[str]:
    """What the target `room` refuses in spec `s` (a ClusterSpec), read from its capabilities and
    rules; each string names its field first."""
    out = _catalog_problems(s, room) if room.has_catalog else _no_catalog_problems(s, room)
    out += room.read_rules(s)
    out += _scheduler_problems(s, room)
    out += controller_block.problems(s, room)
    if not room.safety_nets and (s.ttl or s.idle):
        out.append(f"{'ttl' if s.ttl else 'idle'}: the {s.cloud} target is {room.title}; trainkit will not "
                   "shut it down (ttl and idle are for the targets it provisions or reaches over SSH)")
    if not room.shared_storage and s.storage.nas.enabled:
        out.append(f"storage.nas.enabled: the {s.cloud} target mounts no shared filesystem and keeps runs "
                   "in its workspace; set storage.nas.enabled: false")
    low, high = room.node_limits
    if not low <= s.nodes <= (high or s.nodes):
        out.append(f"nodes: {room.nodes_limit_text or f'{room.title} takes {low} to {high} nodes'}")
    return out


def _scheduler_problems(s: Any, room: Cloud) -> list[str]:
    """`scheduler:` where the room lets trainkit install one (Cloud.schedulers); `slurm:` on a
    scheduler's target, or on a cluster with `scheduler: slurm` holding only what the cluster
    does not give (PROVISIONED_FIELDS)."""
    out: list[str] = []
    if s.scheduler != "none" and s.scheduler not in room.schedulers:
        out.append(f"scheduler: trainkit installs no scheduler on {room.title} (cloud: {s.cloud}); "
                   "remove `scheduler` (it serves the targets trainkit provisions or reaches over "
                   f"SSH: {', '.join(clouds.scheduler_targets(s.scheduler))})")
    elif s.slurm is not None and s.scheduler == "slurm":
        extra = sorted(set(s.slurm.model_fields_set) - set(PROVISIONED_FIELDS))
        out += [f"slurm.{field}: with scheduler: slurm the cluster gives it (the head node is the login "
                f"node, the shared storage the workdir); a `slurm:` block here may set only "
                f"{', '.join(PROVISIONED_FIELDS)}" for field in extra]
    elif s.slurm is not None and room.node_source != NODES_SCHEDULER:
        out.append(f"slurm: only for a target whose nodes a scheduler allocates (cloud: slurm) or a "
                   f"cluster with scheduler: slurm, not {s.cloud}; remove `slurm`")
    if s.scheduler == "slurm" and s.scheduler in room.schedulers and not s.storage.nas.enabled:
        out.append("storage.nas.enabled: scheduler: slurm keeps its jobs' folders on the cluster's "
                   "shared storage; set storage.nas.enabled: true")
    return out


def _catalog_problems(s: Any, room: Cloud) -> list[str]:
    """A target with a catalog (a cloud): where, what and how it is reached."""
    out: list[str] = []
    for field in ("region", "zone"):
        if not getattr(s, field):
            out.append(f"{field}: required for cloud {s.cloud}")
    if not s.network.admin_cidrs:
        out.append("network.admin_cidrs: required for cloud targets (the CIDRs allowed to "
                   "SSH in, e.g. [203.0.113.0/24])")
    if not s.instance.type and not s.instance.gpu and not s.instance.gpus_per_node:
        out.append("instance: give `type` or requirements (gpu, gpus_per_node)")
    if s.hosts:
        out.append("hosts: only for cloud: hosts")
    if room.spot_needs_max_price and s.spot.enabled and s.spot.max_price is None:
        out.append(f"spot.max_price: {room.title} spot instances need a max price per hour")
    if s.backend.type != "local" and s.backend.type != room.backend_type:
        out.append(f"backend.type: {s.backend.type!r} does not fit cloud {s.cloud}; use "
                   f"{room.backend_type!r} or 'local'")
    if s.endpoints and not room.supports_endpoints:
        out.append(f"endpoints: custom API endpoints are not supported for {room.title}")
    elif s.endpoints and room.endpoint_keys:
        out += _endpoint_problems(s.endpoints, room)
    if s.spot.fallback != "none" and not s.spot.enabled:
        out.append("spot.fallback: a fallback from spot needs spot.enabled: true (or drop spot.fallback)")
    return out


def _no_catalog_problems(s: Any, room: Cloud) -> list[str]:
    """A target with nothing to provision (hosts, local): the cloud-only fields do nothing there."""
    out: list[str] = []
    if s.spot.enabled:
        out.append(f"spot.enabled: spot instances need a cloud target, not {s.cloud}")
    served = ", ".join(clouds.terraform_targets())
    for field, given in (("region", s.region), ("zone", s.zone or s.zone_candidates or s.zone_auto),
                         ("spot.fallback", s.spot.fallback != "none"), ("spot.max_price", s.spot.max_price)):
        if given:  # accepted and ignored before: say it does nothing here
            out.append(f"{field}: does nothing on {s.cloud} (it serves the cloud targets: {served}); remove it")
    if s.backend.type != "local" and not room.has_module:
        out.append(f"backend.type: {s.cloud} has no terraform state; remove `backend`")
    if s.endpoints:
        out.append(f"endpoints: custom API endpoints need a cloud target, not {s.cloud}")
    return out
