"""The nodes of an applied cluster as trainkit reads them back, and the one way to run a script on one.

`read_nodes(inventory.yml)` is the one reader of the inventory trainkit wrote for Ansible
(trainkit.provision.inventory writes it with Ansible's keys): it merges each host's variables over
the group's, with group_vars/all.yml beside the inventory over both as Ansible does, and returns
typed `Node`s in rank order and the cluster's node `Paths`. Nothing else reads those keys.

`Node.sh(script)` is the one way to run a POSIX shell script on a node: over ssh (the inventory's
key, port and jump host, options before `--`, the checked user@host after it), or with bash here
for a `local` node. `Node.ssh_argv()` is the same ssh command line for an interactive shell
(`trainkit ssh`).

inventory.yml is a file anyone may edit: what reaches ssh (user, address, port, options) and the
numbers are checked here, an InputError naming the file, the host and the key, with the fix.
"""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainkit.errors import InputError
from trainkit.provision.inventory import inventory_hosts, load_inventory
from trainkit.util import grammar, yamlload

SSH_TIMEOUT_S = 60
# ssh options of every script run: never prompt, give up on a silent host within seconds
# (ssh_config(5): ConnectTimeout; ServerAliveInterval x ServerAliveCountMax = a 10 s dead link).
SCRIPT_SSH_OPTIONS = ("-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
                      "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=2")
REWRITE = "run `trainkit apply` to rewrite it"
PORT_MAX = 65535   # RFC 793: a 16-bit port number


@dataclass(frozen=True)
class Paths:
    """Where trainkit keeps things on a node (the roles' variables, from the inventory)."""

    root: str = "/opt/trainkit"            # trainkit_root: launch.root (code, venv, nccl.env)
    work_dir: str = "/opt/trainkit/work"   # trainkit_work_dir: runs and checkpoints
    checkpoint_root: str = ""              # trainkit_checkpoint_root ("": under work_dir)
    shared_work_dir: bool = False          # trainkit_shared_work_dir: work_dir is on the NAS
    data_root: str | None = None           # trainkit_data_root: the spec's `data:` target's root
    data_roots: dict[str, str] = field(default_factory=dict, hash=False)  # trainkit_data_roots
    disk: str | None = None                # disks_mount_point, where disks_enabled
    shared_mount: str | None = None        # nas_mount_point, where nas_enabled or the work dir is shared


@dataclass(frozen=True)
class Node:
    """One node: how to reach it and what trainkit set up there (inventory keys in the comments)."""

    name: str
    rank: int                              # trainkit_node_rank (else its place in the inventory)
    address: str = "127.0.0.1"             # ansible_host (else the name, as Ansible dials it)
    port: int | None = None                # ansible_port (None: ssh's own)
    user: str = "root"                     # ansible_user
    key_file: str | None = None            # ansible_ssh_private_key_file
    ssh_options: tuple[str, ...] = ()      # ansible_ssh_common_args, split as a shell would
    local: bool = False                    # ansible_connection: local (this machine, no ssh)
    private_ip: str = "127.0.0.1"          # trainkit_private_ip
    python: str = "python3"                # trainkit_node_python
    nproc: int = 1                         # trainkit_nproc_per_node
    rdzv_port: int = 29400                 # trainkit_rdzv_port
    paths: Paths = Paths()

    def ssh_argv(self, options: tuple[str, ...] = ()) -> list[str]:
        """ssh to this node: its key, port and jump host, then `options`; the user and address
        follow `--`, so ssh never reads them as options; anything after them is the remote command."""
        argv = ["ssh", "-o", "StrictHostKeyChecking=accept-new"]
        if self.key_file:
            argv += ["-i", self.key_file.replace("%", "%%")]  # ssh_config(5) TOKENS
        if self.port:
            argv += ["-p", str(self.port)]
        return argv + list(self.ssh_options) + list(options) + ["--", f"{self.user}@{self.address}"]

    def argv(self, script: str) -> list[str]:
        """The command running `script` (a POSIX shell string) on this node."""
        if self.local:
            return ["bash", "-c", script]
        return self.ssh_argv(SCRIPT_SSH_OPTIONS) + [script]

    def sh(self, script: str, data: bytes | None = None, timeout: float = SSH_TIMEOUT_S
           ) -> subprocess.CompletedProcess:
        """Run `script` on the node with `data` on its stdin (bytes out); rc 255 (ssh's own
        failure) or a timeout (rc 255, stderr "timed out") = unreachable."""
        try:
            return subprocess.run(self.argv(script), input=data, capture_output=True, timeout=timeout,
                                  stdin=None if data is not None else subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(self.argv(script), 255, b"", b"timed out")


def read_nodes(inventory_yml: Path) -> tuple[list[Node], Paths]:
    """The nodes in rank order and the cluster's paths (the group's variables), from
    workspace/inventory.yml and its group_vars/all.yml; InputError naming the file when broken."""
    inv = load_inventory(inventory_yml)
    group = _mapping(inv["all"].get("vars"), f"{inventory_yml}: all.vars")
    # Ansible reads group_vars/all.yml next to the inventory over the inventory's group vars.
    for extra in (inventory_yml.parent / "group_vars" / "all.yml", inventory_yml.parent / "group_vars" / "all.yaml"):
        if extra.is_file():
            more = yamlload.load_file(extra, "group vars file") or {}
            if not isinstance(more, dict):
                raise InputError(f"{extra}: group vars must be a mapping (key: value lines)",
                                 fix="fix the file; Ansible reads it too")
            group.update(more)
    return nodes_in(inv, group, str(inventory_yml))


def nodes_in(inventory: dict, group: dict[str, Any], source: str = "inventory.yml") -> tuple[list[Node], Paths]:
    """`read_nodes` on an inventory already parsed (pure): each host's variables over `group`."""
    nodes = []
    for i, (name, host) in enumerate(inventory_hosts(inventory).items()):
        merged = {**group, **_mapping(host, f"{source}: host {name}")}
        nodes.append(node_from_vars(str(name), i, merged, f"{source}: host {name}"))
    return sorted(nodes, key=lambda n: n.rank), paths_from_vars(group, f"{source}: all.vars")


def node_from_vars(name: str, index: int, hostvars: dict[str, Any], where: str = "inventory.yml") -> Node:
    """A Node from one host's variables (merged over the group's) as inventory.yml holds them;
    `index`: its place in the inventory (the rank when it names none). InputError naming `where`
    and the key for a user, address, port, option or number ssh or the launch would misread."""
    local = hostvars.get("ansible_connection") == "local"
    # Ansible dials the host's inventory name where it gives no ansible_host
    user, address = str(hostvars.get("ansible_user") or "root"), str(hostvars.get("ansible_host") or name)
    if not local:
        _checked(grammar.check_user, user, where, "ansible_user")
        _checked(grammar.check_address, address, where, "ansible_host")
    options = _checked(shlex.split, str(hostvars.get("ansible_ssh_common_args") or ""), where,
                       "ansible_ssh_common_args")
    key = hostvars.get("ansible_ssh_private_key_file")
    port = _int(hostvars, "ansible_port", 0, where)
    if not 0 <= port <= PORT_MAX:
        raise InputError(f"{where}: ansible_port: {port} is not a TCP port (1-{PORT_MAX})", fix=REWRITE)
    return Node(name=name, rank=_int(hostvars, "trainkit_node_rank", index, where), address=address,
                port=port or None, user=user,
                key_file=str(key) if key else None, ssh_options=tuple(options), local=local,
                private_ip=str(hostvars.get("trainkit_private_ip", "127.0.0.1")),
                python=str(hostvars.get("trainkit_node_python") or "python3"),
                nproc=_int(hostvars, "trainkit_nproc_per_node", 1, where),
                rdzv_port=_int(hostvars, "trainkit_rdzv_port", 29400, where),
                paths=paths_from_vars(hostvars, where))


def paths_from_vars(values: dict[str, Any], where: str = "inventory.yml") -> Paths:
    """The node paths the roles' variables in `values` give (group vars, or a host's merged ones)."""
    work = str(values.get("trainkit_work_dir", "/opt/trainkit/work"))
    roots = _mapping(values.get("trainkit_data_roots"), f"{where}: trainkit_data_roots")
    shared = bool(values.get("nas_enabled") or values.get("trainkit_shared_work_dir"))
    data_root = values.get("trainkit_data_root")
    return Paths(root=str(values.get("trainkit_root", "/opt/trainkit")), work_dir=work,
                 checkpoint_root=str(values.get("trainkit_checkpoint_root") or ""),
                 shared_work_dir=bool(values.get("trainkit_shared_work_dir")),
                 data_root=str(data_root) if data_root else None,
                 data_roots={str(k): str(v) for k, v in roots.items() if v},
                 disk=str(values.get("disks_mount_point", "/data")) if values.get("disks_enabled") else None,
                 shared_mount=str(values.get("nas_mount_point", "/mnt/shared")) if shared else None)


def _checked(check, value: str, where: str, key: str):
    try:
        return check(value)
    except ValueError as err:
        raise InputError(f"{where}: {key}: {err}", fix=REWRITE) from None


def _int(values: dict[str, Any], key: str, default: int, where: str) -> int:
    value = values.get(key, default)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    raise InputError(f"{where}: {key}: {value!r} is not a whole number", fix=REWRITE)


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(f"{where}: not a mapping of variables (key: value)", fix=REWRITE)
    return dict(value)
