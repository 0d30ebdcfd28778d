"""A run's status as its nodes have it now, for the commands that must not act on a busy cluster
or a finished run (train, cancel, destroy). Reads run.json and asks each node's supervisor state
(one ssh per node); changes nothing.
"""

from __future__ import annotations

from pathlib import Path

from trainkit import launch, runs
from trainkit.provision import reach
from trainkit.spec.resolve import Cluster
from trainkit.workspace import Workspace


def live_status(cluster: Cluster, ws: Workspace, run_dir: Path) -> str:
    """The run's status now: its record's once closed (results fetched); else what the nodes'
    supervisors say for its newest attempt (`runs.combined_status`); "starting" when no attempt
    was launched. InputError when run.json cannot be read."""
    record = runs.read_record(run_dir)
    status = record.get("status") or "unknown"
    attempt = len(record.get("attempts") or [])
    if status not in runs.OPEN or not ws.inventory_yml.exists():
        return status
    if not attempt:
        return "starting"
    nodes, group = reach.nodes_from_inventory(ws.inventory_yml)
    states = launch.node_states(nodes, launch.layout_for(group, run_dir.name), attempt)
    return runs.combined_status([s.status for s in states])


def open_runs(ws: Workspace) -> list[Path]:
    """Runs whose record is not closed (their results are still on the nodes), oldest first."""
    if not ws.runs_dir.is_dir():
        return []
    found = sorted((p for p in ws.runs_dir.iterdir() if (p / "run.json").is_file()), key=runs.created_at)
    return [p for p in found if runs.read_record(p).get("status") in runs.OPEN]


def active_runs(cluster: Cluster, ws: Workspace) -> list[Path]:
    """Runs whose jobs are running on the nodes now."""
    return [p for p in open_runs(ws) if runs.read_record(p).get("attempts")
            and live_status(cluster, ws, p) == "running"]
