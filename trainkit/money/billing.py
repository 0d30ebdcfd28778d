"""Which billing plan to train on: on-demand, monthly subscription, or spot with checkpoints. Pure.

`compare(cluster, hours, ...)` prices `hours` of training work under each plan with the one cost
model (`trainkit.money.cost`). Spot adds the expected overhead of checkpoints and reclaims by
`trainkit.money.spot` (Young/Daly's first-order model: each reclaim loses half a checkpoint
interval plus the restart time) and the controller that runs the recovery loop. The reclaim rate
is the cloud's published figure or trainkit's stated assumption (`trainkit.money.reclaims`),
per node, times the nodes, unless the caller gives one.

Subscription bills whole months of the node price (ceil(hours / 730)); other items by the hour.
"""

from __future__ import annotations

import math
from typing import Any

from trainkit.money import reclaims
from trainkit.money import spot as spot_model
from trainkit.money.cost import HOURS_PER_MONTH, cluster_cost, price_warnings

# trainkit's assumptions when nothing better is known; every one can be overridden on the CLI.
DEFAULT_CHECKPOINT_S = 60.0     # a few GB of model + optimizer state to local disk / NAS
DEFAULT_RESTART_S = 600.0       # new spot node: boot, provision (Ansible), resume from checkpoint


def compare(cluster, hours: float, nodes: int, nat_gateways: int = 0,
            reclaims_per_day: float | None = None, checkpoint_s: float = DEFAULT_CHECKPOINT_S,
            restart_s: float = DEFAULT_RESTART_S, interval_s: float | None = None,
            band: str | None = None) -> dict[str, Any]:
    """Expected total per billing plan for `hours` of work, the cheapest known one, and the seed's
    figure (`spot_vs_on_demand`). `reclaims_per_day` None: the cloud's figure (its interruption
    `band` where it publishes bands) for `nodes` nodes (`reclaims`, with its source); `interval_s`
    None: Young's interval."""
    rate = reclaims.cluster_reclaims_per_day(cluster.spec.cloud, nodes, band) if reclaims_per_day is None else \
        {"reclaims_per_day": reclaims_per_day, "basis": "given", "source": None}
    plans = [on_demand(cluster, hours, nodes, nat_gateways),
             subscription(cluster, hours, nodes, nat_gateways),
             spot(cluster, hours, nodes, nat_gateways, rate["reclaims_per_day"], checkpoint_s, restart_s, interval_s)]
    known = [p for p in plans if p["total"] is not None]
    best = min(known, key=lambda p: p["total"]) if known else None
    return {"cluster": cluster.name, "hours": hours, "nodes": nodes,
            "currency": cluster.catalog.currency, "plans": plans,
            "reclaims": {k: rate.get(k) for k in ("reclaims_per_day", "share_per_month", "basis", "source")},
            "spot_vs_on_demand": seed_figure(plans),
            "recommendation": best["plan"] if best else None,
            "reason": _reason(best, plans), "warnings": price_warnings(cluster)}


def on_demand(cluster, hours: float, nodes: int, nats: int) -> dict[str, Any]:
    c = cluster_cost(cluster, nodes, nats, billing="on_demand")
    return _plan("on_demand", c, hours, None if c["items"][0]["per_hour"] is None else _total(c, hours))


def subscription(cluster, hours: float, nodes: int, nats: int) -> dict[str, Any]:
    c = cluster_cost(cluster, nodes, nats, billing="subscription")
    node = c["items"][0]
    months = math.ceil(hours / HOURS_PER_MONTH)
    total = None
    if node["per_hour"] is not None:
        others = c["per_hour"] - node["per_hour"]
        total = round(cluster.instance.subscription_month * nodes * months + others * hours, 2)
    return _plan("subscription", c, hours, total, months=months)


def spot(cluster, hours: float, nodes: int, nats: int, reclaims_per_day: float, checkpoint_s: float,
         restart_s: float, interval_s: float | None = None) -> dict[str, Any]:
    """The spot plan by `trainkit.money.spot`'s model, the controller included (an on-demand CPU
    instance for the wall time: issue 42); an unknown controller price is named, never guessed."""
    c = cluster_cost(cluster, nodes, nats, billing="spot")
    t = spot_wall_hours(hours, reclaims_per_day, checkpoint_s, restart_s, interval_s)
    ctrl = spot_model.controller_price(cluster.catalog, cluster.spec.controller.instance_type)
    total = None if c["items"][0]["per_hour"] is None or t["wall_hours"] is None else _total(c, t["wall_hours"])
    if total is not None and ctrl["per_hour"] is not None:
        total = round(total + ctrl["per_hour"] * t["wall_hours"], 2)
    plan = _plan("spot", c, t["wall_hours"], total, controller=ctrl, **t)
    if ctrl["per_hour"] is None:
        plan["unknown"] = [*plan["unknown"], f"controller ({ctrl['basis']})"]
    return plan


def spot_wall_hours(work_hours: float, reclaims_per_day: float, checkpoint_s: float,
                    restart_s: float, interval_s: float | None = None) -> dict[str, Any]:
    """Expected wall hours for `work_hours` of work on spot with its parts (`spot.spot_wall`):
    checkpoints every `interval_s` (None: Young's interval from `checkpoint_s`)."""
    return spot_model.spot_wall(work_hours, reclaims_per_day, interval_s, restart_s, checkpoint_s)


def seed_figure(plans: list[dict]) -> dict[str, Any]:
    """The seed's figure: spot total / on-demand total for the same work, and the money saved;
    None where either total is unknown; `upper_bound` when spot is priced at its max_price."""
    by = {p["plan"]: p for p in plans}
    od, sp = by["on_demand"]["total"], by["spot"]["total"]
    ratio = round(sp / od, 4) if od and sp is not None else None
    return {"ratio": ratio, "saving": None if ratio is None else round(od - sp, 2),
            "upper_bound": bool(by["spot"]["upper_bound"])}


def _total(c: dict, hours: float) -> float:
    return round(c["per_hour"] * hours, 2)


def _plan(name: str, c: dict, hours: float | None, total: float | None, **extra) -> dict[str, Any]:
    node = c["items"][0]
    return {"plan": name, "per_hour": c["per_hour"] if node["per_hour"] is not None else None,
            "hours_billed": hours, "total": total, "basis": node["basis"], "complete": c["complete"],
            "unknown": c["unknown"], "upper_bound": c["upper_bound"], **extra}


def _reason(best: dict | None, plans: list[dict]) -> str:
    if best is None:
        return "no plan has a known price; run `trainkit prices refresh` or pass --prices"
    unknown = [p["plan"] for p in plans if p["total"] is None]
    text = f"{best['plan'].replace('_', '-')} has the lowest expected total"
    if best["upper_bound"]:
        text += " (spot at its max_price: an upper bound)"
    return text + (f"; not compared (price unknown): {', '.join(unknown)}" if unknown else "")
