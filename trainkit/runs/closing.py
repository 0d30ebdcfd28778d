"""Closing runs for good: `cancel` (one run) and `destroy` (every run on the cluster, then the
cluster). Before anything is removed, each run still going is stopped (SIGTERM: it checkpoints;
then the hard stop) and its files fetched into the workspace; also a run of ANOTHER workspace on
the same nodes (the run lock on the nodes, trainkit/runs/lock.py), whose launch.root `destroy`
would otherwise remove under the running job.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from trainkit.cluster import teardown
from trainkit.errors import DESTROY, InputError, TrainkitError
from trainkit.provision.node import read_nodes
from trainkit.runs import controller_keys, handoff, lock, remote, slurm_runs
from trainkit.runs import record as runs
from trainkit.runs import status as run_status
from trainkit.runs.attempt import nodes_of
from trainkit.runs.ending import finish
from trainkit.runs.recover import stop_survivors
from trainkit.spec.resolve import Cluster
from trainkit.util import progress
from trainkit.workspace import Workspace


def close_runs(cluster: Cluster, ws: Workspace, wait_s: float = 120,
               unreachable_ok: bool = False) -> list[tuple[str, str]]:
    """Before the nodes go (destroy): stop each run still running (SIGTERM: it checkpoints), then
    fetch every open run into runs/<id>/ and close its record. Returns [(run id, status)].
    A run whose head node cannot be reached: TrainkitError(DESTROY) (its results would be lost),
    or with `unreachable_ok` (destroy --yes: a cluster must not keep billing) a warning, and the
    run is closed as "unreachable"."""
    done = []
    for run_dir in run_status.open_runs(ws):
        attempt = len(runs.read_record(run_dir).get("attempts") or [])
        status = "cancelled" if not attempt else _stop_for_good(cluster, ws, run_dir, attempt, wait_s,
                                                                 unreachable_ok)
        finish(cluster, ws, run_dir, status)
        done.append((run_dir.name, status))
    return done


def _stop_for_good(cluster: Cluster, ws: Workspace, run_dir: Path, attempt: int, wait_s: float,
                   unreachable_ok: bool) -> str:
    """Stop `run_dir`'s attempt if it still runs; its final status (see close_runs)."""
    nodes, group = nodes_of(cluster, ws)
    if nodes[0].sh("true", timeout=15).returncode != 0:
        if not unreachable_ok:
            raise TrainkitError(f"run {run_dir.name}: its results are on {nodes[0].name}, which cannot be "
                                "reached, so nothing was destroyed", exit_code=DESTROY,
                                fix=f"make the node reachable and destroy again, or give the results up: "
                                    f"`trainkit destroy {cluster.source} --yes`")

        progress.info(f"warning: run {run_dir.name}: {nodes[0].name} cannot be reached; the results it "
                      "holds go with the cluster")
        runs.event(run_dir, "unreachable", attempt=attempt, by="destroy")
        return "unreachable"
    status = run_status.live_status(cluster, ws, run_dir)
    if status == "running":
        stop_survivors(nodes, remote.layout_for(group, run_dir.name), attempt, [], wait_s=wait_s)
        runs.event(run_dir, "cancelled", attempt=attempt, by="destroy")
        status = "cancelled"
    return status



def cancel(cluster: Cluster, ws: Workspace, run_dir: Path, wait_s: float) -> tuple[str, bool, Path]:
    """Stop a run cleanly: SIGTERM to its job on every node (it writes a checkpoint), wait up to
    `wait_s`, then SIGKILL what is left, fetch the results and close the record as cancelled.
    A run that has already ended keeps its true status (its results are fetched if not yet).
    A run handed to a controller: the controller is stopped first; its `--down` then goes on on
    its host (handoff.down_after_cancel), or, with none, its key leaves the hosts from here
    (controller_keys.end_access). Returns (status, whether it had ended before this call, the run
    folder the results are in)."""
    record = runs.read_record(run_dir)
    if not ws.inventory_yml.exists():
        raise InputError(f"no inventory in {ws.root}", fix="run `trainkit apply` first")
    if record.get("slurm_job"):   # a batch job: the scheduler stops it (scancel)
        return slurm_runs.cancel(ws, run_dir, wait_s)
    held = record.get("controller") if record.get("status") in runs.OPEN else None
    if held:
        handoff.stop_controller(cluster, ws, run_dir)   # first: its loop would relaunch what is stopped
    status = run_status.live_status(cluster, ws, run_dir)
    if status not in runs.OPEN:
        if record.get("status") in runs.OPEN:
            finish(cluster, ws, run_dir, status)
        _end_access(cluster, ws, run_dir, held, down_started=False)
        return status, True, run_dir
    nodes, group = read_nodes(ws.inventory_yml)
    attempt = len(record.get("attempts") or [])
    stop_survivors(nodes, remote.layout_for(group, run_dir.name), attempt, [], wait_s=wait_s)
    runs.event(run_dir, "cancelled", attempt=attempt)
    where = Path(finish(cluster, ws, run_dir, "cancelled")["run_dir"])
    # handed off with --down: the controller host keeps the results, tears the cluster down, ends its access
    down_started = bool(held) and handoff.down_after_cancel(cluster, ws, run_dir, held)
    _end_access(cluster, ws, run_dir, held, down_started)
    return "cancelled", False, where


def _end_access(cluster: Cluster, ws: Workspace, run_dir: Path, held: dict[str, Any] | None,
                down_started: bool) -> None:
    """A stopped controller leaves no access behind: unless its --down goes on on its host, its
    key comes off the hosts from here (a `key_revoked` event names the hosts that keep it)."""
    if held and not down_started:
        kept = controller_keys.end_access(cluster, ws, run_dir.name, held, progress.info)
        runs.event(run_dir, "key_revoked", host=held.get("host"), kept=kept)


def destroy(cluster: Cluster, ws: Workspace, *, sweep: bool, confirm_sweep, unreachable_ok: bool
            ) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Destroy the cluster, its runs first: under the workspace lock, every open run is stopped
    (SIGTERM: it checkpoints) and its results fetched, then trainkit.cluster.teardown.destroy runs.
    Returns (teardown's result, [(run id, status it was closed as)]); `unreachable_ok` lets a run
    whose nodes are gone be closed as "unreachable" instead of stopping the destroy."""
    with ws.lock("destroy"):
        closed = []
        if ws.inventory_yml.exists() and cluster.batch_jobs:
            closed = slurm_runs.close_all(ws)   # each open run's job scancelled, its folder fetched
        elif ws.inventory_yml.exists():
            closed = stop_foreign_runs(cluster, ws) + close_runs(cluster, ws, unreachable_ok=unreachable_ok)
        return teardown.destroy(cluster, ws, sweep=sweep, confirm_sweep=confirm_sweep), closed


def stop_foreign_runs(cluster: Cluster, ws: Workspace, wait_s: float = 120) -> list[tuple[str, str]]:
    """Runs of other workspaces still running on these nodes (their run lock): each is stopped
    (as `cancel` does), fetched into this workspace's runs/<id>/ with a run.json saying whose it
    was, and closed as cancelled. Returns [(run id, "cancelled")]."""
    nodes, group = nodes_of(cluster, ws)
    done = []
    for h in lock.foreign_live(nodes, remote.layout_for(group, "-"), ws.runs_dir):
        progress.info(f"run {h.run_id} of workspace {h.workspace} (on {h.controller}) runs on these "
                      "nodes: stopping it and fetching its results first")
        stop_survivors(nodes, h.lay, h.attempt, [], wait_s=wait_s)
        run_dir = ws.runs_dir / h.run_id
        remote.fetch_run(nodes, h.lay, run_dir, shared=group.shared_work_dir)
        now = time.time()
        runs.write_record(run_dir, {"run_id": h.run_id, "status": "cancelled", "created_at": now, "ended_at": now,
                                    "attempts": [{"attempt": h.attempt, "ended_at": now}],
                                    "workspace": h.workspace, "controller": h.controller,
                                    "node_run_dir": h.lay.run_dir, "checkpoint_dir": h.lay.checkpoint_dir})
        runs.event(run_dir, "cancelled", attempt=h.attempt, by="destroy of another workspace",
                   workspace=str(ws.root.resolve()))
        done.append((h.run_id, "cancelled"))
    return done
