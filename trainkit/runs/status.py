"""A run's status as its nodes have it now, for the commands that must not act on a busy cluster
or a finished run (train, cancel, destroy). Reads run.json and asks each node's supervisor state
(one ssh per node); changes nothing.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

from trainkit.runs import remote
from trainkit.runs import record as runs
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
    states = remote.node_states(nodes, remote.layout_for(group, run_dir.name), attempt)
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


class Follower:
    """Reads the head's log and metrics.jsonl incrementally; prints the log when asked to."""

    def __init__(self, head: reach.Node, lay: remote.Layout, job: runs.Job, echo: Callable[[str], None] | None):
        self.head, self.lay, self.echo = head, lay, echo
        name = "rank-0.log" if job.command is None else "node-0.log"
        self.log = f"{lay.run_dir}/logs/{name}"
        self.offsets = {"log": 0, "metrics": 0}
        self.partial = b""
        self.last_step: int | None = None
        self.resumed_from: int | None = None
        self.first_step_at: float | None = None
        self.step_time_s: float | None = None

    def poll(self) -> None:
        if self.echo:
            data, _ = remote.read_from(self.head, self.log, self.offsets["log"])
            self.offsets["log"] += len(data)
            for line in data.decode(errors="replace").splitlines():
                self.echo(line)
        data, _ = remote.read_from(self.head, f"{self.lay.run_dir}/metrics.jsonl", self.offsets["metrics"])
        text = (self.partial + data).split(b"\n")
        self.partial = text.pop()
        self.offsets["metrics"] += len(data)
        for line in text:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("kind") == "run":
                self.resumed_from, self.first_step_at = rec.get("resumed_from_step"), None
            elif rec.get("kind") in ("step", "checkpoint", "epoch") and rec.get("step") is not None:
                self.last_step = rec["step"]
                if rec.get("kind") == "step":
                    self.step_time_s = rec.get("step_time_s", self.step_time_s)
                    if self.first_step_at is None:
                        self.first_step_at = rec.get("time", time.time())
