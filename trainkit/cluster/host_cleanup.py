"""`destroy` on machines trainkit does not own: clean every host that ran trainkit, say which could not be.

cleanup.yml (launch.root removed, the NAS and data disk unmounted) runs on the hosts of the
cluster's one record of active hosts (hosts.json, cluster.replace) and on the hosts recoveries
took out of it (`replaced`: they held launch.root when they went). A host that does not answer on
SSH is not a reason to keep the cluster (the machines are the user's, nothing bills): the others
are cleaned, and each one left is named with how to clean it by hand. An unreachable host is a
warning, not exit DESTROY: that code means something still bills or the state is not empty
(trainkit.errors.EXIT_CODES), and running `destroy` again could not reach the host either.
"""

from __future__ import annotations

import dataclasses
import shlex

from trainkit import records
from trainkit.cluster.replace import HOSTS_FIX, effective_cluster
from trainkit.provision.playbook import run_cleanup
from trainkit.provision.reach import reachable
from trainkit.spec.resolve import Cluster
from trainkit.workspace import Workspace


def clean_hosts(cluster: Cluster, ws: Workspace) -> list[dict]:
    """cleanup.yml on the hosts that ran trainkit and answer; [{host, address, fix}] for those that
    do not (the fix: the command that removes launch.root there). A cluster without `hosts`
    (`local`) is cleaned as a whole. TrainkitError(DESTROY) when the playbook fails on a host that
    answers."""
    if not cluster.spec.hosts:
        run_cleanup(cluster, ws)
        return []
    effective = effective_cluster(cluster, ws)
    record = records.load(ws.hosts_json, records.Hosts, HOSTS_FIX) if ws.hosts_json.is_file() else None
    gone_before = set(record.replaced) if record else set()
    used = [h for h in effective.spec.hosts if not h.spare or h.name in gone_before]
    up = [h for h in used if reachable(h.address, h.port)]
    if up:
        names = {h.name for h in up}
        hosts = tuple(h.model_copy(update={"spare": h.name not in names}) for h in effective.spec.hosts)
        run_cleanup(dataclasses.replace(effective, spec=effective.spec.model_copy(update={"hosts": hosts})), ws)
    return [not_cleaned(cluster, h) for h in used if h not in up]


def not_cleaned(cluster: Cluster, host) -> dict:
    """{host, address, fix} of a host destroy could not reach (pure)."""
    root = cluster.spec.launch.root
    user = host.user or cluster.ssh_user
    ssh = f"ssh -p {host.port} {shlex.quote(f'{user}@{host.address}')} sudo rm -rf {shlex.quote(root)}"
    return {"host": host.name, "address": host.address,
            "fix": f"when it answers again: `{ssh}`, and unmount what apply mounted there (the NAS, a data disk)"}
