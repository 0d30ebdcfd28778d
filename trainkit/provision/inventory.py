"""Cluster + Terraform outputs -> the Ansible inventory (a dict, written as inventory.yml).

`inventory_for(cluster, outputs, workspace)` is pure: it reads no files and runs nothing. The
result has the YAML inventory shape Ansible reads:

    all:
      vars:     connection settings and every role's group variables (role-prefixed names)
      children:
        head:    {hosts: {<node 0>: {...}}}     node rank 0, rendezvous host, jump host
        workers: {hosts: {<node 1..>: {...}}}

Per host: ansible_host, ansible_port, ansible_user, trainkit_private_ip, trainkit_node_rank,
trainkit_nproc_per_node and, for workers without a public IP, ansible_ssh_common_args with a
ProxyCommand through the head node (ProxyJump cannot pass the cluster key to the jump hop).

Where the nodes come from: `outputs` (terraform output of the module: nodes, nas,
data_disk_device, ssh_user) for cloud targets, the spec's `hosts:` list for `hosts`, and this
machine for `local` (connection local, every path inside the workspace).
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from typing import Any, Callable

import yaml

from trainkit.clouds.base import NODES_HOSTS, NODES_LOCAL, NODES_SCHEDULER, NODES_TERRAFORM
from trainkit.errors import InputError
from trainkit.provision.slurm_vars import node_name, slurm_vars
from trainkit.spec.resolve import Cluster
from trainkit.spec.safety import idle_minutes, ttl_hours
from trainkit.spec.sshkeys import key_files, private_key_path
from trainkit.staging.stores import env_names
from trainkit.util import grammar
from trainkit.workspace import REAPPLY, Workspace

# Host groups; the head node (rank 0) is the first node of the module output / host list.
HEAD_GROUP, WORKER_GROUP = "head", "workers"
# Accept a node's host key on first use and keep it in the workspace, never in ~/.ssh.
SSH_OPTIONS = "-o StrictHostKeyChecking=accept-new -o {known_hosts}"


def inventory_for(cluster: Cluster, outputs: dict[str, Any] | None, workspace: Workspace) -> dict:
    """The Ansible inventory for `cluster`.

    `outputs` is the module's outputs as `{name: value}` (Workspace.read_outputs()); it is
    required for cloud targets and ignored for `hosts` and `local`. Raises InputError naming
    outputs.json and the field when the outputs do not describe any node.
    """
    nodes, extra = NODE_SOURCES[cluster.room.node_source](cluster, outputs, workspace)
    head = nodes[0]
    if cluster.spec.scheduler == "slurm":   # NodeName by place, not by machine (slurm_vars.node_name)
        for n in nodes:
            n["vars"]["slurm_node_name"] = node_name(cluster.name, n["vars"]["trainkit_node_rank"])
    group_vars = {**_cluster_vars(cluster, nodes, head), **_storage_vars(cluster, outputs),
                  **network_vars(cluster),
                  **_training_vars(cluster, workspace), **guard_vars(cluster),
                  **slurm_vars(cluster, nodes, workspace), **extra}
    return {"all": {
        "vars": group_vars,
        "children": {
            HEAD_GROUP: {"hosts": {head["name"]: head["vars"]}},
            WORKER_GROUP: {"hosts": {n["name"]: n["vars"] for n in nodes[1:]}},
        },
    }}


_SYSTEM_PYTHON = {"ansible_python_interpreter": "/usr/bin/python3"}

# Where the nodes come from (Cloud.node_source) -> (cluster, outputs, workspace) -> (the nodes in
# rank order, group variables of that kind of node). A new kind of target adds a row here.
NODE_SOURCES: dict[str, Callable[[Cluster, "dict[str, Any] | None", Workspace], tuple[list[dict], dict]]] = {
    NODES_TERRAFORM: lambda cluster, outputs, ws: (_output_nodes(cluster, outputs, ws), _SYSTEM_PYTHON),
    NODES_HOSTS: lambda cluster, outputs, ws: (_host_nodes(cluster, ws), _SYSTEM_PYTHON),
    NODES_LOCAL: lambda cluster, outputs, ws: (_local_nodes(cluster, ws), _local_vars(ws)),
    NODES_SCHEDULER: lambda cluster, outputs, ws: (_login_nodes(cluster, ws), {}),
}


def inventory_hosts(inventory: dict) -> dict[str, dict]:
    """`{node name: host vars}` in rank order (head first) from an inventory built by inventory_for."""
    children = inventory["all"]["children"]
    return {**children[HEAD_GROUP]["hosts"], **(children[WORKER_GROUP].get("hosts") or {})}


def _node(name: str, rank: int, host: str, private_ip: str, user: str, nproc: int,
          port: int = 22, **more: Any) -> dict:
    hostvars = {"ansible_host": host, "ansible_port": port, "ansible_user": user,
                "trainkit_private_ip": private_ip, "trainkit_node_rank": rank,
                "trainkit_nproc_per_node": nproc, **more}
    return {"name": name, "private_ip": private_ip, "vars": hostvars}


def _nproc(cluster: Cluster, gpus: int) -> int:
    return cluster.spec.launch.nproc_per_node or gpus or 1


def ssh_word(value: str) -> str:
    """`value` as one word of an ssh option that ssh percent-expands and a shell splits
    (ProxyCommand, UserKnownHostsFile): '%' doubled (ssh_config(5) TOKENS), then shlex-quoted."""
    return shlex.quote(value.replace("%", "%%"))


def known_hosts_option(known_hosts: Path) -> str:
    """`UserKnownHostsFile="PATH"`: ssh splits an option's value on whitespace (the option takes
    a list of files), so the path is double-quoted for ssh's own parser, '%' doubled for its
    TOKENS. InputError for a workspace path ssh cannot quote (a '"' or a control character)."""
    text = str(known_hosts)
    if '"' in text or any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise InputError(f"--workdir {known_hosts.parent.parent}: ssh cannot be given a file in a "
                         "folder whose path holds a '\"' or a control character",
                         fix="give --workdir a folder whose path has no quotes or control characters")
    return f'UserKnownHostsFile="{text.replace("%", "%%")}"'


def _ssh_args(key: str | None, known_hosts: Path) -> str:
    args = SSH_OPTIONS.format(known_hosts=shlex.quote(known_hosts_option(known_hosts)))
    return args + (" -o IdentitiesOnly=yes" if key else "")


def _output_nodes(cluster: Cluster, outputs: dict[str, Any] | None, ws: Workspace) -> list[dict]:
    src = str(ws.outputs_json)
    if not outputs:
        raise InputError(f"{src}: no Terraform outputs for cloud {cluster.spec.cloud}",
                         fix=f"run `trainkit apply {cluster.source}` first")
    raw = outputs.get("nodes")
    if not isinstance(raw, list) or not raw:
        raise InputError(f"{src}: field `nodes` is missing or empty",
                         fix="the module must output nodes = [{name, id, private_ip, public_ip}]; "
                             "re-run `trainkit apply`")
    user = str(outputs.get("ssh_user") or cluster.ssh_user)
    try:
        grammar.check_user(user)
    except ValueError as err:
        raise InputError(f"{src}: ssh_user: {err}", fix="re-run `trainkit apply` so outputs.json "
                         "is rewritten, or set ssh.user") from None
    key = private_key_path(cluster.spec.ssh, ws)
    known = ws.ssh_dir / "known_hosts"
    nproc = _nproc(cluster, cluster.gpus_per_node)
    nodes = []
    for i, n in enumerate(raw):
        for field in ("name", "private_ip"):
            if not isinstance(n, dict) or not n.get(field):
                raise InputError(f"{src}: nodes[{i}].{field} is missing",
                                 fix="re-run `trainkit apply` so outputs.json is rewritten")
        _check_output_node(src, i, n)
        nodes.append(_node(n["name"], i, n.get("public_ip") or n["private_ip"], n["private_ip"],
                           user, nproc, ansible_ssh_private_key_file=key,
                           ansible_ssh_common_args=_ssh_args(key, known),
                           trainkit_public_ip=n.get("public_ip"),
                           disks_serial=str(n.get("data_disk_serial") or "")))
    head = raw[0]
    if head.get("public_ip"):
        jump = _proxy_command(user, head["public_ip"], key, known)
        for node, n in zip(nodes[1:], raw[1:]):
            if not n.get("public_ip"):
                node["vars"]["ansible_ssh_common_args"] += f" {jump}"
                node["vars"]["trainkit_jump_host"] = head["public_ip"]
    return nodes


def _check_output_node(src: str, i: int, n: dict) -> None:
    """Module outputs reach ssh, the inventory and /etc/hosts: IPs and host names only."""
    checks = [("name", grammar.check_address), ("private_ip", grammar.check_ip)]
    if n.get("public_ip"):
        checks.append(("public_ip", grammar.check_ip))
    for field, check in checks:
        try:
            check(str(n[field]))
        except ValueError as err:
            raise InputError(f"{src}: nodes[{i}].{field}: {err}",
                             fix="re-run `trainkit apply` so outputs.json is rewritten") from None


def _proxy_command(user: str, jump_ip: str, key: str, known: Path) -> str:
    """ssh options reaching a private node through the head: `ssh -W` with the cluster key.
    Every part is checked (user, IP) and quoted for the shell ssh runs ProxyCommand with."""
    grammar.check_user(user)
    grammar.check_ip(jump_ip)
    hop = " ".join(["ssh", "-W", "%h:%p", "-q", "-i", ssh_word(key), "-o", "IdentitiesOnly=yes",
                    "-o", "StrictHostKeyChecking=accept-new",
                    "-o", ssh_word(known_hosts_option(known)), "--", ssh_word(f"{user}@{jump_ip}")])
    return f"-o ProxyCommand={shlex.quote(hop)}"


def _host_nodes(cluster: Cluster, ws: Workspace) -> list[dict]:
    _, priv = key_files(cluster.spec.ssh)
    key = str(priv) if priv is not None else None
    known = ws.ssh_dir / "known_hosts"
    more = {"ansible_ssh_common_args": _ssh_args(key, known)}
    if key:
        more["ansible_ssh_private_key_file"] = key
    return [_node(h.name, i, h.address, h.private_ip or h.address, h.user or cluster.ssh_user,
                  _nproc(cluster, h.gpus), h.port, **more)
            for i, h in enumerate(h for h in cluster.spec.hosts if not h.spare)]


def _login_nodes(cluster: Cluster, ws: Workspace) -> list[dict]:
    """A scheduler's cluster: its login node alone (where sbatch, squeue and scancel run); the
    compute nodes are whatever the scheduler allocates to each job (runs/slurm_runs.py)."""
    login = cluster.spec.slurm.login
    more = {"ansible_ssh_common_args": _ssh_args(login.key, ws.ssh_dir / "known_hosts")}
    if login.key:
        more["ansible_ssh_private_key_file"] = login.key
    return [_node("login", 0, login.address, login.address, login.user or cluster.ssh_user,
                  _nproc(cluster, cluster.spec.slurm.gpus_per_node), login.port, **more)]


def _local_nodes(cluster: Cluster, ws: Workspace) -> list[dict]:
    node = _node(cluster.name, 0, "127.0.0.1", "127.0.0.1", cluster.ssh_user,
                 _nproc(cluster, cluster.gpus_per_node))
    node["vars"]["ansible_connection"] = "local"
    for k in ("ansible_port", "ansible_user"):
        node["vars"].pop(k)
    return [node]


def _local_vars(ws: Workspace) -> dict:
    """This machine: no kernel, time or /etc/hosts changes, and the controller's own Python
    (which already has trainkit and torch) runs the training, so nothing is installed."""
    root = Path(ws.node_dir).resolve()
    return {"ansible_python_interpreter": sys.executable,
            "base_manage_kernel": False, "base_manage_time_sync": False,
            "base_manage_etc_hosts": False, "base_packages": ["python3-venv", "e2fsprogs"],
            # This machine is not ours to partition: never search for or format a disk here.
            "disks_enabled": False, "disks_required": False, "trainkit_root": str(root), "trainkit_work_dir": str(root / "work"),
            "trainkit_venv": str(root / "venv"), "trainkit_venv_mode": "reuse",
            # checkpoints beside the fetched run (runs/<run-id>/checkpoints): destroy keeps runs/
            "trainkit_checkpoint_root": str(Path(ws.runs_dir).resolve()),
            "trainkit_data_root": str(root / "work" / "datasets"),
            "trainkit_data_roots": {"disk": str(root / "work" / "datasets"),
                                    "nas": str(root / "work" / "datasets")},
            "trainkit_python": sys.executable,
            "trainkit_node_python": sys.executable}


def _cluster_vars(cluster: Cluster, nodes: list[dict], head: dict) -> dict:
    port = cluster.spec.launch.rdzv_port
    return {"trainkit_cluster_name": cluster.name,
            "base_cluster_name": cluster.name,
            "trainkit_nnodes": len(nodes),
            "trainkit_head_node": head["name"],
            "trainkit_rdzv_port": port,
            "trainkit_rdzv_endpoint": f"{_host_in_url(head['private_ip'])}:{port}",
            # /etc/hosts lines need an IP; nodes given by host name resolve already.
            "base_cluster_hosts": [{"name": n["name"], "ip": n["private_ip"]} for n in nodes
                                   if grammar.is_ip(n["private_ip"])]}


def _host_in_url(host: str) -> str:
    """An IPv6 address in brackets (RFC 3986 3.2.2), as torchrun's host:port endpoint needs."""
    return f"[{host}]" if ":" in host else host


def network_vars(cluster: Cluster) -> dict:
    """The network role's inputs, from the instance type and its cloud room: whether the type has
    elastic RDMA (`erdma_types`, prefixes), and whether rdma-agent configures its RDMA network
    (`rdma_agent_types`, families: the type's part before the first ".", matched exactly)."""
    prefixes, agent_families = cluster.room.erdma_types, cluster.room.rdma_agent_types
    kind = cluster.instance.type if cluster.instance is not None else ""
    family = kind.split(".", 1)[0] if "." in kind else ""
    return {"network_erdma_enabled": bool(kind) and kind.startswith(prefixes),
            "network_tencent_rdma_enabled": bool(family) and family in agent_families}


def guard_vars(cluster: Cluster) -> dict:
    """The guard role's inputs: the TTL where the cloud cannot release at a time, and idle."""

    spec = cluster.spec
    cloud_side = bool(cluster.room.ttl_argument)   # else the node does it
    ttl = ttl_hours(spec)
    return {"guard_ttl_minutes": 0 if ttl is None or cloud_side else round(ttl * 60, 2),
            "guard_idle_minutes": idle_minutes(spec) or 0}


def _storage_vars(cluster: Cluster, outputs: dict[str, Any] | None) -> dict:
    provisioned = cluster.room.has_module   # else nothing was created: no outputs to read
    outputs = outputs if provisioned else {}
    dd, nas_spec = cluster.data_disk, cluster.nas
    nas_out = (outputs or {}).get("nas") or {}
    nas_on = bool(nas_spec.get("enabled")) and bool(nas_out.get("server"))
    if provisioned and nas_spec.get("enabled") and not nas_on:
        raise InputError("outputs.json: field `nas` is empty but storage.nas.enabled is true",
                         fix="re-run `trainkit apply` so the NAS and its mount target exist")
    _check_storage_outputs(outputs or {}, nas_out, cluster.room.nfs_mount_options)
    return {"disks_enabled": bool(dd.get("enabled")),
            "disks_device": (outputs or {}).get("data_disk_device") or "",
            "disks_expected_size_gb": int(dd.get("size_gb") or 0),
            "disks_mount_point": dd.get("mount_point", "/data"),
            "nas_enabled": nas_on,
            "nas_server": nas_out.get("server") or "",
            "nas_export_path": nas_out.get("export_path") or "/",
            "nas_mount_options": nas_out.get("mount_options") or cluster.room.nfs_mount_options,
            "nas_mount_point": nas_spec.get("mount_point", "/mnt/shared")}


def _check_storage_outputs(outputs: dict, nas: dict, default_options: str) -> None:
    """What the module says about storage reaches fstab: device and export paths, the NFS
    server's address and mount options, each checked against its grammar."""
    checks = [("data_disk_device", outputs.get("data_disk_device"), grammar.check_path),
              ("nas.server", nas.get("server"), grammar.check_address),
              ("nas.export_path", nas.get("export_path"), grammar.check_path),
              ("nas.mount_options", nas.get("mount_options") or default_options, _check_mount_options)]
    for field, value, check in checks:
        if not value:
            continue
        try:
            check(str(value))
        except ValueError as err:
            raise InputError(f"outputs.json: {field}: {err}",
                             fix="re-run `trainkit apply` so outputs.json is rewritten") from None


def _check_mount_options(value: str) -> str:
    """fstab mount options: comma-separated words, nothing that could end the field."""
    if not re.fullmatch(r"[A-Za-z0-9_=,.:+-]+", value):
        raise ValueError(f"{value!r} is not a comma-separated list of mount options")
    return value
def _data_vars(cluster: Cluster, work: str) -> dict:
    """The spec's `data:` section and where each target lands: the NAS (staged once, by the head
    node) or each node's data disk (else its work folder). `trainkit_data_roots` serves a job's
    own `stage:` section (stage_vars)."""
    section = cluster.spec.data
    disk = (f"{cluster.data_disk['mount_point'].rstrip('/')}/datasets"
            if cluster.data_disk.get("enabled") else f"{work}/datasets")
    shared = bool(cluster.nas.get("enabled"))
    roots = {"disk": disk, "nas": f"{cluster.nas['mount_point'].rstrip('/')}/{cluster.name}/datasets"
             if shared else disk}

    return {"trainkit_data": section.model_dump(mode="json") if section.sources else {},
            "trainkit_data_env_names": env_names(), "trainkit_data_roots": roots,
            "trainkit_data_root": roots[section.target],
            "trainkit_data_once": section.target == "nas" and shared}


def stage_vars(section: Any, roots: dict[str, str], data_root: str | None, shared: bool) -> dict:
    """Extra vars that make ansible/stage.yml stage `section` (a job's `stage:`, a DataSection)
    instead of the spec's `data:`, into its target's root among `roots` (else `data_root`), as the
    inventory gives them (trainkit.provision.node.Paths); `shared`: the work dir is on the NAS."""
    return {"trainkit_data": section.model_dump(mode="json"),
            "trainkit_data_root": roots.get(section.target) or data_root,
            "trainkit_data_once": section.target == "nas" and shared}


def _training_vars(cluster: Cluster, ws: Workspace) -> dict:
    """Node paths: code and venv under launch.root; checkpoints and runs on the NAS when there is
    one (shared by all nodes), else on the data disk, else under launch.root."""
    launch = cluster.spec.launch
    root = launch.root
    if cluster.nas.get("enabled"):
        work = f"{cluster.nas['mount_point'].rstrip('/')}/{cluster.name}"
    elif cluster.data_disk.get("enabled"):
        work = f"{cluster.data_disk['mount_point'].rstrip('/')}/trainkit"
    else:
        work = f"{root}/work"
    return {"trainkit_root": root, "trainkit_work_dir": work, **_data_vars(cluster, work),
            "trainkit_shared_work_dir": bool(cluster.nas.get("enabled")),
            "trainkit_venv": f"{root}/venv", "trainkit_venv_mode": "venv",
            "trainkit_python": launch.python, "trainkit_node_python": f"{root}/venv/bin/python"}


def load_inventory(path: Path) -> dict[str, Any]:
    """inventory.yml parsed, in the shape trainkit.provision.inventory writes; InputError naming the
    file (a missing one: the cluster was not applied from this workspace, not a file edited by hand)."""
    if not path.exists():
        raise InputError(f"{path}: no inventory here: the cluster has not been applied from this workspace",
                         fix="run `trainkit apply SPEC` first (it writes the inventory)")
    try:
        inventory = yaml.safe_load(path.read_text())
        inventory_hosts(inventory)
    except (OSError, ValueError, yaml.YAMLError, KeyError, TypeError, AttributeError) as err:
        detail = f"no {err} in it" if isinstance(err, KeyError) else str(err).splitlines()[0]
        raise InputError(f"{path}: not an inventory as trainkit writes it ({detail}; edited by hand?)",
                         fix=REAPPLY) from None
    return inventory
