"""Safety nets against a forgotten cluster: `ttl` (release at a deadline) and `idle` (stop an
unused node). Pure: parses durations and says, per cloud, what will happen.

Where the cloud has a release-at argument (the room's `ttl_argument`: Alibaba `auto_release_time`,
Huawei `auto_terminate_time`) Terraform sets it; elsewhere the `guard` Ansible role installs a
node-side timer that shuts the node down (AWS: `instance_initiated_shutdown_behavior = "terminate"`
turns that shutdown into a termination). `idle` is always node-side (the guard role).
"""

from __future__ import annotations

import re

from trainkit.errors import InputError

_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([mhd])\s*")  # used with fullmatch
_UNIT_MINUTES = {"m": 1, "h": 60, "d": 1440}
# Any ttl/idle longer than ten years is a typo, not a safety net; the bound also keeps the
# deadline a date that status can print (Python's time functions stop at year 9999).
MAX_MINUTES = 3650 * 1440


def parse_minutes(text: str) -> float:
    """'90m' / '12h' / '2d' -> minutes. ValueError with the accepted forms otherwise."""
    m = _DURATION.fullmatch(str(text))
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"{text!r} is not a duration; write it like 90m, 12h or 2d")
    minutes = float(m.group(1)) * _UNIT_MINUTES[m.group(2)]
    if minutes < 1:  # the node-side guard counts whole minutes: under one would mean "never"
        raise ValueError(f"{text!r} is under a minute; the shortest ttl/idle is 1m")
    if minutes > MAX_MINUTES:
        raise ValueError(f"{text!r} is more than {MAX_MINUTES // 1440}d; write the time you mean, "
                         "like 12h or 7d")
    return minutes


def ttl_hours(spec) -> float | None:
    return None if spec.ttl is None else parse_minutes(spec.ttl) / 60


def idle_minutes(spec) -> float | None:
    return None if spec.idle is None else parse_minutes(spec.idle)


def check_ttl(spec) -> None:
    """InputError when the cloud's release-at argument cannot take a TTL this short."""

    room = _room(spec)
    least = (room.limits.get("ttl_min_minutes") if room else None) or 0
    if spec.ttl is not None and parse_minutes(spec.ttl) < least:
        raise InputError(f"ttl: {room.title} releases an instance no sooner than {least} minutes "
                         f"after it is created, got {spec.ttl}", fix=f"set ttl: {least}m or more")
    most = (room.limits.get("ttl_max_minutes") if room else None) or MAX_MINUTES
    if spec.ttl is not None and parse_minutes(spec.ttl) > most:
        raise InputError(f"ttl: {room.title} releases an instance at most {most // 1440} days after "
                         f"it is created, got {spec.ttl}", fix=f"set ttl: {most // 1440}d or less")


def _what_stays(cluster, room) -> str:
    """What a release by TTL leaves billing: data disks the module does not release with the
    instance (priced), the NAT gateway and its EIP, the NAS."""
    dd, nodes = cluster.data_disk or {}, cluster.spec.nodes
    parts = []
    if dd.get("enabled") and not room.ttl_releases_data_disks:
        month = ((cluster.catalog.storage_prices.get("disk_gb_month") or {}).get(dd["category"])
                 if cluster.catalog else None)
        # 730 h a month (8760 / 12, as trainkit.money.cost)
        price = f", {nodes * dd['size_gb'] * month / 730:.2f} {cluster.catalog.currency}/h" if month else ""
        parts.append(f"the {nodes} data disk(s) ({nodes * dd['size_gb']} GB{price})")
    items = parts + ["the network (a NAT gateway and its EIP, where there is one)"] \
        + (["the NAS"] if (cluster.nas or {}).get("enabled") else [])
    stays = ", ".join(items[:-1]) + f" and {items[-1]}" if len(items) > 1 else items[0]
    gone = "its data disk goes with it; " if dd.get("enabled") and room.ttl_releases_data_disks else ""
    return f"{gone}{stays} stay and bill until `trainkit destroy`"


def describe(cluster) -> list[str]:
    """One sentence per safety net: what the cloud or the node does, and when."""
    spec, out = cluster.spec, []
    room = _room(spec)
    if spec.ttl is not None:
        if room and room.ttl_argument:
            out.append(f"ttl {spec.ttl}: {room.title} releases each instance {spec.ttl} after it is "
                       f"created (Terraform `{room.ttl_argument}`); " + _what_stays(cluster, room))
        elif room:
            out.append(f"ttl {spec.ttl}: {room.title} has no release-at argument; a timer on each "
                       f"node shuts it down {spec.ttl} after provisioning"
                       + (" and the shutdown terminates the instance" if room.shutdown_terminates
                          else "; a stopped instance may still bill for disks: run `trainkit destroy`"))
        else:
            out.append(f"ttl {spec.ttl}: a timer on each node runs the guard's shutdown command "
                       f"{spec.ttl} after provisioning")
    else:
        out.append("no ttl: the cluster bills until `trainkit destroy` (set `ttl: 12h` in the spec)")
    if spec.idle is not None:
        out.append(f"idle {spec.idle}: a node with no training process and idle CPU/GPU for "
                   f"{spec.idle} shuts itself down")
    return out


def _room(spec):
    """The target's room where it provisions instances (its release-at argument and limits); None
    where trainkit provisions nothing (the node-side timer does it all)."""
    return spec.room if spec.room.has_module else None
