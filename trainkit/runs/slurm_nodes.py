"""`train --recover` on a cluster trainkit provisions with `scheduler: slurm`: a node Slurm has lost
is replaced as on every provisioned cluster, and Slurm's requeued job starts again on it.

Slurm notices the loss itself (slurmctld marks a node that stops answering DOWN after
SlurmdTimeout, slurm.conf(5), and requeues its job: `--requeue`), but it cannot bring a machine
back. So while the run is followed, `NodeWatch.check` reads the partition's node states every
CHECK_S seconds; an active node Slurm has set DOWN or FAIL (sinfo(1) NODE STATE CODES) is replaced
through cluster/replace.py (a new instance by a targeted Terraform apply on a cloud, a spare host
on `hosts`), whose site.yml run rewrites slurm.conf on every active node (cluster/replace.py
site_limit). A drained node (the health check's verdict, or an admin's) is left to whoever drained
it: `trainkit doctor` names it.

The replacement takes the lost node's NodeName (provision/slurm_vars.node_name: `<cluster>-n<rank>`,
a name per place): slurm.conf keeps its nodes and only that node's address changes, the new slurmd
registers under the name and Slurm returns the node to service (ReturnToService=2), and the
requeued job starts on it. A replacement that removed the lost node's name from slurm.conf left the
requeued job COMPLETING with no nodes for good (Slurm 22.05, 3 of 5 runs on namespace hosts, also
when the replacement waited for DOWN and for the job to leave COMPLETING). The check still waits
for DOWN/FAIL (a `*` suffix alone is a node that stopped answering, not yet given up) and for a job
state other than COMPLETING.

Only where the room replaces nodes (Cloud.replacement other than REPLACE_NONE): on a site's own
Slurm (`cloud: slurm`) the site's admins own the machines.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import Callable

from trainkit.clouds.base import REPLACE_NONE
from trainkit.cluster.replace import replace_lost
from trainkit.cluster.scheduler import login, settings
from trainkit.cluster.scheduler_doctor import node_states
from trainkit.cluster.slurm_version import SINFO_NODES
from trainkit.errors import TrainkitError
from trainkit.provision.node import read_nodes
from trainkit.provision.slurm_vars import node_name
from trainkit.runs import record as runs
from trainkit.spec.resolve import Cluster
from trainkit.workspace import Workspace

# Seconds between reads of the partition's node states while a run is followed: sinfo is one
# RPC to slurmctld, and a loss is only seen after SlurmdTimeout anyway (300 s by default, the
# role's slurm_slurmd_timeout), so a check every 15 s adds at most 5% to that wait.
CHECK_S = 15.0
# sinfo's %T words for a node Slurm has given up on (sinfo(1) NODE STATE CODES)
LOST_STATES = ("down", "fail", "failing")


def lost(sinfo_text: str, active: list[str]) -> list[str]:
    """The `active` nodes `sinfo -N -h -o '%N|%T|%E'` shows as lost (down or fail, whether or not
    they answer: `down*`), in `active`'s order. A drained node is not lost, nor one that only stops
    answering (`idle*`, `allocated*`: not DOWN yet). Pure."""
    gone = set()
    for name, state, _ in node_states(sinfo_text):
        words = state.lower().rstrip("*~#!%$@^-").split("+")
        if any(w in LOST_STATES for w in words):
            gone.add(name)
    return [n for n in active if n in gone]


def slurm_names(cluster_name: str, nodes: list[str]) -> dict[str, str]:
    """{Slurm NodeName: node name} of the inventory's `nodes` in rank order (slurm_vars.node_name:
    a NodeName belongs to a place, not to a machine). Pure."""
    return {node_name(cluster_name, rank): name for rank, name in enumerate(nodes)}


def replaces_nodes(cluster: Cluster) -> bool:
    """Whether `train --recover` replaces the nodes Slurm lost on this cluster (module doc)."""
    return cluster.room.replacement != REPLACE_NONE


class NodeWatch:
    """The check of one followed run (module doc); `check()` is called on every poll and reads
    sinfo at most every CHECK_S seconds. A set of lost nodes that could not be replaced (no spare
    left, capacity refused) is said once and not tried again while the run is followed: the job
    stays queued until a node comes back (Slurm's ReturnToService) or the user cancels it."""

    def __init__(self, cluster: Cluster, ws: Workspace, run_dir: Path, say: Callable[[str], None]):
        self.cluster, self.ws, self.run_dir, self.say = cluster, ws, run_dir, say
        self.next_at, self.given_up = 0.0, set()
        # NodeNames whose replacement joined: still DOWN in sinfo until the new slurmd registers
        # (the name stays: slurm_vars.node_name), so not lost again before they were seen back
        self.rejoining: set[str] = set()

    def check(self, job_state: str | None) -> None:
        """`job_state`: the followed job's state now (squeue %T); nothing is replaced while it is
        COMPLETING (module doc)."""
        if time.monotonic() < self.next_at or job_state == "COMPLETING":
            return
        self.next_at = time.monotonic() + CHECK_S
        by_slurm = slurm_names(self.cluster.name, [n.name for n in read_nodes(self.ws.inventory_yml)[0]])
        partition = settings(self.cluster, self.ws).partition
        res = login(self.ws).sh(f"sinfo -N -h -p {shlex.quote(partition)} -o {shlex.quote(SINFO_NODES)}",
                                timeout=60)
        if res.returncode != 0:
            return   # the head did not answer this time: the follow loop says what the job does
        down = lost(res.stdout.decode(errors="replace"), list(by_slurm))
        self.rejoining &= set(down)
        gone = [by_slurm[n] for n in down if n not in self.rejoining and by_slurm[n] not in self.given_up]
        if gone:
            self._replace(gone, {node: name for name, node in by_slurm.items()})

    def _replace(self, gone: list[str], slurm_name: dict[str, str]) -> None:
        names = ", ".join(gone)
        self.say(f"run {self.run_dir.name}: Slurm lost {names}; replacing (--recover): the requeued job "
                 "starts again once the new node joins the partition")
        try:
            self.cluster = replace_lost(self.cluster, self.ws, gone, f"trainkit train --resume {self.run_dir.name}",
                                        record=lambda ev: runs.record_events(self.run_dir, [ev]))
        except TrainkitError as err:
            self.given_up.update(gone)
            runs.event(self.run_dir, "replacement_failed", nodes=gone, error=err.message)
            self.say(f"run {self.run_dir.name}: {names} not replaced: {err.message}; the job stays queued "
                     f"until Slurm has the nodes it asks for (fix: {err.fix or 'bring the node back'})")
            return
        self.rejoining.update(slurm_name[n] for n in gone)
        self.say(f"run {self.run_dir.name}: {names} replaced; the new node(s) joined the partition")
