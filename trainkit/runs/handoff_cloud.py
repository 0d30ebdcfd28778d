"""Hand a cloud run's recovery loop to the controller instance its module rendered (issue 42):
the I/O. The decisions are controller.py's and controller_host.py's; the steps shared with target
`hosts` are handoff.py's.

hand_off() after the run's first attempt is launched (runs/start.run):
  1. the controller instance (output `controller`: public_ip, else private_ip through the head)
     over ssh with the cluster's key (the instance carries the cluster's key pair);
  2. set up by ansible/controller.yml through ansible-runner: the trainkit role (the node wheel
     with the `control` extra and the cloud's SDK extra, as nodes get theirs) and the controller
     role (a terraform binary: `controller_terraform_url` in group vars on a real cloud, else this
     machine's own terraform copied);
  3. a NEW key pair made on the controller (handoff.keygen), authorized on every current node;
  4. one tar to its folder (controller.HandOff.dir): the spec (ssh.private_key: the new key,
     ssh.public_key: the cluster's public half, unchanged for Terraform), the train config, the
     provider mirror config (TF_CLI_CONFIG_FILE, when set and free of registry credentials), and
     the loop's workspace: terraform/ root files and module copy with .terraform.lock.hcl (never
     .terraform/, a state or a plan), outputs.json, applied.json, hosts.json, group_vars,
     host_vars, an inventory rendered for it, the run's record and events. Every file is checked
     for the value of any credential variable set here before it leaves (TrainkitError if found);
  5. the loop started under the service manager with a clean environment (`env -i`: PATH, HOME,
     TRAINKIT_TERRAFORM, TF_CLI_CONFIG_FILE, TRAINKIT_INSTANCE_IDENTITY=1 (stack/render.py: the
     metadata lookup stays on with custom endpoints) and controller_host.loop_env's non-secret names: no
     cloud's keys): terraform and the SDKs on the controller take the instance identity's
     credentials from the metadata service;
  6. run.json names the controller (with its address), a `handed_off` event, the lock on every node.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Any, Callable

import yaml

from trainkit.clouds import all_clouds
from trainkit.clouds.credentials import INSTANCE_IDENTITY
from trainkit.errors import InputError, TrainkitError
from trainkit.provision import playbook
from trainkit.provision.inventory import inventory_for
from trainkit.provision.node import Node, read_nodes
from trainkit.runs import controller as ctl
from trainkit.runs import controller_host as ch
from trainkit.runs import handoff, lock, remote
from trainkit.runs import record as runs
from trainkit.spec.resolve import Cluster
from trainkit.spec.sshkeys import public_key_text
from trainkit.stack.terraform import terraform_path
from trainkit.util import yamlload
from trainkit.workspace import Workspace

PLAY = "controller.yml"
# What of the workspace's terraform/ never travels: provider binaries (.terraform/: the controller's
# `terraform init` fetches its own), any local state or plan (values of every resource).
NEVER_DIR = ".terraform"
NEVER_SUFFIX = (".tfstate", ".tfstate.backup", ".tfplan", ".bin")


def hand_off(cluster: Cluster, ws: Workspace, run_dir: Path, opts: Any, down: bool,
             say: Callable[[str], None]) -> dict[str, Any]:
    """Steps 1-6 of the module doc for the run in `run_dir`; returns run.json's `controller`.
    TrainkitError naming what failed (the run keeps running on the nodes)."""
    record = runs.read_record(run_dir)
    config = Path(record["config"])
    host = ch.node(ws)
    plan = ctl.HandOff(run_dir.name, host.name, host.paths.root, host.python, config.name)
    say(f"run {run_dir.name}: setting up the controller at {host.address} ({PLAY})")
    set_up(cluster, ws, host)
    public = handoff.keygen(host, plan)
    handoff.authorize(ch.current_nodes(ws), public, plan)
    rc = _mirror_config()
    handoff.ship(host, plan, handoff.tar(bundle(cluster, ws, run_dir, plan, config, down, rc, public)))
    argv = clean_argv(plan, plan.argv(ctl.loop_options(opts, down)), cluster.room, os.environ, rc is not None)
    service = handoff.must(host, ctl.start_script(plan, argv), plan, "start the loop").strip().splitlines()[-1]
    held = {**plan.record(service, down, public), "address": host.address}   # the line on every node
    runs.write_record(run_dir, {**runs.read_record(run_dir), "controller": held})
    runs.event(run_dir, "handed_off", host=host.name, service=service, dir=plan.dir, down=down)
    nodes, group = read_nodes(ws.inventory_yml)
    lock.take(nodes, remote.layout_for(group, run_dir.name), len(record.get("attempts") or []), plan.ws,
              controller=host.name)
    say(f"run {run_dir.name}: its recovery loop runs on the controller {host.address} ({service}, log "
        f"{plan.log}); this machine can go")
    return held


def bin_dir(plan_root: str) -> str:
    """Where the controller role puts terraform: beside launch.root, as the controller's folders."""
    return plan_root.rstrip("/") + "-controller/bin"


def set_up(cluster: Cluster, ws: Workspace, host: Node) -> None:
    """ansible/controller.yml on the controller alone (its own inventory under ws/ansible/)."""
    group = {**_group_vars(ws), **ch.user_group_vars(ws)}
    hv = {"ansible_host": host.address, "ansible_user": host.user,
          **({"ansible_port": host.port} if host.port else {}),
          **({"ansible_ssh_private_key_file": host.key_file} if host.key_file else {}),
          **({"ansible_ssh_common_args": shlex.join(host.ssh_options)} if host.ssh_options else {})}
    inv = ws.ansible_dir / "controller-inventory.yml"
    inv.parent.mkdir(parents=True, exist_ok=True)
    inv.write_text(yaml.safe_dump({"all": {"hosts": {host.name: hv}, "vars": group}}, sort_keys=False))
    extra: dict[str, Any] = {"trainkit_pip_extra": f"control,{cluster.room.name}",
                             "trainkit_check_imports": ["trainkit", "ansible_runner"],
                             "controller_bin_dir": bin_dir(host.paths.root)}
    if not group.get("controller_terraform_url"):
        extra["controller_terraform_src"] = str(Path(terraform_path()).resolve())
    if group.get("trainkit_venv_mode", cluster.room.venv_mode) != "reuse":
        extra["trainkit_wheel"] = str(playbook.node_wheel(ws.ansible_dir / "wheels").resolve())
    playbook.run_playbook(PLAY, cluster, ws, extra, inventory=inv)


def _group_vars(ws: Workspace) -> dict[str, Any]:
    data = yamlload.load_file(ws.inventory_yml, "inventory")
    return dict(((data or {}).get("all") or {}).get("vars") or {})


def clean_argv(plan: ctl.HandOff, argv: list[str], room: Any, environ: dict[str, str], mirror: bool) -> list[str]:
    """`argv` (plan.argv: `env VAR=... python -m trainkit ...`) run under `env -i` with only what the
    loop needs (module doc, step 5): nothing of the login environment, no cloud's keys."""
    assert argv[0] == "env"
    bins = bin_dir(plan.root)
    keep = {"PATH": f"{bins}:/usr/local/bin:/usr/bin:/bin", "HOME": plan.path("home"), "LANG": "C.UTF-8",
            "TRAINKIT_TERRAFORM": f"{bins}/terraform", INSTANCE_IDENTITY: "1", **ch.loop_env(environ, room),
            **({"TF_CLI_CONFIG_FILE": plan.path("terraformrc")} if mirror else {})}
    return ["env", "-i", *(f"{k}={v}" for k, v in keep.items()), *argv[1:]]


def _mirror_config() -> bytes | None:
    """This machine's TF_CLI_CONFIG_FILE (provider mirrors), None when unset; InputError when it holds
    a `credentials` block (registry tokens: secrets, CLI configuration docs "Credentials")."""
    path = os.environ.get("TF_CLI_CONFIG_FILE")
    if not path or not Path(path).is_file():
        return None
    data = Path(path).read_bytes()
    if b"credentials" in data:
        raise InputError(f"TF_CLI_CONFIG_FILE={path}: it holds a `credentials` block, which must not travel "
                         "to the controller", fix="move the registry credentials to TF_TOKEN_* variables "
                         "(they do not travel), or unset TF_CLI_CONFIG_FILE")
    return data


def bundle(cluster: Cluster, ws: Workspace, run_dir: Path, plan: ctl.HandOff, config: Path, down: bool,
           mirror: bytes | None, public: str | None = None) -> dict[str, bytes]:
    """What the loop reads, paths relative to the controller's folder (module doc, step 4).
    TrainkitError when a file holds the value of a credential variable set here."""
    pub = public_key_text(cluster.spec.ssh, ws, f"trainkit-{cluster.name}")
    files: dict[str, bytes] = {"cluster.yaml": _spec_text(cluster, plan).encode(), "ssh/cluster.pub": pub.encode() + b"\n",
                               f"config/{config.name}": config.read_bytes(), **({"down": b""} if down else {}),
                               "home/.keep": b"", **({"terraformrc": mirror} if mirror is not None else {})}
    theirs = Workspace(Path(plan.ws), ws.cluster)
    ssh = cluster.spec.ssh.model_copy(update={"private_key": plan.key, "public_key": plan.path("ssh", "cluster.pub")})
    mine = replace(cluster, spec=cluster.spec.model_copy(update={"ssh": ssh}))
    inv = inventory_for(mine, ws.read_outputs(), theirs)
    files["ws/inventory.yml"] = yaml.safe_dump(inv, sort_keys=False).encode()
    files.update(handoff.workspace_files(
        ws, (".trainkit-workspace", "outputs.json", "applied.json", "hosts.json"), ("group_vars", "host_vars", "terraform"),
        skip=lambda rel: NEVER_DIR in rel.parts or rel.name.endswith(NEVER_SUFFIX)))
    files.update(handoff.run_files(run_dir, plan, plan.record("starting", down, public)))
    leaked = leaks(files, os.environ)
    if leaked:
        raise TrainkitError(f"run {plan.run_id}: not handed off: {', '.join(leaked)} would carry a credential "
                            "to the controller", fix="remove the key from those files; keys come from the "
                                                     "environment only")
    return files


def leaks(files: dict[str, bytes], environ: dict[str, str]) -> list[str]:
    """Names of `files` that hold the value of a credential variable of any room set in `environ`
    (values under 8 characters are not looked for: they match by chance, e.g. moto's `test`)."""
    values = {environ[v].encode() for r in all_clouds() for v in r.credential_variables()
              if len(environ.get(v) or "") >= 8}
    values |= {v.encode() for k, v in environ.items() if ch.SECRET_WORDS.search(k) and len(v) >= 8 and k.startswith(
        tuple(n.split("_")[0] + "_" for r in all_clouds() for n in r.credential_variables()))}
    return sorted(name for name, data in files.items() if any(v in data for v in values))


def _spec_text(cluster: Cluster, plan: ctl.HandOff) -> str:
    """The user's spec as written; ssh: the controller's own private key, the cluster's public key."""
    data = yamlload.load_file(cluster.source, "cluster spec")
    data["ssh"] = {**(data.get("ssh") or {}), "private_key": plan.key,
                   "public_key": str(PurePosixPath(plan.dir, "ssh", "cluster.pub"))}
    return yaml.safe_dump(data, sort_keys=False)
