"""Failover at apply (issue 21): the spec's zone and instance-type candidates, tried in order.

`zone: [a, b]` and `instance: {type: [t1, t2]}` give candidates (t1, a), (t1, b), (t2, a), (t2, b):
every zone of the preferred type first. When the cloud refuses a candidate for capacity (the
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


def candidates(cluster: Cluster) -> list[tuple[str | None, str]]:
    """(zone, type) in the order they are tried: each type's zones before the next type."""
    zones = cluster.spec.zone_candidates or (cluster.spec.zone,)
    types = cluster.spec.instance.type_candidates or (cluster.instance.type,)
    return [(zone, kind) for kind in types for zone in zones]


def placed(cluster: Cluster, zone: str | None, kind: str) -> Cluster:
    """The cluster with `zone` and `kind` chosen (the catalog's entry for the type)."""
    spec = cluster.spec.model_copy(update={"zone": zone,
                                           "instance": cluster.spec.instance.model_copy(update={"type": kind})})
    return dataclasses.replace(cluster, spec=spec, instance=cluster.catalog.get(kind))


def remembered(cluster: Cluster, ws: Workspace) -> Cluster:
    """The cluster at the placement the last apply from this workspace came up on, when that is
    still one of the spec's candidates; else as the spec has it (its first candidate)."""
    try:
        kept = json.loads((ws.root / PLACEMENT_FILE).read_text())
        pair = (kept["zone"], kept["type"])
    except (OSError, ValueError, KeyError, TypeError):
        return cluster
    return placed(cluster, *pair) if len(candidates(cluster)) > 1 and pair in candidates(cluster) else cluster


def apply_in_order(cluster: Cluster, ws: Workspace, attempt: Callable[[Cluster], Any]) -> tuple[Cluster, Any]:
    """`attempt(cluster)` at each candidate until one is not refused for capacity; returns
    (the cluster as placed, what attempt returned). CapacityError listing the attempts when all
    are refused (exit 4), at once on a quota refusal."""
    order = candidates(cluster)
    if len(order) == 1:
        return cluster, attempt(cluster)
    current = remembered(cluster, ws)
    start = (current.spec.zone, current.instance.type)
    order = [start] + [c for c in order if c != start]
    fresh = ws.applied_at() is None  # nothing of this cluster existed before from here
    tried: list[str] = []
    for n, (zone, kind) in enumerate(order, 1):
        here = placed(cluster, zone, kind)
        try:
            result = attempt(here)
        except CapacityError as err:
            line = f"{kind} in {zone}: {'quota' if err.problem.kind == 'quota' else 'no capacity'} ({err.problem.code})"
            tried.append(line)
            progress.info(f"placement {n}/{len(order)}: {line}"
                          + ("" if n == len(order) or err.problem.kind == "quota" else "; trying the next"))
            if err.problem.kind == "quota":
                raise _all_refused(err, tried, quota=True) from None
            last = err
            continue
        progress.info(f"placement {n}/{len(order)}: {kind} in {zone}: up")
        (ws.root / PLACEMENT_FILE).write_text(json.dumps({"zone": zone, "type": kind}) + "\n")
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
