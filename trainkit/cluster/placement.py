"""Where a cluster's nodes are, read from the state, and where one is put, as module input (pure).

    held(cluster, resources)        -> (zone, type, spot) every node of the state shares, or None
    held_apart(cluster, resources)  -> the cluster's placement and the nodes placed apart from it
    node_entry(cluster, where, ...) -> the node_placement entry of a node placed at `where`
    zone_subnet_cidr(...)           -> a free subnet of the VPC for another zone

The modules' naming carries it: instances `<type>.node[i]`, another zone's subnet
`<type>.zone["<zone>"]`, each node's billing record `terraform_data.node[i]` (money.cost). Used by
cluster/failover.py at apply and at recovery.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from trainkit import errors
from trainkit.clouds.base import is_controller
from trainkit.money.cost import billing_records, node_spot
from trainkit.spec.resolve import Cluster

Placement = tuple[str | None, str, bool]  # (zone, instance type, spot)


def held(cluster: Cluster, resources: list[dict]) -> Placement | None:
    """Where the nodes in `resources` (the state's, `state_resources`) run: (zone, type, spot)
    when every node agrees, else None. Zone: the instance's `availability_zone` (the attribute's
    name in all four providers' instance resources); type and billing: the cloud room's `billed`,
    with the modules' billing record deciding spot where the instance cannot tell
    (money.cost.billing_records)."""
    room, records = cluster.room, billing_records(resources)
    found = set()
    for r in resources:
        b = None if is_controller(r) else room.billed(r)  # the controller is no node (issue 42)
        if b and b.get("node"):
            spot = node_spot(records, r.get("index"), b.get("billing"))
            found.add((r["values"].get("availability_zone"), b["node"], spot))
    return found.pop() if len(found) == 1 else None


def held_apart(cluster: Cluster, resources: list[dict]) -> tuple[Placement | None, dict[str, dict]]:
    """(the cluster's placement, its nodes placed apart as node_placement entries) from the state,
    for a cluster one of whose replacements failed over (pure). The modules name the subnet of
    another zone `<type>.zone["<zone>"]`: nodes outside those zones hold the cluster's zone, and
    their most common type (the lowest index on a tie) is the cluster's; every node that differs
    is an entry, with its zone's subnet CIDR (`cidr_block`, Huawei `cidr`). (None, {}) when no
    node is found."""
    room, records = cluster.room, billing_records(resources)
    subnets = {r["index"]: r["values"].get("cidr_block") or r["values"].get("cidr") for r in resources
               if isinstance(r.get("index"), str) and r["address"].rsplit(".", 1)[-1].startswith("zone[")}
    nodes: dict[int, Placement] = {}
    for r in resources:
        b = None if is_controller(r) else room.billed(r)  # the controller is no node (issue 42)
        if b and b.get("node"):
            spot = node_spot(records, r.get("index"), b.get("billing"))
            nodes[r.get("index") if isinstance(r.get("index"), int) else len(nodes)] = (
                r["values"].get("availability_zone"), b["node"], spot)
    main = [nodes[i] for i in sorted(nodes) if nodes[i][0] not in subnets]
    if not main:
        return None, {}
    counts = {p: main.count(p) for p in main}
    where = max(main, key=lambda p: (counts[p], -main.index(p)))
    apart = {}
    for i, (zone, kind, spot) in nodes.items():
        entry = {}
        if zone != where[0]:
            entry.update(zone=zone, subnet_cidr=subnets.get(zone))
        if kind != where[1]:
            entry["instance_type"] = kind
        if spot != where[2]:
            entry["spot"] = spot
        if entry:
            apart[str(i)] = entry
    return where, apart


def zone_subnet_cidr(vpc_cidr: str, subnet_cidr: str, taken: list[str]) -> str:
    """A subnet for another zone (pure): the first block of `subnet_cidr`'s size in `vpc_cidr`
    that overlaps neither `subnet_cidr`, the `taken` ones, nor the last /27 of the VPC (the
    modules' public subnets: the cluster's in the last /28, aws nat.tf, and a head placed in
    another zone's in the /28 below it, aws main.tf zone_public_subnets). InputError when the VPC
    is full."""
    vpc, own = ipaddress.ip_network(vpc_cidr), ipaddress.ip_network(subnet_cidr)
    public = list(vpc.subnets(new_prefix=27))[-1] if vpc.prefixlen <= 27 else vpc
    busy = [own, public] + [ipaddress.ip_network(t) for t in taken]
    for block in vpc.subnets(new_prefix=own.prefixlen):
        if not any(block.overlaps(b) for b in busy):
            return str(block)
    raise errors.InputError(f"network.vpc_cidr {vpc_cidr} has no free /{own.prefixlen} for a node "
                            "placed in another zone", fix="use a larger network.vpc_cidr or a smaller "
                            "network.subnet_cidr")


def node_entry(cluster: Cluster, where: Placement, nodes: dict[str, dict],
               held_by: dict[str, str] | None = None) -> dict[str, Any]:
    """The node_placement entry (module input) of a node placed at `where` (pure): only what
    differs from the cluster; another zone gets that zone's subnet (the one a node placed there
    before has, else a free block). `held_by` ({zone: block}) are the subnets refused tries made,
    still in the state until the next apply removes them: a try in that zone reuses its block, a
    try in another zone never gets it (AWS refuses an overlapping CreateSubnet with
    InvalidSubnet.Conflict while the refused try's subnet is not yet deleted; terraform may create
    before it destroys)."""
    zone, kind, spot = where
    entry: dict[str, Any] = {}
    if zone != cluster.spec.zone:
        held_by = held_by or {}
        same = [n["subnet_cidr"] for n in nodes.values() if n.get("zone") == zone and n.get("subnet_cidr")]
        same += [held_by[zone]] if zone in held_by else []
        taken = [n["subnet_cidr"] for n in nodes.values() if n.get("subnet_cidr")] + list(held_by.values())
        net = cluster.spec.network
        entry.update(zone=zone, subnet_cidr=same[0] if same else zone_subnet_cidr(net.vpc_cidr, net.subnet_cidr, taken))
    if kind != cluster.instance.type:
        entry["instance_type"] = kind
    if spot != cluster.spec.spot.enabled:
        entry["spot"] = spot
    return entry
