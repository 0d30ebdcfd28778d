"""Nodes the spec has and the cluster lacks: a replacement the cloud refused in every candidate.

Such a node is not gone for good: it stays in the cluster's record as `lost` (in `status`, in
the run's events, and to the next recovery, which recreates it by its index) until `trainkit
apply` brings it back when the cloud has capacity again. The modules name node i
`<cluster name>-node-<i>` (the module interface's `nodes` output, every cloud), so which nodes
are lost is read from the spec's count and the nodes the state holds (pure), never kept in a
file a sync could drop.
"""

from __future__ import annotations

import re
import shlex

from trainkit.clouds.base import NODES_TERRAFORM
from trainkit.spec.resolve import Cluster
from trainkit.workspace import Workspace


def node_name(cluster: Cluster, index: int) -> str:
    """Node `index`'s name as every module names it."""
    return f"{cluster.name}-node-{index}"


def missing(cluster: Cluster, nodes: list[dict]) -> dict[str, int]:
    """{name: index} of the spec's nodes that `nodes` (outputs.json's) does not hold (pure);
    {} for a cluster with no nodes at all (not applied, or destroyed: nothing is lost)."""
    if not nodes:
        return {}
    held = {n.get("name") for n in nodes}
    return {node_name(cluster, i): i for i in range(cluster.nodes) if node_name(cluster, i) not in held}


def indexes(cluster: Cluster, nodes: list[dict]) -> dict[str, int]:
    """{name: module index} of `nodes` (outputs.json's, in index order) and of the lost ones (pure):
    by the modules' name where it says (a node before it may be lost), else by position."""
    out = {}
    for pos, n in enumerate(nodes):
        m = re.fullmatch(re.escape(cluster.name) + r"-node-(\d+)", str(n.get("name")))
        out[n.get("name")] = int(m.group(1)) if m else pos
    return out | missing(cluster, nodes)


def lost_in(cluster: Cluster, ws: Workspace, events: list[dict]) -> list[str]:
    """The nodes a run lost for good (its `node_lost` events, `events` as runs.read_events gives
    them) that the cluster still lacks, as this workspace's outputs.json has the rest: the next
    recovery recreates them. Never a node the spec added since the last apply (no run lost it:
    that is `trainkit apply`'s to create). [] on `hosts`/`local` or before any apply."""
    named = {n for e in events if e.get("event") == "node_lost" for n in e.get("nodes") or []}
    if not named or cluster.room.node_source != NODES_TERRAFORM or not ws.outputs_json.is_file():
        return []
    return [n for n in missing(cluster, ws.read_outputs().get("nodes") or []) if n in named]


def fix(cluster: Cluster) -> str:
    """What brings lost nodes back."""
    return (f"`trainkit apply {shlex.quote(cluster.source)}` when the cloud has capacity again recreates them "
            "(more zone or instance-type candidates in the spec widen the search); then resume the run "
            "with `trainkit train SPEC --resume RUN --recover`")
