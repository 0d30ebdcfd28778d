"""Replace what a reclaim took, and only that: hosts -> a spare host; cloud -> the lost instance.

Side effects: writes ws/hosts.json (hosts), runs terraform (cloud) and site.yml limited to the
new node(s). Every step is an event in the run's events.jsonl with how long it took.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from trainkit import runs
from trainkit.errors import TrainkitError, PREEMPTED
from trainkit.spec.resolve import Cluster
from trainkit import clouds
from trainkit.provision.reach import reachable, wait_for_ssh
from trainkit.workspace import Workspace


def replace_lost(cluster: Cluster, ws: Workspace, lost: list[str], run_dir: Path) -> Cluster:
    """The cluster with `lost` nodes replaced and provisioned; TrainkitError(PREEMPTED) when
    that is not possible (no spare left, `local`)."""
    if cluster.spec.cloud == "hosts":
        cluster, new = _swap_spares(cluster, ws, lost, run_dir)
    elif clouds.is_cloud(cluster.spec.cloud):
        from trainkit.replace_cloud import replace_instances
        new = replace_instances(cluster, ws, lost, run_dir)
        fresh = [n for n in ws.read_outputs().get("nodes") or [] if n["name"] in new and n.get("public_ip")]
        wait_for_ssh([(n["public_ip"], 22) for n in fresh])   # private ones: through the head, by Ansible
    else:
        raise TrainkitError(f"{', '.join(lost)} is unreachable and the {cluster.spec.cloud} target has "
                            "nothing to replace it with", exit_code=PREEMPTED)
    _provision(cluster, ws, new, run_dir)
    return cluster


def _swap_spares(cluster: Cluster, ws: Workspace, lost: list[str], run_dir: Path
                 ) -> tuple[Cluster, list[str]]:
    from trainkit.recover import effective_cluster

    t0 = time.time()
    hosts = cluster.spec.hosts
    active = [h.name for h in hosts if not h.spare]
    spares = [h for h in hosts if h.spare and reachable(h.address, h.port)]
    new = []
    for name in lost:
        if not spares:
            raise TrainkitError(f"host {name} is unreachable and no spare host answers on SSH",
                                fix="add a host with `spare: true` to the spec, or bring the host back "
                                    f"and resume with `trainkit train --resume {run_dir.name}`",
                                exit_code=PREEMPTED)
        spare = spares.pop(0)
        active[active.index(name)] = spare.name
        new.append(spare.name)
        runs.event(run_dir, "replaced", node=name, by=spare.name, took_s=round(time.time() - t0, 3))
    (ws.root / "hosts.json").write_text(json.dumps({"active": active, "replaced": dict(zip(lost, new))},
                                                   indent=2))
    return effective_cluster(cluster, ws), new


def _provision(cluster: Cluster, ws: Workspace, new: list[str], run_dir: Path) -> None:
    """Rewrite the inventory and run site.yml on the new node(s) only (ansible --limit)."""
    from trainkit.provision.playbook import prepare_inventory, run_site

    t0 = time.time()
    prepare_inventory(cluster, ws)
    run_site(cluster, ws, limit=new)
    runs.event(run_dir, "provisioned", nodes=new, took_s=round(time.time() - t0, 3))
