"""`trainkit status` with no spec: one row per cluster this machine knows (cluster/registry.py),
from each workspace's own records only (outputs.json, inventory.yml, applied.json, the spec it was
applied from) and the one cost model. No cloud is asked and nothing is changed: a cloud row is as
fresh as the last command run in that workspace (`as_of`); `trainkit status NAME` asks the cloud.

Status, as `sky status` names them:
    UP     the workspace holds the cluster's nodes (a cloud's outputs.json, or hosts/local's inventory.yml)
    INIT   an apply started there and has not left nodes, nor has a destroy ended since: it may have
           created resources that bill (a failed or interrupted apply); `trainkit status NAME` asks the cloud
    DOWN   destroyed, or never came up
A row whose records or spec cannot be read keeps the name, target and workspace, and says why in
`problem` (one damaged workspace never hides the others).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from trainkit import clouds
from trainkit.clouds.base import NODES_TERRAFORM
from trainkit.cluster import failover, lifecycle, registry
from trainkit.errors import InputError, TrainkitError
from trainkit.records import KnownCluster
from trainkit.spec.resolve import Cluster, load_cluster
from trainkit.workspace import Workspace


def target_of(cluster: Cluster) -> str:
    """The INFRA column: cloud/region (or zone) for a cloud, `hosts`, `local`."""
    spec = cluster.spec
    where = spec.region or spec.zone
    return f"{spec.cloud}/{where}" if cluster.room.has_catalog and where else spec.cloud


def rows(entries: list[KnownCluster], now: float | None = None) -> list[dict[str, Any]]:
    """One row per entry (see the module docstring); `now` in Unix seconds."""
    when = time.time() if now is None else now
    return [row(entry, when) for entry in entries]


def row(entry: KnownCluster, now: float) -> dict[str, Any]:
    """The row of one known cluster: {name, target, nodes, resources, status, currency, per_hour,
    cost_so_far, ttl_deadline, ttl_left_hours, idle_after_minutes, launched, as_of, workspace, spec,
    notes, problem}; unknown figures are None."""
    ws = Workspace(Path(entry.workspace), entry.name)
    out: dict[str, Any] = {"name": entry.name, "target": entry.target, "workspace": entry.workspace,
                           "spec": entry.spec, "status": None, "nodes": None, "resources": None,
                           "currency": None, "per_hour": None, "cost_so_far": None, "ttl_deadline": None,
                           "ttl_left_hours": None, "idle_after_minutes": None, "launched": None,
                           "as_of": None, "notes": [], "problem": None}
    try:
        out["status"], applied_at = _state(entry, ws)
        launched = applied_at or entry.apply_started_at
        out["launched"] = _iso(launched) if launched else None
        spec, note = registry.spec_of(entry)
        if note:
            out["notes"].append("spec changed since apply")
        out.update(_from_spec(entry, ws, spec, now, applied_at))
    except TrainkitError as err:
        out["problem"] = err.message + (f" (fix: {err.fix})" if err.fix else "")
    return out


def _state(entry: KnownCluster, ws: Workspace) -> tuple[str, float | None]:
    """(UP / INIT / DOWN from the workspace's records alone, the last apply's time or None)."""
    target = entry.target.split("/")[0]   # a record holds the target's name only
    if target in clouds.targets() and clouds.get(target).node_source == NODES_TERRAFORM:
        nodes = ws.read_outputs().get("nodes") if ws.outputs_json.exists() else None
    else:
        nodes = ws.inventory_yml.exists()
    if nodes:
        return "UP", ws.applied_at()
    started, ended = entry.apply_started_at, entry.destroyed_at
    return ("INIT" if started is not None and (ended is None or ended < started) else "DOWN"), None


def _from_spec(entry: KnownCluster, ws: Workspace, spec: Path, now: float, applied_at: float | None) -> dict:
    """Target, nodes, cost and safety nets: the spec through lifecycle.status(live=False), which
    reads the workspace's caches and never the cloud."""
    cluster = load_cluster(spec)
    if cluster.name != entry.name:
        raise InputError(f"{spec} now names cluster {cluster.name!r}, not {entry.name!r}",
                         fix=f"give the spec's path to reach {cluster.name}; put back `name: {entry.name}` "
                             f"to reach the cluster in {entry.workspace}")
    if cluster.room.has_module:
        cluster = failover.remembered(cluster, ws)
    st = lifecycle.status(cluster, ws, live=False)
    out: dict[str, Any] = {"target": target_of(cluster), "idle_after_minutes": None}
    if st["exists"]:
        inst = cluster.instance
        out["nodes"] = len(st["nodes"])
        out["resources"] = f"{len(st['nodes'])}x {inst.type}" if inst else str(len(st["nodes"]))
        out.update({k: st.get(k) for k in ("currency", "per_hour", "cost_so_far", "ttl_deadline",
                                           "ttl_left_hours", "idle_after_minutes")})
        if st.get("cached"):
            out["as_of"] = _iso(os.path.getmtime(st["cached"]))
    return out


def _iso(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def table(found: list[dict[str, Any]]) -> str:
    """The rows as `trainkit status` prints them (columns as `sky status`'s, plus money)."""
    head = ("NAME", "TARGET", "NODES", "STATUS", "COST/H", "SO FAR", "TTL/IDLE", "LAUNCHED", "WORKSPACE")
    lines = [head] + [_cells(r) for r in found]
    widths = [max(len(line[i]) for line in lines) for i in range(len(head) - 1)]
    text = ["  ".join(c.ljust(w) for c, w in zip(line, widths)) + "  " + line[-1] for line in lines]
    for r in found:
        for note in r["notes"] + ([r["problem"]] if r["problem"] else []):
            text.append(f"{r['name']}: {note}")
    if any(r["status"] == "INIT" for r in found):
        text.append("INIT: an apply started there and left no nodes; it may have created resources that bill: "
                    "`trainkit status NAME` asks the cloud, `trainkit destroy NAME` removes them")
    if any(r["as_of"] for r in found):
        text.append("cloud rows are as of the last command run in their workspace; `trainkit status NAME` asks the cloud")
    return "\n".join(text)


def _cells(r: dict[str, Any]) -> tuple[str, ...]:
    cur = f" {r['currency']}" if r["currency"] else ""
    per_hour = "-" if r["per_hour"] is None else f"{r['per_hour']:,.2f}{cur}"
    so_far = "-" if r["cost_so_far"] is None else f"{r['cost_so_far']:,.2f}{cur}"
    ttl = "-" if r["ttl_left_hours"] is None else f"{r['ttl_left_hours']:g}h"
    idle = "-" if not r["idle_after_minutes"] else f"{r['idle_after_minutes']:g}m"
    launched = (r["launched"] or "-").replace("T", " ")[:16]
    return (r["name"], r["target"] or "?", r["resources"] or "-", r["status"] or "?", per_hour, so_far,
            f"{ttl}/{idle}", launched, _short(r["workspace"]))


def _short(folder: str) -> str:
    """The workspace as a path relative to the current folder when it is under it."""
    try:
        return str(Path(folder).relative_to(Path.cwd()))
    except ValueError:
        return folder
