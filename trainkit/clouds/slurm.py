"""`slurm`: a Slurm cluster the user's site already runs, reached by SSH to its login node.

A room like `hosts` (SkyPilot's sky/clouds/slurm.py is one too): nothing is provisioned (no module,
no catalog, no state backend) and trainkit installs nothing on the cluster. The nodes are whatever
the scheduler allocates to one batch job (`node_source`: NODES_SCHEDULER); the spec's `slurm:` block
names the login node and what the job asks for (partition, account, qos, time, GPUs, constraint),
and `nodes:` how many nodes. A lost node is not replaced by trainkit: the job carries `--requeue`,
Slurm starts it again on other nodes and the engine resumes from the newest checkpoint on the
shared `slurm.workdir` (`replacement`: REPLACE_NONE, as far as trainkit's own recovery goes).
trainkit never shuts the site's machines down (no ttl/idle) and mounts no storage (the site's
shared filesystem holds `slurm.workdir`). The batch script: trainkit/runs/sbatch.py.
"""

from __future__ import annotations

from typing import Any

from trainkit.clouds.base import NODES_SCHEDULER, REPLACE_NONE, USER_CURRENT, Cloud


def _read_rules(s: Any) -> list[str]:
    """What `cloud: slurm` refuses as the spec is read; each string names its field first."""
    out: list[str] = []
    if s.slurm is None:
        out.append("slurm: required for cloud: slurm: give at least slurm.login.address (the login "
                   "node) and slurm.workdir (a folder every node shares)")
    elif s.slurm.login is None or s.slurm.workdir is None:
        out.append(f"slurm.{'login' if s.slurm.login is None else 'workdir'}: required for cloud: slurm "
                   "(slurm.login.address: the login node; slurm.workdir: a folder every node shares)")
    if s.hosts:
        out.append("hosts: the scheduler chooses the nodes on cloud: slurm; remove `hosts` "
                   "(the login node is slurm.login)")
    return out


CLOUD = Cloud(
    name="slurm",
    title="a Slurm cluster",
    provider_source="",
    provider_version="",
    has_module=False,
    has_catalog=False,
    node_source=NODES_SCHEDULER,
    replacement=REPLACE_NONE,
    default_ssh_user=USER_CURRENT,
    installs_key=False,
    shared_storage=False,
    safety_nets=False,
    schedulers=(),
    read_rules=_read_rules,
)
