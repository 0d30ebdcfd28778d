"""Spot with checkpoints and recovery against on-demand, for the same trained model. Pure.

One model, used by `trainkit cost` (before a run) and benchmarks/bench_spot.py (against a replayed
reclaim trace). The first-order checkpoint/restart model of Young (1974, "A first order
approximation to the optimum checkpoint interval", CACM 17(9)) and Daly (2006, "A higher order
estimate of the optimum checkpoint interval for restart dumps", FGCS 22(3)):

- reclaims arrive as a Poisson process, R per day for the whole cluster (money/reclaims.py);
- a reclaim lands anywhere in a checkpoint interval c, so it loses c/2 of work on average, plus
  the restart time r (replacement node, provisioning, relaunch, resume);
- writing a checkpoint takes C seconds every c: C/c more work (0 where the on-demand run writes
  the same checkpoints, as the benchmark's does);
- the wall time T of W hours of work then solves T = W (1 + C/c) + T (R/24)(c/2 + r):
  T = W (1 + C/c) / (1 - (R/24)(c/2 + r)); no finite T when the denominator is <= 0;
- Young's interval, when the user gives none: c = sqrt(2 C M), M = 24 h / R.

Money: every node bills for the whole wall time (survivors wait while a replacement boots, and
the replacement bills from its launch), at the spot price; the controller (an on-demand CPU
instance that runs the recovery loop, issue 42) bills for the wall time too. On-demand bills W
hours per node. The ratio is spot total / on-demand total for the same work.
"""

from __future__ import annotations

import math
from typing import Any

from trainkit.catalog import Catalog
from trainkit.errors import InputError
from trainkit.spec import controller_block


def young_interval_s(checkpoint_write_s: float, reclaims_per_day: float) -> float | None:
    """Young's interval sqrt(2 C M) in seconds; None without reclaims (any interval will do)."""
    if reclaims_per_day <= 0:
        return None
    return math.sqrt(2 * checkpoint_write_s * 86400 / reclaims_per_day)


def spot_wall(work_hours: float, reclaims_per_day: float, interval_s: float | None, restart_s: float,
              checkpoint_write_s: float = 0.0) -> dict[str, Any]:
    """Expected wall hours of `work_hours` of work on spot (module docstring) and its parts:
    {wall_hours (None: never finishes), interval_s, checkpoint_overhead, lost_hours_per_reclaim,
    reclaims, lost_work_hours, restart_hours, reclaims_per_day}. `interval_s` None: Young's.
    ValueError for a negative input or a zero interval."""
    for name, v in (("work_hours", work_hours), ("reclaims_per_day", reclaims_per_day),
                    ("restart_s", restart_s), ("checkpoint_write_s", checkpoint_write_s)):
        if v < 0:
            raise ValueError(f"{name} {v!r} < 0")
    c = interval_s if interval_s is not None else young_interval_s(checkpoint_write_s, reclaims_per_day)
    if c is not None and c <= 0:
        raise ValueError(f"interval_s {c!r} <= 0")
    overhead = checkpoint_write_s / c if c else 0.0
    lost_h = ((c or 0.0) / 2 + restart_s) / 3600 if reclaims_per_day > 0 else 0.0
    denom = 1 - (reclaims_per_day / 24) * lost_h
    wall = work_hours * (1 + overhead) / denom if denom > 0 else None
    reclaims = None if wall is None else reclaims_per_day * wall / 24
    return {"wall_hours": None if wall is None else round(wall, 6),
            "interval_s": None if c is None else round(c, 1), "checkpoint_overhead": round(overhead, 6),
            "lost_hours_per_reclaim": round(lost_h, 6), "reclaims_per_day": reclaims_per_day,
            "reclaims": None if reclaims is None else round(reclaims, 6),
            "lost_work_hours": None if reclaims is None else round(reclaims * (c or 0.0) / 7200, 6),
            "restart_hours": None if reclaims is None else round(reclaims * restart_s / 3600, 6)}


def controller_price(catalog: Catalog | None, named: str | None = None) -> dict[str, Any]:
    """{type, per_hour, basis} of the controller as the module renders it (spec/controller_block.py
    pick: `named`, the spec's controller.instance_type, else the cheapest CPU-only type that fits),
    on demand (never spot); per_hour None where the catalog has no such type or no price for it."""
    try:
        chosen = controller_block.pick(named, catalog) if catalog else None
    except InputError:
        chosen = None
    if chosen is None:
        return {"type": named, "per_hour": None,
                "basis": f"{named} not in the catalog" if named else "no CPU-only controller type in the catalog"}
    basis = f"{chosen.type} on-demand ({catalog.price_source})" if chosen.on_demand is not None \
        else f"{chosen.type}: price unknown"
    return {"type": chosen.type, "per_hour": chosen.on_demand, "basis": basis}


def price_ratio(nodes: int, on_demand_hours: float, spot_hours: float | None, node_on_demand: float | None,
                node_spot: float | None, controller_per_hour: float | None) -> dict[str, Any]:
    """On-demand and spot totals for the same work and their ratio: on-demand = nodes x
    on_demand_hours x node_on_demand; spot = nodes x spot_hours x node_spot + spot_hours x
    controller_per_hour. A total whose price is unknown is None, and so is the ratio; an unknown
    controller price is left out of the spot total and named in `unknown` (never guessed)."""
    od = None if node_on_demand is None else nodes * on_demand_hours * node_on_demand
    unknown = [] if controller_per_hour is not None else ["controller"]
    controller = None if spot_hours is None or controller_per_hour is None else spot_hours * controller_per_hour
    spot = None if node_spot is None or spot_hours is None else nodes * spot_hours * node_spot + (controller or 0.0)
    ratio = spot / od if spot is not None and od else None
    return {"on_demand_total": _r(od), "spot_total": _r(spot), "controller_total": _r(controller),
            "ratio": None if ratio is None else round(ratio, 4),
            "saving": None if ratio is None else _r(od - spot), "unknown": unknown}


def break_even_price_ratio(target: float, nodes: int, on_demand_hours: float, spot_hours: float,
                           controller_per_hour: float | None, node_on_demand: float) -> float | None:
    """The highest spot/on-demand node price ratio p at which the total ratio stays <= `target`:
    p = (target - controller share) / (spot_hours / on_demand_hours); None when even free nodes miss it."""
    od = nodes * on_demand_hours * node_on_demand
    controller_share = (spot_hours * (controller_per_hour or 0.0)) / od if od else 0.0
    p = (target - controller_share) * on_demand_hours / spot_hours
    return round(p, 4) if p > 0 else None


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)
