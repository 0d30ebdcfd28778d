"""Which billing plan to train on: on-demand, monthly subscription, or spot with checkpoints. Pure.

`compare(cluster, hours, ...)` prices `hours` of training work under each plan with the one cost
model (`trainkit.money.cost`). Spot adds the expected overhead of checkpointing and of reclaims:

- checkpoint interval tau = sqrt(2 C M) (Young 1974, "A first order approximation to the optimum
  checkpoint interval", CACM 17(9)); C = seconds to write a checkpoint, M = mean time between
  reclaims of the cluster = 24 h / reclaims_per_day;
- time spent writing checkpoints: C / tau of the work;
- each reclaim loses on average tau / 2 of work (the reclaim lands anywhere in an interval) plus
  the restart time (new node, provision, resume);
- wall time T solves T = W (1 + C/tau) + T (R/24) (tau/2 + restart), so
  T = W (1 + C/tau) / (1 - (R/24)(tau/2 + restart)); no finite T when the denominator is <= 0.

Subscription bills whole months of the node price (ceil(hours / 730)); other items by the hour.
"""

from __future__ import annotations

import math
from typing import Any

from trainkit.money.cost import HOURS_PER_MONTH, cluster_cost, price_warnings

# trainkit's assumptions when nothing better is known; every one can be overridden on the CLI.
DEFAULT_CHECKPOINT_S = 60.0     # a few GB of model + optimizer state to local disk / NAS
DEFAULT_RESTART_S = 600.0       # new spot node: boot, provision (Ansible), resume from checkpoint
DEFAULT_RECLAIMS_PER_DAY = 1.0  # no cloud publishes one figure; AWS's Spot Instance Advisor gives
#                                 per-type interruption bands (<5% .. >20% per month): pass your own


def compare(cluster, hours: float, nodes: int, nat_gateways: int = 0,
            reclaims_per_day: float = DEFAULT_RECLAIMS_PER_DAY, checkpoint_s: float = DEFAULT_CHECKPOINT_S,
            restart_s: float = DEFAULT_RESTART_S) -> dict[str, Any]:
    """Expected total per billing plan for `hours` of work, and the cheapest known one."""
    plans = [on_demand(cluster, hours, nodes, nat_gateways),
             subscription(cluster, hours, nodes, nat_gateways),
             spot(cluster, hours, nodes, nat_gateways, reclaims_per_day, checkpoint_s, restart_s)]
    known = [p for p in plans if p["total"] is not None]
    best = min(known, key=lambda p: p["total"]) if known else None
    return {"cluster": cluster.name, "hours": hours, "nodes": nodes,
            "currency": cluster.catalog.currency, "plans": plans,
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
         restart_s: float) -> dict[str, Any]:
    c = cluster_cost(cluster, nodes, nats, billing="spot")
    t = spot_wall_hours(hours, reclaims_per_day, checkpoint_s, restart_s)
    total = None if c["items"][0]["per_hour"] is None or t["wall_hours"] is None else _total(c, t["wall_hours"])
    return _plan("spot", c, t["wall_hours"], total, **t)


def spot_wall_hours(work_hours: float, reclaims_per_day: float, checkpoint_s: float,
                    restart_s: float) -> dict[str, Any]:
    """Expected wall hours for `work_hours` of work on spot (module docstring), with its parts."""
    if reclaims_per_day <= 0:
        return {"wall_hours": work_hours, "interval_s": None, "checkpoint_overhead": 0.0,
                "lost_hours_per_reclaim": 0.0, "reclaims_per_day": 0.0}
    mtbf_s = 86400 / reclaims_per_day
    tau = math.sqrt(2 * checkpoint_s * mtbf_s)
    overhead = checkpoint_s / tau
    lost_h = (tau / 2 + restart_s) / 3600
    denom = 1 - (reclaims_per_day / 24) * lost_h
    wall = work_hours * (1 + overhead) / denom if denom > 0 else None
    return {"wall_hours": None if wall is None else round(wall, 4), "interval_s": round(tau, 1),
            "checkpoint_overhead": round(overhead, 6), "lost_hours_per_reclaim": round(lost_h, 6),
            "reclaims_per_day": reclaims_per_day}


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
