"""A scheduler's cluster (Cloud.node_source NODES_SCHEDULER: target `slurm`) as `apply` and
`destroy` see it: nothing is provisioned or torn down; the workspace's inventory holds the login
node alone (provision/inventory.py's `scheduler` row). A provisioned cluster with `scheduler:
slurm` (ansible/roles/slurm) is reached the same way: its head node is the login node.

    login(ws)              the login node as `apply` recorded it
    remote_root(cluster)   trainkit's one folder on the shared storage (workdir(cluster)/.trainkit/<cluster>)
    settings(cluster, ws)  what a batch job asks for: the `slurm:` block, or (scheduler: slurm) the cluster's
    job_state(node, job_id)   squeue, then sacct, then scontrol (flags Slurm 20.11 has)
    job_view(node, job_id)    the same, with scontrol's Restarts= (a requeue: runs/slurm_follow.py)
    jobs(ws)               status: the open runs' jobs and their states
    check_login(cluster, ws)  apply: ssh, `sbatch --version` (20.11+: cluster/slurm_version.py),
                           the partition in `sinfo`
    clean(cluster, ws)     destroy: that folder removed through the login node; nothing else touched
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from trainkit.cluster import slurm_version
from trainkit.cluster.slurm_version import SACCT_STATE, SQUEUE_STATE
from trainkit.errors import DESTROY, InputError, TrainkitError
from trainkit.provision.node import Node, read_nodes
from trainkit.spec.resolve import Cluster
from trainkit.spec.slurm_block import DEFAULT_PARTITION, PROVISIONED_FIELDS, SlurmSpec
from trainkit.workspace import Workspace

# Job states in which a job still holds or waits for an allocation (squeue(1) JOB STATE CODES).
LIVE = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD", "RESIZING",
        "SUSPENDED", "STAGE_OUT", "SIGNALING")
_SSH_TIMEOUT_S = 60   # a login node answers `sbatch --version` or `sinfo` within seconds


def login(ws: Workspace) -> Node:
    """The login node as `apply` recorded it (inventory.yml: its only host)."""
    return read_nodes(ws.inventory_yml)[0][0]


def remote_root(cluster: Cluster) -> str:
    """trainkit's folder on the shared storage for this cluster: nothing outside it is written."""
    return f"{workdir(cluster).rstrip('/')}/.trainkit/{cluster.name}"


def workdir(cluster: Cluster) -> str:
    """The folder every node shares: slurm.workdir on a site's cluster; with `scheduler: slurm`,
    the cluster's shared storage (storage.nas.mount_point: the NAS trainkit mounts on a cloud, the
    share the user mounted on `hosts`; the spec refuses scheduler: slurm without it)."""
    if cluster.spec.scheduler == "slurm":
        return cluster.spec.storage.nas.mount_point
    return cluster.spec.slurm.workdir


def settings(cluster: Cluster, ws: Workspace) -> SlurmSpec:
    """What a batch job asks for (runs/sbatch.py's BatchJob.slurm): the spec's `slurm:` block on a
    site's cluster; with `scheduler: slurm`, what ansible/roles/slurm made of the cluster (the head,
    inventory.yml's first host, is the login node; the partition is slurm.partition, else
    DEFAULT_PARTITION; GPUs per node the cluster's; the nodes' trainkit Python), with the optional
    block's partition/time/signal_s."""
    given = cluster.spec.slurm
    if cluster.spec.scheduler != "slurm":
        return given
    head = login(ws)
    own = given.model_dump(include=set(PROVISIONED_FIELDS), exclude_unset=True) if given else {}
    return SlurmSpec.model_validate({"partition": DEFAULT_PARTITION, "workdir": workdir(cluster),
                                     "python": head.python, "gpus_per_node": cluster.gpus_per_node,
                                     **own})


def check_login(cluster: Cluster, ws: Workspace) -> dict[str, Any]:
    """The login node answers over ssh, runs `sbatch --version` (Slurm 20.11 or newer:
    cluster/slurm_version.py), and lists the spec's partition (`sinfo -h -p P -o %P`). Returns
    {login, slurm_version}; InputError naming the field."""
    node, s = login(ws), cluster.spec.slurm
    res = node.sh("sbatch --version", timeout=_SSH_TIMEOUT_S)
    if res.returncode != 0:
        said = (res.stderr or res.stdout).decode(errors="replace").strip()[-400:]
        raise InputError(f"slurm.login: {s.login.address} did not run `sbatch --version` "
                         f"(exit {res.returncode}): {said}",
                         fix="check slurm.login (address, port, user, key) and that Slurm's client "
                             "commands are on the login node's PATH")
    version = slurm_version.supported(res.stdout.decode(errors="replace"), s.login.address)
    if s.partition:
        res = node.sh(f"sinfo -h -p {shlex.quote(s.partition)} -o %P", timeout=_SSH_TIMEOUT_S)
        if res.returncode != 0 or not res.stdout.strip():
            raise InputError(f"slurm.partition: {s.partition!r} is not a partition of the cluster at "
                             f"{s.login.address}", fix="give one that `sinfo -s` lists on the login node")
    return {"login": s.login.address, "slurm_version": slurm_version.shown_version(version)}


def job_state(node: Node, job_id: str) -> str | None:
    """The job's state: `squeue -h -j ID -o %T`, then `sacct -n -P -j ID -o State` for a job squeue
    no longer lists (flags both have had since before Slurm 20.11), then `scontrol show job`'s
    JobState; None when nothing knows it. ValueError for a job id that is not a number."""
    return job_view(node, job_id)[0]


def job_view(node: Node, job_id: str) -> tuple[str | None, int | None]:
    """(state as job_state has it, Slurm's restart count of the job: `scontrol show job`'s
    Restarts=, None once scontrol no longer knows the job), in one ssh."""
    if not job_id.isdigit():
        raise ValueError(f"job id {job_id!r}")
    res = node.sh(f"squeue -h -j {job_id} -o {SQUEUE_STATE} 2>/dev/null; "
                  f"sacct -n -P -X -j {job_id} -o {SACCT_STATE} 2>/dev/null; "
                  f"scontrol show job {job_id} 2>/dev/null | grep -o 'JobState=[A-Z_]*\\|Restarts=[0-9]*'",
                  timeout=_SSH_TIMEOUT_S)
    return parse_view(res.stdout.decode(errors="replace"))


def parse_view(text: str) -> tuple[str | None, int | None]:
    """job_view's output -> (state, restarts). The state: squeue's (or sacct's) first word, else
    scontrol's JobState= (no accounting, gone from squeue: scontrol remembers a job MinJobAge s);
    sacct writes "CANCELLED by 0" and "RUNNING+" for a state cut short: the state is the word."""
    words = text.split()
    plain = [w for w in words if "=" not in w]
    keyed = dict(w.split("=", 1) for w in words if w.startswith(("JobState=", "Restarts=")))
    state = plain[0].rstrip("+") if plain else keyed.get("JobState") or None
    restarts = keyed.get("Restarts")
    return state, int(restarts) if restarts and restarts.isdigit() else None


def jobs(ws: Workspace) -> dict[str, dict[str, str | None]]:
    """`status`: {run id: {slurm_job, state}} of the workspace's runs not closed yet, as the
    scheduler has them now."""
    out: dict[str, dict[str, str | None]] = {}
    node = None   # read from the inventory once, when an open run needs it
    for path in sorted(ws.runs_dir.glob("*/run.json")) if ws.runs_dir.is_dir() else []:
        try:
            record = json.loads(path.read_text())
        except (OSError, ValueError):   # an unreadable record: `trainkit runs` names it; status goes on
            continue
        job = record.get("slurm_job") if isinstance(record, dict) else None
        if isinstance(job, str) and job.isdigit() and record.get("status") in ("starting", "running"):
            node = node or login(ws)
            out[path.parent.name] = {"slurm_job": job, "state": job_state(node, job)}
    return out


def clean(cluster: Cluster, ws: Workspace) -> None:
    """Remove trainkit's folder (remote_root) from the shared storage through the login node;
    TrainkitError(DESTROY) naming the command when the login node does not do it."""
    root, node = remote_root(cluster), login(ws)
    res = node.sh(f"rm -rf -- {shlex.quote(root)}", timeout=_SSH_TIMEOUT_S)
    if res.returncode != 0:
        raise TrainkitError(f"could not remove {root} on {node.address} "
                            f"(exit {res.returncode}): {res.stderr.decode(errors='replace').strip()[-300:]}",
                            fix=f"remove it on the login node (`rm -rf {shlex.quote(root)}`), then destroy "
                                "again", exit_code=DESTROY)
