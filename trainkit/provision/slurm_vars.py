"""The slurm role's inventory variables (ansible/roles/slurm) for a cluster with `scheduler: slurm`:
pure, from the cluster and its nodes to a dict. Nothing for a cluster without it (the role's
`slurm_enabled` stays false).

Every name that reaches slurm.conf is held here to NODE_NAME, the role's own `slurm_name_pattern`
(it checks again on the node): letters, digits, '_', '-' and '.', so no spec or module output
text can become a key, a second value or a line of slurm.conf (slurm.conf(5): keys are separated
by spaces, node lists by commas and brackets).
"""

from __future__ import annotations

import re
from typing import Any

from trainkit.errors import InputError
from trainkit.spec.resolve import Cluster
from trainkit.spec.slurm_block import DEFAULT_PARTITION
from trainkit.workspace import Workspace

NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}")


def node_name(cluster_name: str, rank: int) -> str:
    """The Slurm NodeName of the node at `rank` (slurmd -N): one name per place in the cluster,
    not per machine. A replacement (a spare host, a new instance) takes the lost node's rank and so
    its NodeName: slurm.conf keeps the same nodes and only the address changes, and the job Slurm
    requeued waits for that node rather than for a node slurm.conf no longer has (Slurm 22.05 left
    such a job COMPLETING with no nodes when a replacement removed the lost node's name; measured on
    namespace hosts). A cluster name is spec-checked (ClusterSpec.name), so this fits NODE_NAME."""
    return f"{cluster_name}-n{rank}"


def slurm_vars(cluster: Cluster, nodes: list[dict], ws: Workspace) -> dict[str, Any]:
    """{slurm_enabled, slurm_cluster_name, slurm_partition, slurm_munge_key_source} where the spec
    says `scheduler: slurm`, else {}. `nodes`: the inventory's nodes ({name, ...}), head first.
    InputError naming the node when its name cannot be a Slurm NodeName."""
    if cluster.spec.scheduler != "slurm":
        return {}
    for n in nodes:
        if not NODE_NAME.fullmatch(n["name"]):
            raise InputError(f"node {n['name']!r}: scheduler: slurm makes it a Slurm NodeName, which takes "
                             "letters, digits, '_', '-' and '.' only (at most 63)",
                             fix="rename the host (hosts[].name), or drop scheduler: slurm")
    given = cluster.spec.slurm.partition if cluster.spec.slurm else None
    return {"slurm_enabled": True, "slurm_cluster_name": cluster.name,
            "slurm_partition": given or DEFAULT_PARTITION,
            "slurm_munge_key_source": str(ws.munge_key.resolve())}
