"""Pieces the three clouds' rules share: ids, addresses, and reading a value that may be unknown."""

from __future__ import annotations

import calendar
import ipaddress
import random
import time
from typing import Any

from .values import Unknown


def unset(value: Any) -> bool:
    """Not given in the plan: the cloud computes it."""
    return value is None or isinstance(value, Unknown)


def hex_id(prefix: str, rng: random.Random, length: int = 20) -> str:
    return prefix + "".join(rng.choice("0123456789abcdefghijklmnopqrstuvwxyz") for _ in range(length))


def host_ip(cidr: str | None, taken: set[str]) -> str | None:
    """The first free host address of `cidr` (the clouds hand out addresses from the subnet's
    range, leaving the first ones to the gateway: .1-.3 here, as both Alibaba and Tencent reserve
    the first and last addresses of a vSwitch/subnet)."""
    if not cidr:
        return None
    net = ipaddress.ip_network(cidr, strict=False)
    for i, host in enumerate(net.hosts()):
        if i >= 3 and str(host) not in taken:
            return str(host)
    return None


def public_ip(rng: random.Random) -> str:
    """An address from 198.18.0.0/15 (RFC 2544 benchmarking range): never a real host."""
    return f"198.{18 + rng.randrange(2)}.{rng.randrange(256)}.{1 + rng.randrange(254)}"


def set_if_unset(attrs: dict, name: str, value: Any) -> None:
    if name in attrs and unset(attrs[name]):
        attrs[name] = value


# Alibaba auto_release_time and Huawei auto_terminate_time must lie at least 30 minutes after the
# call (alicloud_instance docs: "at least half an hour later than the current time"; Huawei ECS
# docs, "Setting Auto-Deletion Time": at least 30 minutes after now).
RELEASE_MARGIN_S = 30 * 60


def too_soon(when: Any, now: float | None = None) -> bool:
    """Whether an RFC 3339 UTC release time is less than RELEASE_MARGIN_S ahead."""
    if not isinstance(when, str) or not when:
        return False
    at = calendar.timegm(time.strptime(when.replace("Z", ""), "%Y-%m-%dT%H:%M:%S"))
    return at < (time.time() if now is None else now) + RELEASE_MARGIN_S

