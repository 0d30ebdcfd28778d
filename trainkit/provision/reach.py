"""Reaching nodes: the one ssh command builder (`ssh_argv`), `Node` (run a script on one node, over
ssh or locally), the nodes of an inventory in rank order, and waiting for SSH to come up.

Every other module that talks to a node (launch, remote reads, top, `trainkit ssh`) goes through here,
so the ssh options and their order (options before `--`, the checked user@host after it) live once.
"""

from __future__ import annotations

import shlex
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainkit import errors
from trainkit.errors import InputError, TrainkitError
from trainkit.provision.inventory import inventory_hosts, load_inventory
from trainkit.util import grammar, progress, yamlload


def ssh_argv(host: dict, options: tuple[str, ...] = ()) -> list[str]:
    """The ssh command line for an inventory host (its key, port and jump host, then `options`).
    The user and address are checked again (inventory.yml is a file anyone may edit) and follow
    `--`, so ssh never reads them as options; anything after them is the remote command."""
    user, address = str(host.get("ansible_user") or "root"), str(host["ansible_host"])
    try:
        grammar.check_user(user)
        grammar.check_address(address)
    except ValueError as err:
        raise InputError(f"inventory.yml: {err}", fix="run `trainkit apply` to rewrite it") from None
    argv = ["ssh", "-o", "StrictHostKeyChecking=accept-new"]
    if host.get("ansible_ssh_private_key_file"):
        argv += ["-i", str(host["ansible_ssh_private_key_file"]).replace("%", "%%")]
    if host.get("ansible_port"):
        argv += ["-p", str(int(host["ansible_port"]))]
    argv += shlex.split(host.get("ansible_ssh_common_args") or "")
    return argv + list(options) + ["--", f"{user}@{address}"]


SSH_TIMEOUT_S = 60


@dataclass(frozen=True)
class Node:
    name: str
    rank: int
    vars: dict[str, Any]          # inventory host vars merged over group vars

    @property
    def local(self) -> bool:
        return self.vars.get("ansible_connection") == "local"

    def argv(self, script: str) -> list[str]:
        """The command running `script` (a POSIX shell string) on this node."""
        if self.local:
            return ["bash", "-c", script]
        return ssh_argv(self.vars, ("-o", "BatchMode=yes", "-o", "ConnectTimeout=5",
                                    "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=2")) + [script]

    def sh(self, script: str, data: bytes | None = None, timeout: float = SSH_TIMEOUT_S
           ) -> subprocess.CompletedProcess:
        """Run `script` on the node; rc 255 (ssh's own failure) or a timeout = unreachable."""
        try:
            return subprocess.run(self.argv(script), input=data, capture_output=True, timeout=timeout,
                                  stdin=None if data is not None else subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(self.argv(script), 255, b"", b"timed out")


def nodes_from_inventory(inventory_yml: Path) -> tuple[list[Node], dict[str, Any]]:
    """Nodes in rank order and the group vars, from workspace/inventory.yml (InputError if broken)."""
    inv = load_inventory(inventory_yml)
    group = dict(inv["all"].get("vars") or {})
    # Ansible reads group_vars/all.yml next to the inventory over the inventory's group vars.
    for extra in (inventory_yml.parent / "group_vars" / "all.yml", inventory_yml.parent / "group_vars" / "all.yaml"):
        if extra.is_file():
            more = yamlload.load_file(extra, "group vars file") or {}
            if not isinstance(more, dict):
                raise InputError(f"{extra}: group vars must be a mapping (key: value lines)",
                                 fix="fix the file; Ansible reads it too")
            group.update(more)
    hosts = inventory_hosts(inv)
    nodes = [Node(name, int(v.get("trainkit_node_rank", i)), {**group, **v}) for i, (name, v) in
             enumerate(hosts.items())]
    return sorted(nodes, key=lambda n: n.rank), group


SSH_WAIT_S = 300  # cloud images usually accept SSH within 1-2 minutes of "running"


def wait_for_ssh(targets: list[tuple[str, int]], timeout_s: float = SSH_WAIT_S) -> None:
    """Block until every (host, port) accepts TCP; TrainkitError naming those that never did."""
    pending = list(targets)
    with progress.step(f"waiting for SSH on {len(pending)} node(s)") as s:
        deadline = time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            for target in list(pending):
                try:
                    socket.create_connection(target, timeout=3).close()
                    pending.remove(target)
                    s.line(f"{target[0]}:{target[1]} is up")
                except OSError:
                    pass
            if pending:
                time.sleep(2)
    if pending:
        raise TrainkitError(f"SSH did not come up within {timeout_s:.0f}s on: "
                            + ", ".join(f"{h}:{p}" for h, p in pending),
                            fix="check admin_cidrs includes your address, and the image's SSH user",
                            exit_code=errors.PROVISION)


def reachable(address: str, port: int) -> bool:
    """Whether `address:port` accepts a TCP connection within 3 s."""
    try:
        socket.create_connection((address, port), timeout=3).close()
        return True
    except OSError:
        return False
