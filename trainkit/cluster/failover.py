"""Failover at apply (issue 21): the spec's zone and instance-type candidates, tried in order.

`zone: [a, b]` and `instance: {type: [t1, t2]}` give candidates (t1, a), (t1, b), (t2, a), (t2, b):
every zone of the preferred type first; with `spot: {enabled: true, fallback: on_demand}` the same
candidates follow on-demand once every spot one was refused. When the cloud refuses a candidate for capacity (the
room's documented codes, trainkit.clouds.capacity), apply re-renders with the next one and
applies again: terraform replaces what the refused zone holds (subnet, disks, instances), so
nothing stays behind there. A quota refusal stops at once (another zone draws on the same quota).
Each attempt is one line; the placement that came up is kept in the workspace (placement.json)
so that the next plan keeps it. When every candidate is refused, a cluster this workspace had not
applied before is destroyed again (nothing is left), and one message lists every attempt.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Callable

from trainkit import errors
from trainkit.clouds.capacity import CapacityError
from trainkit.spec.resolve import Cluster
from trainkit.stack.state import render_and_init
from trainkit.util import progress
from trainkit.workspace import Workspace

PLACEMENT_FILE = "placement.json"


Placement = tuple[str | None, str, bool]  # (zone, instance type, spot)


def candidates(cluster: Cluster) -> list[Placement]:
    """(zone, type, spot) in the order they are tried: each type's zones before the next type;
    with spot.fallback: on_demand, all of them again on-demand after the spot ones."""
    zones = cluster.spec.zone_candidates or (cluster.spec.zone,)
    types = cluster.spec.instance.type_candidates or (cluster.instance.type,)
    spot = cluster.spec.spot.enabled
    order = [(zone, kind, spot) for kind in types for zone in zones]
    if spot and cluster.spec.spot.fallback == "on_demand":
        order += [(zone, kind, False) for kind in types for zone in zones]
    return order


def placed(cluster: Cluster, zone: str | None, kind: str, spot: bool | None = None) -> Cluster:
    """The cluster with `zone`, `kind` (the catalog's entry for the type) and, when given, spot
    on or off chosen."""
    update: dict[str, Any] = {"zone": zone, "instance": cluster.spec.instance.model_copy(update={"type": kind})}
    if spot is not None and spot != cluster.spec.spot.enabled:
        update["spot"] = cluster.spec.spot.model_copy(update={"enabled": spot})
    return dataclasses.replace(cluster, spec=cluster.spec.model_copy(update=update), instance=cluster.catalog.get(kind))


def _label(cluster: Cluster, zone: str | None, kind: str, spot: bool) -> str:
    """"g5.12xlarge in us-east-1a", with the billing when the spec falls back from spot."""
    billing = f" ({'spot' if spot else 'on-demand'})" if cluster.spec.spot.fallback == "on_demand" else ""
    return f"{kind} in {zone}{billing}"


def remembered(cluster: Cluster, ws: Workspace) -> Cluster:
    """The cluster at the placement the last apply from this workspace came up on, when that is
    still one of the spec's candidates; else as the spec has it (its first candidate)."""
    try:
        kept = json.loads((ws.root / PLACEMENT_FILE).read_text())
        where = (kept["zone"], kept["type"], bool(kept.get("spot", cluster.spec.spot.enabled)))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return cluster
    return placed(cluster, *where) if len(candidates(cluster)) > 1 and where in candidates(cluster) else cluster


def apply_in_order(cluster: Cluster, ws: Workspace, attempt: Callable[[Cluster], Any]) -> tuple[Cluster, Any]:
    """`attempt(cluster)` at each candidate until one is not refused for capacity; returns
    (the cluster as placed, what attempt returned). CapacityError listing the attempts when all
    are refused (exit 4), at once on a quota refusal (a spot quota with an on-demand fallback
    skips to the on-demand candidates)."""
    order = candidates(cluster)
    if len(order) == 1:
        return cluster, attempt(cluster)
    current = remembered(cluster, ws)
    start = (current.spec.zone, current.instance.type, current.spec.spot.enabled)
    order = [start] + [c for c in order if c != start]
    fresh = ws.applied_at() is None  # nothing of this cluster existed before from here
    tried: list[str] = []
    total, n = len(order), 0
    while order:
        (zone, kind, spot), n = order.pop(0), n + 1
        here = placed(cluster, zone, kind, spot)
        where = _label(cluster, zone, kind, spot)
        try:
            result = attempt(here)
        except CapacityError as err:
            quota = err.problem.kind == "quota"
            tried.append(f"{where}: {'quota' if quota else 'no capacity'} ({err.problem.code})")
            if quota and spot and any(not c[2] for c in order):  # a spot quota: on-demand draws on another
                order = [c for c in order if not c[2]]
            elif quota:
                progress.info(f"placement {n}/{total}: {tried[-1]}")
                raise _all_refused(err, tried, quota=True) from None
            progress.info(f"placement {n}/{total}: {tried[-1]}"
                          + ("; trying the next" if order else ""))
            last = err
            continue
        progress.info(f"placement {n}/{total}: {where}: up")
        (ws.root / PLACEMENT_FILE).write_text(json.dumps({"zone": zone, "type": kind, "spot": spot}) + "\n")
        return here, result
    if fresh:
        _remove_attempts(here, ws)
    raise _all_refused(last, tried, quota=False, removed=fresh)


def _all_refused(err: CapacityError, tried: list[str], quota: bool, removed: bool = False) -> CapacityError:
    what = "a quota is used up" if quota else f"every candidate was refused ({len(tried)} tried)"
    left = "; what the attempts created was destroyed again" if removed else ""
    return CapacityError(f"{what}:\n" + "\n".join(f"  {i}. {t}" for i, t in enumerate(tried, 1)) + left,
                         err.problem, fix=err.fix, exit_code=errors.APPLY)


def _remove_attempts(cluster: Cluster, ws: Workspace) -> None:
    """Destroy what the refused attempts created (a cluster that did not exist before)."""
    runner, _ = render_and_init(cluster, ws, phase=errors.APPLY)
    if runner.state_list():
        with progress.step("terraform destroy (every candidate was refused)") as s:
            runner.on_line = s.line
            runner.destroy()
