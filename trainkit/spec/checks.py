"""Cluster spec rules across fields that do not depend on the cloud (spec.py calls them from its
validators; each returns problems as "field: what is wrong; how to fix it" strings).

    network_problems(network)  IPv4 VPC, not the whole internet, subnet of the same family inside it
    whole_internet(cidrs)      the CIDRs whose union is a whole address family (0.0.0.0/0, ::/0, ...)
"""

from __future__ import annotations

import ipaddress
from typing import Any


def network_problems(net: Any) -> list[str]:
    """IPv4 VPC, not the whole internet, subnet of the same family inside it."""
    vpc, sub = ipaddress.ip_network(net.vpc_cidr), ipaddress.ip_network(net.subnet_cidr)
    if vpc.version != 4:
        return [f"vpc_cidr: {vpc} is IPv6; the cluster network is an IPv4 VPC on every target "
                "(e.g. 10.42.0.0/16)"]
    if vpc.prefixlen == 0:
        return [f"vpc_cidr: {vpc} is the whole internet; use a private range such as 10.42.0.0/16 "
                "(RFC 1918)"]
    if sub.version != vpc.version:
        return [f"subnet_cidr: {sub} is IPv{sub.version} but vpc_cidr {vpc} is IPv{vpc.version}; use a "
                f"range inside the VPC, e.g. {next(vpc.subnets(new_prefix=max(vpc.prefixlen, 24)))}"]
    if not sub.subnet_of(vpc):
        return [f"subnet_cidr: subnet_cidr {sub} is not inside vpc_cidr {vpc}"]
    return []


def whole_internet(cidrs: tuple[str, ...]) -> list[str]:
    """The CIDRs in `cidrs` of a family whose union is that family's whole address space."""
    out: list[str] = []
    for version in (4, 6):
        nets = [ipaddress.ip_network(c) for c in cidrs if ipaddress.ip_network(c).version == version]
        if nets and [n.prefixlen for n in ipaddress.collapse_addresses(nets)] == [0]:
            out += [str(n) for n in nets]
    return out

