"""Plan JSON (`terraform show -json`) -> a review: changes by role, cost, findings. Pure functions.

`review(plan, cluster)` returns a dict whose keys are stable for CI (`--format json`);
`to_text` and `to_markdown` render it for terminals and pull requests. Per-cloud knowledge
(which resource is compute, which attribute opens SSH or a public IP) is asked of the cloud's room
through `trainkit.plan_rules`.
"""

from __future__ import annotations

import ipaddress
from collections import Counter
from typing import Any

from trainkit.plan_rules import ROLE_KEYWORDS, disks_unencrypted, public_ip_nodes, ssh_sources
from trainkit.resolve import Cluster

HOURS_PER_MONTH = 730  # 8760 h / 12, the month cloud price pages use for per-GB-month storage
ROLES = ("network", "compute", "storage", "nas")


def role_of(resource_type: str) -> str:
    for role, keywords in ROLE_KEYWORDS:
        if any(k in resource_type for k in keywords):
            return role
    return "network"


def changes(plan: dict) -> dict[str, Any]:
    """Counts of create/update/delete/replace per role, plus the addresses that change."""
    counts = {role: Counter() for role in ROLES}
    addresses = []
    for rc in plan.get("resource_changes", []):
        if rc.get("mode") == "data":
            continue
        actions = rc["change"]["actions"]
        action = ("replace" if set(actions) == {"create", "delete"} else
                  "no-op" if actions in (["no-op"], ["read"]) else actions[0])
        counts[role_of(rc["type"])][action] += 1
        if action != "no-op":
            addresses.append({"address": rc["address"], "action": action, "role": role_of(rc["type"])})
    total = Counter()
    for c in counts.values():
        total.update(c)
    return {
        "by_role": {role: {a: c[a] for a in ("create", "update", "delete", "replace") if c[a]}
                    for role, c in counts.items()},
        "add": total["create"] + total["replace"], "change": total["update"],
        "destroy": total["delete"] + total["replace"], "addresses": addresses,
        "has_changes": bool(addresses),
    }


def after_resources(plan: dict) -> list[dict]:
    """Every managed resource as it will be after apply: {type, index, values}."""
    out = []
    for rc in plan.get("resource_changes", []):
        if rc.get("mode") != "data" and rc["change"]["actions"] != ["delete"]:
            out.append({"type": rc["type"], "index": rc.get("index"), "address": rc["address"],
                        "values": rc["change"].get("after") or {}})
    return out


def cost(cluster: Cluster, resources: list[dict]) -> dict[str, Any]:
    """Hourly and daily cost from the catalog; items without a price are listed as unknown."""
    cat, spec = cluster.catalog, cluster.spec
    instances = sum(1 for r in resources if role_of(r["type"]) == "compute" and "instance" in r["type"])
    inst_price = cluster.instance.price(spec.spot.enabled) if cluster.instance else None
    disk_prices = (cat.storage_prices.get("disk_gb_month") or {}) if cat else {}
    nas_price = cat.storage_prices.get("nas_gb_month") if cat else None
    items = [_item(f"{cluster.instance.type} ({'spot' if spec.spot.enabled else 'on-demand'})",
                   instances, "node", inst_price)]
    sys_price = disk_prices.get(cluster.system_disk["category"])
    items.append(_item(f"system disk {cluster.system_disk['category']}",
                       instances * cluster.system_disk["size_gb"], "GB",
                       sys_price / HOURS_PER_MONTH if sys_price is not None else None))
    if cluster.data_disk["enabled"]:
        price = disk_prices.get(cluster.data_disk["category"])
        items.append(_item(f"data disk {cluster.data_disk['category']}",
                           instances * cluster.data_disk["size_gb"], "GB",
                           price / HOURS_PER_MONTH if price is not None else None))
    if cluster.nas["enabled"]:
        size = cluster.nas["size_gb"]
        items.append(_item(f"nas {cluster.nas['type']}", size or 0, "GB",
                           nas_price / HOURS_PER_MONTH if nas_price is not None and size else None))
    nat_gateways = sum(1 for r in resources if r["type"].endswith("_nat_gateway"))
    if nat_gateways:  # hourly charge only; traffic through it is billed per GB on top
        items.append(_item("NAT gateway", nat_gateways, "gateway",
                           cat.storage_prices.get("nat_gateway_hour") if cat else None))
    known = [i["per_hour"] for i in items if i["per_hour"] is not None]
    per_hour = round(sum(known), 4)
    return {"currency": cat.currency if cat else None, "per_hour": per_hour,
            "per_day": round(per_hour * 24, 2), "complete": len(known) == len(items),
            "unknown": [i["item"] for i in items if i["per_hour"] is None], "items": items,
            "price_source": cat.price_source if cat else None, "price_date": cat.price_date if cat else None}


def _item(name: str, quantity: float, unit: str, unit_price_per_hour: float | None) -> dict:
    per_hour = None if unit_price_per_hour is None else round(quantity * unit_price_per_hour, 4)
    return {"item": name, "quantity": quantity, "unit": unit,
            "unit_price_per_hour": unit_price_per_hour, "per_hour": per_hour}


def findings(cluster: Cluster, resources: list[dict], cost_: dict) -> list[dict]:
    """Security and cost findings; severity "block" makes `trainkit plan` exit 11."""
    spec, out = cluster.spec, []
    allowed = [ipaddress.ip_network(c) for c in spec.network.admin_cidrs]
    inside = ipaddress.ip_network(spec.network.vpc_cidr)
    for address, cidr in ssh_sources(spec.cloud, resources):
        net = ipaddress.ip_network(cidr, strict=False)
        if (net.version == inside.version and net.subnet_of(inside)) or any(net.subnet_of(a) for a in allowed if a.version == net.version):
            continue
        open_world = net.prefixlen == 0
        severity = "block" if open_world and not spec.network.allow_ssh_from_anywhere else "warn"
        out.append(_finding("ssh-open", severity, f"{address} allows SSH from {cidr}, outside admin_cidrs"))
    for address in public_ip_nodes(spec.cloud, resources):
        out.append(_finding("worker-public-ip", "warn", f"{address} is a worker with a public IP"))
    for address in disks_unencrypted(spec.cloud, resources):
        out.append(_finding("disk-unencrypted", "warn", f"{address} is not encrypted"))
    if spec.spot.enabled and not cluster.nas["enabled"]:
        out.append(_finding("spot-no-shared-checkpoints", "warn",
                            "spot nodes without shared storage (storage.nas): checkpoints on a "
                            "reclaimed node's disk are lost; enable nas to resume elsewhere"))
    budget = spec.budget.max_per_hour
    if budget is not None:
        if cost_["per_hour"] > budget:
            out.append(_finding("budget-exceeded", "block",
                                f"{cost_['per_hour']:.2f} {cost_['currency']}/h exceeds budget.max_per_hour "
                                f"{budget:.2f}"))
        elif not cost_["complete"]:
            out.append(_finding("budget-unchecked", "warn",
                                f"budget set but prices unknown for: {', '.join(cost_['unknown'])}"))
    return out


def _finding(code: str, severity: str, message: str) -> dict:
    return {"code": code, "severity": severity, "message": message}


def review(plan: dict, cluster: Cluster) -> dict[str, Any]:
    """The whole review; stable keys: cluster, cloud, changes, cost, findings, blocking."""
    resources = after_resources(plan)
    cost_ = cost(cluster, resources)
    found = findings(cluster, resources, cost_)
    return {"cluster": cluster.name, "cloud": cluster.spec.cloud, "changes": changes(plan),
            "cost": cost_, "findings": found, "blocking": any(f["severity"] == "block" for f in found)}


def _money(value: float | None, rev: dict) -> str:
    cost_ = rev["cost"]
    if value is None:
        return "unknown"
    suffix = "" if cost_["complete"] else f" + unknown ({', '.join(cost_['unknown'])})"
    return f"{value:,.2f} {cost_['currency']}{suffix}"


def to_text(rev: dict) -> str:
    if rev.get("note"):  # local / hosts: nothing for terraform to do
        return rev["note"]
    ch = rev["changes"]
    lines = [f"Plan for {rev['cluster']} ({rev['cloud']}): "
             f"{ch['add']} to add, {ch['change']} to change, {ch['destroy']} to destroy"]
    for role in ROLES:
        if ch["by_role"][role]:
            lines.append(f"  {role:<8} " + ", ".join(f"{n} {a}" for a, n in ch["by_role"][role].items()))
    lines.append(f"Cost: {_money(rev['cost']['per_hour'], rev)} per hour, "
                 f"{_money(rev['cost']['per_day'], rev)} per day")
    for f in rev["findings"]:
        lines.append(f"  [{f['severity']}] {f['code']}: {f['message']}")
    if not rev["findings"]:
        lines.append("Findings: none")
    return "\n".join(lines)


def to_markdown(rev: dict) -> str:
    if rev.get("note"):
        return f"### trainkit plan: `{rev['cluster']}` on {rev['cloud']}\n\n{rev['note']}\n"
    ch = rev["changes"]
    out = [f"### trainkit plan: `{rev['cluster']}` on {rev['cloud']}", "",
           f"**{ch['add']}** to add, **{ch['change']}** to change, **{ch['destroy']}** to destroy", "",
           "| role | create | update | delete | replace |", "|---|---:|---:|---:|---:|"]
    for role in ROLES:
        c = ch["by_role"][role]
        out.append(f"| {role} | " + " | ".join(str(c.get(a, 0)) for a in
                                               ("create", "update", "delete", "replace")) + " |")
    out += ["", "**Estimated cost**", "", "| item | quantity | per hour |", "|---|---:|---:|"]
    for item in rev["cost"]["items"]:
        price = "unknown" if item["per_hour"] is None else f"{item['per_hour']:,.4f}"
        out.append(f"| {item['item']} | {item['quantity']:g} {item['unit']} | {price} |")
    out += ["", f"Total: {_money(rev['cost']['per_hour'], rev)} per hour, "
                f"{_money(rev['cost']['per_day'], rev)} per day "
                f"(prices: {rev['cost']['price_source'] or 'none'}, {rev['cost']['price_date'] or 'n/a'})", ""]
    out.append("**Findings**" if rev["findings"] else "**Findings**: none")
    out += [f"- {'⛔' if f['severity'] == 'block' else '⚠️'} `{f['code']}` {f['message']}" for f in rev["findings"]]
    return "\n".join(out) + "\n"
