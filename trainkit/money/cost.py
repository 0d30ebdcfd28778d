"""The one cost model: what a cluster costs per hour, day and month. Pure functions.

`plan` (review), `status` and `cost` all call `cluster_cost`, so they print the same figure for the
same cluster. Quantities come from the caller (planned resources, or what exists); prices come
from the cluster's catalog (shipped, or a refreshed/user price file laid over it).

Spot is priced honestly: at the spot price when one is known, else at most `spot.max_price`
(an upper bound, flagged as such), else unknown. Never at the on-demand rate.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from trainkit.clouds.base import is_controller
from trainkit.errors import InputError
from trainkit.spec.resolve import Cluster, nat_gateway

HOURS_PER_DAY = 24
# 8760 h / 12: the month AWS and Alibaba price pages use to turn per-GB-month into per-hour.
HOURS_PER_MONTH = 730
BILLINGS = ("on_demand", "spot", "subscription")


def node_price(cluster, billing: str, inst=None, max_price: float | None = None) -> tuple[float | None, str]:
    """(price per node-hour, basis) for a billing plan; None when unknown. Basis says why.

    `inst` is the catalog entry priced (default: the spec's type); `max_price` the spot cap the
    node was created with (default: the spec's spot.max_price)."""
    inst, spec, source = inst or cluster.instance, cluster.spec, price_source(cluster)
    if billing == "on_demand":
        return (inst.on_demand, f"on-demand ({source})") if inst.on_demand is not None else \
            (None, "on-demand price unknown")
    if billing == "subscription":
        month = getattr(inst, "subscription_month", None)
        return (month / HOURS_PER_MONTH, f"subscription {month:g}/month ({source})") if month is not None \
            else (None, "subscription price unknown")
    if inst.spot is not None:
        return inst.spot, f"spot price ({source})"
    cap = max_price if max_price is not None else spec.spot.max_price
    if cap is not None:
        return cap, "at most spot.max_price (upper bound; spot price unknown)"
    return None, "spot price unknown and no spot.max_price"


def price_source(cluster) -> str:
    """Where and when the catalog's prices come from, in one phrase; a price region other than
    the cluster's is marked as such ("us-east-1 prices, cluster in eu-west-1")."""
    cat, region = cluster.catalog, cluster.spec.region
    where = cat.price_region or "region unknown"
    if other_region(cluster):
        where = f"{cat.price_region} prices, cluster in {region}"
    parts = [cat.price_source or "no source", where, cat.price_date or "date unknown"]
    return ", ".join(str(p) for p in parts)


def other_region(cluster) -> str | None:
    """The region the prices were taken from when it is not the cluster's, else None."""
    cat, region = cluster.catalog, cluster.spec.region
    return cat.price_region if cat.price_region and region and cat.price_region != region else None


def price_warnings(cluster) -> list[str]:
    """What every cost figure of this cluster must say next to it (prices of another region)."""
    taken = other_region(cluster)
    if not taken:
        return []
    return [f"prices are {taken}'s: there are none for {cluster.spec.region} in the catalog; run "
            f"`trainkit prices refresh --cloud {cluster.spec.cloud} --region {cluster.spec.region}` "
            "or pass --prices FILE for this region's"]


def chosen_billing(cluster) -> str:
    """The billing the spec asks for: spot when enabled, else on-demand."""
    return "spot" if cluster.spec.spot.enabled else "on_demand"


def cluster_cost(cluster, nodes: int, nat_gateways: int = 0, billing: str | None = None) -> dict[str, Any]:
    """Cost of `nodes` instances of the cluster's type with their disks, NAS and NAT gateways.

    Returns {currency, billing, per_hour, per_day, per_month, complete, upper_bound, unknown,
    items, price_source, warnings}; per_* sum the known items only (`complete` says whether that
    is all); `warnings` say what every figure must carry (prices taken from another region).
    """
    billing = billing or chosen_billing(cluster)
    cat = cluster.catalog
    price, basis = node_price(cluster, billing)
    items = [_item(f"{cluster.instance.type} ({billing.replace('_', '-')})", nodes, "node", price, basis)]
    disk_prices = cat.storage_prices.get("disk_gb_month") or {}
    for label, disk, count in (("system disk", cluster.system_disk, nodes),
                               ("data disk", cluster.data_disk, nodes)):
        if disk.get("enabled", True):
            month = disk_prices.get(disk["category"])
            items.append(_item(f"{label} {disk['category']}", count * disk["size_gb"], "GB",
                               _per_hour(month), _basis(month, cluster)))
    items += _shared_items(cluster, nat_gateways, cluster.nas["enabled"])
    items += [controller_item(cluster, cluster.controller.type)] if cluster.controller is not None else []
    return {**totals(items, cat.currency, billing, price_source(cluster)), "warnings": price_warnings(cluster)}


def controller_item(cluster, kind: str) -> dict:
    """The controller instance (issue 42) as a cost item: one `kind` on demand (a controller is never
    spot), priced from the catalog's controllers (or node types); unknown when the catalog has no
    price or the type is not in it, never guessed. Its root disk is not priced (the nodes' disk
    category and size)."""
    known = {i.type: i for i in (*cluster.catalog.controllers, *cluster.catalog.instances)}
    inst = known.get(kind)
    price = inst.on_demand if inst is not None else None
    basis = (f"on demand ({price_source(cluster)})" if price is not None else
             "price unknown" if inst is not None else f"{kind} not in the catalog")
    return _item(f"controller {kind} (on-demand)", 1, "instance", price, basis)


def resources_cost(cluster, resources: list[dict]) -> dict[str, Any]:
    """`billed_cost` of resources `{type, values}` (planned, or what the state holds), each read by
    the cloud room's `billed`; NAT gateways are the `*_nat_gateway` resources."""
    room = cluster.room
    records = billing_records(resources)
    controllers = [b["node"] for b in (room.billed(r) for r in resources if is_controller(r)) if b and "node" in b]
    resources = [r for r in resources if not is_controller(r)]
    billed = []
    for r in resources:
        b = room.billed(r)
        record = records.get(r.get("index"), records.get(None)) if b and b.get("node") else None
        if record and record.get("spot") and b.get("billing") == "on_demand":  # see billing_records
            b = {**b, "billing": "spot", "max_price": b.get("max_price") or record.get("max_price")}
        if b:
            billed.append(b)
    nat = sum(1 for r in resources if r["type"].endswith("_nat_gateway"))
    out = billed_cost(cluster, billed, nat, nas=any(b.get("nas") for b in billed))
    if not controllers:
        return out
    items = out["items"] + [controller_item(cluster, kind) for kind in controllers]
    return {**out, **totals(items, out["currency"], out["billing"], out["price_source"])}


def billing_records(resources: list[dict]) -> dict[int | None, dict]:
    """The modules' billing records ({spot, max_price}): how each node was created (a change
    replaces it), keyed by node index: `terraform_data.node[i]`, and under None the cluster-level
    `terraform_data.billing` of a state applied before the per-node records. A record decides
    where the instance's own reading cannot tell spot from on-demand (an API that omits the
    market type, as the AWS emulator does)."""
    out: dict[int | None, dict] = {}
    for r in resources:
        record = (r["values"] or {}).get("input") if r["type"] == "terraform_data" else None
        if not isinstance(record, dict):
            continue
        if r["address"].endswith("terraform_data.billing"):
            out[None] = record
        elif r["address"].rsplit(".", 1)[-1].startswith("node[") and isinstance(r.get("index"), int):
            out[r["index"]] = record
    return out


def node_spot(records: dict[int | None, dict], index: int | None, reading: str | None) -> bool:
    """Whether node `index` runs spot: its billing record's word where it has one (per node, else
    the cluster's), else the room's `billing` reading of the instance."""
    record = records.get(index, records.get(None))
    return bool(record["spot"]) if record and "spot" in record else reading == "spot"


def billed_cost(cluster, billed: list[dict], nat_gateways: int = 0, nas: bool = False) -> dict[str, Any]:
    """Cost of what `billed` holds (the cloud room's `billed` reading of each resource, from a plan
    or the state): each node at its own type and billing, each disk at its own category and size,
    the NAS when `nas`, `nat_gateways` gateways. Same shape as `cluster_cost`.

    This prices "what runs now" (the state) and "what will run" (the plan) by one rule, so the
    review's delta is new minus now and its "now" is the figure `status` shows.
    """
    cat, nodes, disks = cluster.catalog, Counter(), Counter()
    for b in (_filled(cluster, b) for b in billed):
        if "node" in b:
            nodes[(b["node"], b["billing"], b.get("max_price"))] += 1
            disks[("system disk", *b["system_disk"])] += 1
        elif "disk" in b:
            disks[("data disk", *b["disk"])] += 1
    items = [_node_item(cluster, kind, billing, cap, count) for (kind, billing, cap), count in sorted(
        nodes.items(), key=lambda kv: tuple(str(x) for x in kv[0]))]
    disk_prices = cat.storage_prices.get("disk_gb_month") or {}
    sizes: Counter = Counter()
    for (label, category, size), count in disks.items():
        sizes[(label, category)] += count * (size or 0)
    for (label, category), size in sorted(sizes.items(), key=lambda kv: (kv[0][0] != "system disk", str(kv[0][1]))):
        month = disk_prices.get(category)
        items.append(_item(f"{label} {category}", size, "GB", _per_hour(month), _basis(month, cluster)))
    items += _shared_items(cluster, nat_gateways if nodes or nat_gateways else 0, nas)
    billings = {b for _, b, _ in nodes}
    billing = billings.pop() if len(billings) == 1 else "mixed" if billings else chosen_billing(cluster)
    return {**totals(items, cat.currency, billing, price_source(cluster)), "warnings": price_warnings(cluster)}


def _filled(cluster, b: dict) -> dict:
    """A `billed` reading with what the resource does not say (unknown until apply) from the spec."""
    if "node" in b:
        category, size = b.get("system_disk") or (None, None)
        return {**b, "node": b["node"] or cluster.instance.type, "billing": b["billing"] or chosen_billing(cluster),
                "system_disk": (category or cluster.system_disk["category"], size or cluster.system_disk["size_gb"])}
    if "disk" in b:
        category, size = b["disk"]
        return {"disk": (category or cluster.data_disk["category"], size or cluster.data_disk["size_gb"])}
    return b


def _node_item(cluster, kind: str, billing: str, cap: float | None, count: int) -> dict:
    try:
        inst = cluster.catalog.get(kind)
    except InputError:  # a type outside the catalog (renamed, retired): unknown, never guessed
        return _item(f"{kind} ({billing.replace('_', '-')})", count, "node", None, f"{kind} not in the catalog")
    price, basis = node_price(cluster, billing, inst, cap)
    return _item(f"{kind} ({billing.replace('_', '-')})", count, "node", price, basis)


def _shared_items(cluster, nat_gateways: int, nas: bool) -> list[dict]:
    """The NAS (sized by the spec: the file services bill what is stored) and the NAT gateways,
    each usage-priced part marked in `usage` (a NAS without a size; a gateway's traffic)."""
    cat, items = cluster.catalog, []
    if nas and cluster.nas["enabled"]:
        size, month = cluster.nas["size_gb"], cat.storage_prices.get("nas_gb_month")
        items.append(_item(f"nas {cluster.nas['type']}", size or 0, "GB",
                           _per_hour(month) if size else None, _basis(month if size else None, cluster)))
        if not size:
            items[-1]["usage"] = "billed by the GB stored (no size is set)"
    if nat_gateways:  # hourly charge only; traffic through it is billed per GB on top
        hourly = cat.storage_prices.get("nat_gateway_hour")
        items.append(_item("NAT gateway", nat_gateways, "gateway", hourly,
                           f"per hour ({price_source(cluster)}); traffic extra" if hourly is not None
                           else "price unknown"))
        items[-1]["usage"] = "plus the traffic through it, billed per GB"
    return items


def totals(items: list[dict], currency: str | None, billing: str, source: str) -> dict[str, Any]:
    """Sum items into per hour/day/month; unknown items are listed, never guessed."""
    known = [i["per_hour"] for i in items if i["per_hour"] is not None]
    per_hour = round(sum(known), 4)
    return {"currency": currency, "billing": billing, "per_hour": per_hour,
            "per_day": round(per_hour * HOURS_PER_DAY, 2), "per_month": round(per_hour * HOURS_PER_MONTH, 2),
            "complete": len(known) == len(items), "upper_bound": any(i["upper_bound"] for i in items),
            "unknown": [i["item"] for i in items if i["per_hour"] is None], "items": items,
            "price_source": source}


def no_cost(cluster) -> dict[str, Any]:
    """The cost block of a target trainkit does not bill (local, hosts)."""
    return {"currency": None, "billing": None, "per_hour": None, "per_day": None, "per_month": None,
            "complete": True, "upper_bound": False, "unknown": [], "items": [], "price_source": None,
            "warnings": []}


def _per_hour(per_month: float | None) -> float | None:
    return None if per_month is None else per_month / HOURS_PER_MONTH


def _basis(per_month: float | None, cluster) -> str:
    return "price unknown" if per_month is None else \
        f"{per_month:g}/GB-month ({price_source(cluster)})"


def _item(name: str, quantity: float, unit: str, unit_price_per_hour: float | None, basis: str) -> dict:
    per_hour = None if unit_price_per_hour is None else round(quantity * unit_price_per_hour, 4)
    return {"item": name, "quantity": quantity, "unit": unit, "unit_price_per_hour": unit_price_per_hour,
            "per_hour": per_hour, "basis": basis, "upper_bound": basis.startswith("at most")}


def run_ledger(cluster: Any, record: dict[str, Any]) -> dict[str, Any]:
    """A run's cost ledger (summary.json): node-hours per instance type and pricing over every
    attempt of its run record, priced from the catalog
    where known (hosts and local have no price: cost null)."""
    inst = cluster.instance
    spot = bool(cluster.spec.spot.enabled)
    kind = inst.type if inst is not None else cluster.spec.cloud
    hours = 0.0
    for a in record.get("attempts") or []:
        end = a.get("ended_at") or time.time()
        hours += len(a.get("nodes") or []) * max(0.0, end - a["started_at"]) / 3600
    price = inst.price(spot) if inst is not None else None
    item = {"instance_type": kind, "pricing": "spot" if spot else "on-demand", "node_hours": round(hours, 4),
            "price_per_hour": price, "cost": round(hours * price, 4) if price is not None else None}
    return {"currency": cluster.catalog.currency if cluster.catalog else None, "items": [item],
            "total": item["cost"], "attempts": len(record.get("attempts") or [])}


def running_cost(cluster: Cluster, nodes: int) -> dict[str, Any]:
    """What `nodes` running nodes cost, by the same model as the plan review (`trainkit.money.cost`)."""
    if not nodes:
        return {"currency": cluster.catalog.currency, "per_hour": None, "cost": None}
    c = cluster_cost(cluster, nodes, 1 if nat_gateway(cluster.spec) else 0)
    return {"currency": c["currency"], "per_hour": c["per_hour"], "cost": c}


def state_cost(cluster: Cluster, resources: list[dict]) -> dict[str, Any]:
    """What the resources the state holds cost (`status`): the figure the review calls "now"."""
    if not resources:
        return {"currency": cluster.catalog.currency, "per_hour": None, "cost": None}
    c = resources_cost(cluster, resources)
    return {"currency": c["currency"], "per_hour": c["per_hour"], "cost": c}
