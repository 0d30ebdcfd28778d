"""Hand a run's recovery loop to its controller host (target `hosts`, `controller.host`), and
find, stop or take over that controller later. The decisions are controller.py's; this is the I/O.

hand_off() after the run's first attempt is launched:
  1. on the controller host: its folder and a NEW key pair (ssh-keygen there; the user's private
     key never leaves this machine); its public half comes back;
  2. that key authorized on every host of the spec, spares too (a spare must answer the
     controller when it replaces a lost host): appended once to each host's authorized_keys
     (`trainkit_authorized_keys_file`, default ~/.ssh/authorized_keys of the ssh user);
  3. one tar to the controller's folder: the spec (ssh.private_key: the new key), the train
     config, and the loop's workspace (an inventory rendered for it, hosts.json, group_vars,
     host_vars, the run's record naming its controller, events);
  4. the loop started under the service manager (controller.start_script);
  5. run.json here names the controller; a `handed_off` event; the lock on every node names the
     controller host and its workspace.
"""

from __future__ import annotations

import io
import json
import shlex
import shutil
import socket
import tarfile
import time
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import Any, Callable

import yaml

from trainkit.cluster.replace import effective_cluster
from trainkit.errors import InputError, LockedError, TrainkitError
from trainkit.provision.inventory import inventory_for, inventory_hosts
from trainkit.provision.node import Node, Paths, node_from_vars, paths_from_vars, read_nodes
from trainkit.provision.playbook import prepare_inventory
from trainkit.runs import controller as ctl
from trainkit.runs import controller_host, lock, remote
from trainkit.runs import record as runs
from trainkit.spec.resolve import Cluster
from trainkit.spec.sshkeys import PUBLIC_KEY
from trainkit.util import yamlload
from trainkit.workspace import Workspace

SSH_S = 60            # one ssh command of the hand-off (keygen, authorize, start)
SHIP_S = 300          # the tar of the loop's workspace (group_vars, the run's events)


def wanted(cluster: Cluster, opts: Any) -> bool:
    """Whether `train` with recover.Options `opts` hands its loop to a controller: --recover
    --detach on a spec whose controller names a host and is not switched off, or on a cloud
    whose spec wants its controller instance (controller_host.wanted; handoff_cloud does that one)."""
    c = cluster.spec.controller
    if controller_host.instance_controller(cluster):
        return controller_host.wanted(cluster, opts)
    return bool(opts.recover and opts.detach and c.host and c.enabled is not False)


def hand_off(cluster: Cluster, ws: Workspace, run_dir: Path, opts: Any, down: bool,
             say: Callable[[str], None]) -> dict[str, Any]:
    """Steps 1-5 of the module doc for the run in `run_dir`; returns run.json's `controller`.
    TrainkitError naming the host and what failed (the run keeps running on the nodes)."""
    record = runs.read_record(run_dir)
    config = Path(record["config"])
    hosts = all_hosts(cluster, ws)
    host = next(n for n, _ in hosts if n.name == cluster.spec.controller.host)
    plan = ctl.HandOff(run_dir.name, host.name, host.paths.root, host.python, config.name)
    public = keygen(host, plan)
    authorize(hosts, public, plan)
    ship(host, plan, _bundle(cluster, ws, run_dir, plan, config, down, public))
    service = must(host, ctl.start_script(plan, plan.argv(ctl.loop_options(opts, down))), plan,
                    "start the loop").strip().splitlines()[-1]
    held = plan.record(service, down, public)
    runs.write_record(run_dir, {**runs.read_record(run_dir), "controller": held})
    runs.event(run_dir, "handed_off", host=host.name, service=service, dir=plan.dir, down=down)
    nodes, group = read_nodes(ws.inventory_yml)
    lay = remote.layout_for(group, run_dir.name)
    lock.take(nodes, lay, len(record.get("attempts") or []), plan.ws, controller=host.name)
    say(f"run {run_dir.name}: its recovery loop runs on {host.name} ({service}, log {plan.log}); "
        "this machine can go")
    return held


def all_hosts(cluster: Cluster, ws: Workspace) -> list[tuple[Node, str]]:
    """Every host of the spec, spares too, as a Node with the workspace's ssh settings, and the
    authorized_keys file there (a shell word: `trainkit_authorized_keys_file`, quoted, or the ssh
    user's ~/.ssh/authorized_keys). Pure but for reading the user's group_vars/all.yml."""
    return _hosts_and_paths(cluster, ws)[0]


def keyed_hosts(cluster: Cluster, ws: Workspace) -> list[tuple[Node, str]]:
    """The machines a controller's key was authorized on, with their authorized_keys file: on
    `hosts` every host of the spec (all_hosts); on a cloud the applied cluster's nodes
    (inventory.yml: controller_host.current_nodes). InputError when a cloud's inventory is gone."""
    if controller_host.instance_controller(cluster):
        if not ws.inventory_yml.is_file():
            raise InputError(f"{ws.inventory_yml} is missing: the cluster's nodes are not known here",
                             fix="run `trainkit apply SPEC` to write it again")
        return controller_host.current_nodes(ws)
    return all_hosts(cluster, ws)


def _hosts_and_paths(cluster: Cluster, ws: Workspace) -> tuple[list[tuple[Node, str]], Paths]:
    if controller_host.instance_controller(cluster):   # a cloud's spec names no host (its nodes: outputs.json)
        return [], Paths()
    every = tuple(h.model_copy(update={"spare": False}) for h in cluster.spec.hosts)
    inv = inventory_for(replace(cluster, spec=cluster.spec.model_copy(update={"hosts": every})), None, ws)
    group = {**inv["all"]["vars"], **controller_host.user_group_vars(ws)}
    out = []
    for i, (name, hv) in enumerate(inventory_hosts(inv).items()):
        merged = {**group, **hv}
        keys = merged.get("trainkit_authorized_keys_file")
        out.append((node_from_vars(name, i, merged), shlex.quote(str(keys)) if keys else
                    '"$HOME"/.ssh/authorized_keys'))
    return out, paths_from_vars(group)


def _host_of(cluster: Cluster, ws: Workspace, held: dict[str, Any]) -> Node | None:
    """The host named by a controller record `held` (run.json's `controller`), None when the spec
    no longer has it (a cloud's: the controller instance of outputs.json, None when it has none)."""
    if controller_host.instance_controller(cluster):
        try:
            return controller_host.node(ws)
        except InputError:
            return None
    return next((n for n, _ in all_hosts(cluster, ws) if n.name == held.get("host")), None)


def _own_dir(ws: Workspace) -> str | None:
    """The controller folder `ws` is the workspace of (Workspace.controller_dir), else None."""
    own = ws.controller_dir()
    return str(own) if own is not None else None


def must(node: Node, script: str, plan: ctl.HandOff, what: str, data: bytes | None = None,
          timeout: float = SSH_S) -> str:
    res = node.sh(script, data, timeout=timeout)
    if res.returncode != 0:
        err = (res.stderr or b"").decode(errors="replace").strip()[-400:]
        raise TrainkitError(f"run {plan.run_id}: could not {what} on controller host {node.name}: {err}",
                            fix=f"the run keeps running on the nodes; follow it from here: trainkit train "
                                f"SPEC --attach {plan.run_id} --recover, or fix the host and train again")
    return res.stdout.decode(errors="replace")


def keygen(host: Node, plan: ctl.HandOff) -> str:
    """A key pair made on the controller host (kept when there already); its public line."""
    q = shlex.quote
    key = q(plan.key)
    script = (f"mkdir -p {q(plan.path('ssh'))} {q(plan.path('config'))} {q(plan.ws)} && chmod 700 {q(plan.path('ssh'))}"
              f" && {{ [ -f {key} ] || ssh-keygen -q -t ed25519 -N '' -C {q(plan.unit)} -f {key}; }} && cat {key}.pub")
    public = must(host, script, plan, "make its ssh key").strip()
    if not PUBLIC_KEY.fullmatch(public):
        raise TrainkitError(f"controller host {host.name}: ssh-keygen gave no public key ({public[:80]!r})",
                            fix="check that ssh-keygen (openssh-client) is installed there")
    return public


def authorize(hosts: list[tuple[Node, str]], public: str, plan: ctl.HandOff) -> None:
    """The controller's key appended once to each host's authorized_keys; TrainkitError naming
    the hosts that refused (a spare that is down is among them: the controller could not use it)."""
    def one(item: tuple[Node, str]):
        node, path = item
        return node.name, node.sh(ctl.authorize_script(path, public), timeout=SSH_S)

    failed = [name for name, res in remote.on_nodes(hosts, one) if res.returncode != 0]
    if failed:
        raise TrainkitError(f"run {plan.run_id}: could not authorize the controller's key on "
                            f"{', '.join(failed)}", fix="make those hosts reachable (or drop them from hosts:), "
                                                        f"then attach: trainkit train SPEC --attach {plan.run_id}")


def _bundle(cluster: Cluster, ws: Workspace, run_dir: Path, plan: ctl.HandOff, config: Path, down: bool,
            public: str) -> bytes:
    """The tar (in memory) of what the loop reads, paths relative to the controller's folder."""
    files: dict[str, bytes] = {"cluster.yaml": _spec_text(cluster, plan).encode(), **({"down": b""} if down else {}),
                               f"config/{config.name}": config.read_bytes()}
    theirs = Workspace(Path(plan.ws), ws.cluster)
    ctl_cluster = _for_controller(cluster, plan)
    files["ws/inventory.yml"] = yaml.safe_dump(inventory_for(ctl_cluster, None, theirs), sort_keys=False).encode()
    files.update(workspace_files(ws, (".trainkit-workspace", "hosts.json", "applied.json"), ("group_vars", "host_vars")))
    files.update(run_files(run_dir, plan, plan.record("starting", down, public)))
    return tar(files)


def workspace_files(ws: Workspace, names: tuple[str, ...], folders: tuple[str, ...],
                    skip: Callable[[Path], bool] = lambda rel: False) -> dict[str, bytes]:
    """The bundle's `ws/...` entries: the workspace files `names` that exist, and every regular file
    (no links) under `folders` whose path relative to the workspace `skip` does not refuse."""
    files = {f"ws/{name}": (ws.root / name).read_bytes() for name in names if (ws.root / name).is_file()}
    for folder in folders:
        for path in sorted((ws.root / folder).rglob("*")) if (ws.root / folder).is_dir() else []:
            rel = path.relative_to(ws.root)
            if path.is_file() and not path.is_symlink() and not skip(rel):
                files[f"ws/{rel.as_posix()}"] = path.read_bytes()
    return files


def run_files(run_dir: Path, plan: ctl.HandOff, held: dict[str, Any]) -> dict[str, bytes]:
    """The run's record (its config the shipped one, `controller` = `held`) and events, for the bundle."""
    record = {**runs.read_record(run_dir), "config": plan.config, "controller": held}
    files = {f"ws/runs/{run_dir.name}/run.json": json.dumps(record, indent=2, sort_keys=True).encode()}
    if (run_dir / "events.jsonl").is_file():
        files[f"ws/runs/{run_dir.name}/events.jsonl"] = (run_dir / "events.jsonl").read_bytes()
    return files


def tar(files: dict[str, bytes]) -> bytes:
    """An uncompressed tar (in memory) of `files` (name -> bytes), each mode 0600: what ship() unpacks."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as out:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o600, int(time.time())
            out.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def _for_controller(cluster: Cluster, plan: ctl.HandOff) -> Cluster:
    ssh = cluster.spec.ssh.model_copy(update={"private_key": plan.key, "public_key": None})
    return replace(cluster, spec=cluster.spec.model_copy(update={"ssh": ssh}))


def _spec_text(cluster: Cluster, plan: ctl.HandOff) -> str:
    """The user's spec file as written, ssh pointing at the controller's own key."""
    data = yamlload.load_file(cluster.source, "cluster spec")
    ssh = {k: v for k, v in (data.get("ssh") or {}).items() if k != "public_key"}
    data["ssh"] = {**ssh, "private_key": plan.key}
    return yaml.safe_dump(data, sort_keys=False)


def ship(host: Node, plan: ctl.HandOff, blob: bytes) -> None:
    q = shlex.quote
    must(host, f"tar -x -f - -C {q(plan.dir)} --no-same-owner", plan, "unpack the loop's files", blob, SHIP_S)


# ------------------------------------------------------------------ a run held by a controller

def controller_state(cluster: Cluster, ws: Workspace, held: dict[str, Any]) -> str:
    """`alive`, `gone` or `unreachable`: the controller `held` (run.json's `controller`) as its host says."""
    host = _host_of(cluster, ws, held)
    if host is None:
        return "unreachable"
    res = host.sh(ctl.alive_script(held), timeout=SSH_S)
    if res.returncode == 255:
        return "unreachable"
    return "alive" if res.stdout.decode(errors="replace").strip() == "alive" else "gone"


def check_attach(cluster: Cluster, ws: Workspace, run_dir: Path, say: Callable[[str], None]) -> None:
    """`train --attach RUN` of a handed-off run (controller.attach_rule): LockedError naming the
    controller while it runs; when it is gone, say so and take the run over (run.json's
    `controller` cleared here, a `taken_over` event)."""
    record = runs.read_record(run_dir)
    held = record.get("controller")
    own = _own_dir(ws)
    state = controller_state(cluster, ws, held) if held and held.get("dir") != own else None
    rule = ctl.attach_rule(held, own, state)
    if rule == "refuse":
        raise LockedError(f"run {run_dir.name} is driven by its controller on {held['host']} "
                          f"({held.get('service')}, {held.get('dir')}); two controllers must not act at once",
                          fix=f"follow it: trainkit logs {cluster.source} {run_dir.name} --follow; stop it: "
                              f"trainkit cancel {cluster.source} {run_dir.name}")
    if rule == "take_over":
        say(f"run {run_dir.name}: its controller on {held['host']} is {state}: this workspace takes the run over")
        runs.write_record(run_dir, {**record, "controller": None})
        runs.event(run_dir, "taken_over", host=held["host"], was=state)


def stop_controller(cluster: Cluster, ws: Workspace, run_dir: Path) -> str | None:
    """Stop the run's controller for good (cancel does this before it stops the run); the host
    it ran on, or None when the run has none. A host that does not answer is passed over."""
    held = runs.read_record(run_dir).get("controller")
    if not held:
        return None
    host = _host_of(cluster, ws, held)
    if host is not None:
        host.sh(ctl.stop_script(held), timeout=SSH_S)
    runs.event(run_dir, "controller_stopped", host=held.get("host"))
    return str(held.get("host"))


def controller_node(cluster: Cluster, ws: Workspace, held: dict[str, Any]) -> Node | None:
    """The host the controller record `held` (run.json's `controller`) names, reached with this
    workspace's ssh settings; None when the spec no longer has it."""
    return _host_of(cluster, ws, held)


def is_controller_ws(ws: Workspace, record: dict[str, Any]) -> bool:
    """Whether `ws` is the workspace of the controller that holds the run of `record`."""
    own = _own_dir(ws)
    return own is not None and own == (record.get("controller") or {}).get("dir")


def keep_results(ws: Workspace, run_dir: Path, say: Callable[[str], None]) -> str:
    """Before `--down` destroys the cluster from the controller: the run's folder (record, events,
    fetched logs and summary) copied to the shared storage, beside the run's files there
    (<work>/runs/<id>/controller/); without shared storage it stays in the controller's folder.
    Returns where the results are; says it."""
    _, group = read_nodes(ws.inventory_yml)
    where = str(run_dir)
    if group.shared_work_dir:
        dest = Path(remote.layout_for(group, run_dir.name).run_dir) / "controller"
        shutil.copytree(run_dir, dest, dirs_exist_ok=True)
        where = str(dest)
    say(f"run {run_dir.name}: results kept in {where} (on {socket.gethostname()})")
    return where


def down_after_cancel(cluster: Cluster, ws: Workspace, run_dir: Path, held: dict[str, Any]) -> bool:
    """A cancelled run that was handed off with `--down` (`held`: its controller record): the controller,
    stopped by cancel, is started once more on its host to finish the job (detached, setsid):
    `destroy --yes` from its workspace (it fetches the run there; then it takes the controller's
    key off every host: controller_keys), the run's folder copied to the shared storage when there
    is one, its key pair removed last. False when it was not asked or could not be started."""
    if not held.get("down"):
        return False
    host = _host_of(cluster, ws, held)
    if host is None:
        return False
    q = shlex.quote
    d = PurePosixPath(held["dir"])
    _, group = read_nodes(ws.inventory_yml)
    keep = (f" && mkdir -p {q(remote.layout_for(group, run_dir.name).run_dir + '/controller')} && cp -a "
            f"{q(str(d / 'ws' / 'runs' / run_dir.name))}/. {q(remote.layout_for(group, run_dir.name).run_dir + '/controller')}/"
            if group.shared_work_dir else "")
    argv = ["env", f"TRAINKIT_STATE_DIR={d / 'state'}", host.python, "-m", "trainkit", "destroy", str(d / "cluster.yaml"),
            "--workdir", str(d / "ws"), "--yes"]
    chain = f"{shlex.join(argv)}{keep}; rm -rf {q(str(d / 'ssh'))}"
    res = host.sh(f"setsid sh -c {q(chain)} </dev/null >>{q(str(d / 'controller.log'))} 2>&1 & echo started",
                  timeout=SSH_S)
    runs.event(run_dir, "down_started", host=host.name, ok=res.returncode == 0)
    return res.returncode == 0


def refuse_unsupported(cluster: Cluster, job: Any) -> None:
    """InputError for a job the hand-off cannot ship: a `workdir:` (the controller gets the config
    only; a relaunch would sync the workdir from there)."""
    if getattr(job, "workdir", None):
        raise InputError(f"{job.source}: workdir: a run handed to controller {cluster.spec.controller.host} "
                         "ships its train config only, not a workdir",
                         fix="drop --detach (the loop stays here), or set controller.enabled: false")


# ------------------------------------------------------------------ seen from any workspace

def sync_runs(cluster: Cluster, ws: Workspace) -> list[str]:
    """Bring this workspace's view of handed-off runs up to date (`runs`, `logs`, `status`,
    `cancel` call it first on target hosts): each open run held by a controller is copied back
    from its controller's workspace (run.json, events, fetched results; this workspace keeps its
    own `config`), with hosts.json (the spares it put in) and the inventory; a run this
    workspace never saw, named by the lock on the hosts with a controller among them, is copied
    in the same way (the workspace is made, and given the inventory: target hosts' is the spec's
    host list). Hosts that do not answer are passed over. Returns the run ids copied."""
    if not cluster.spec.controller.host:
        return []
    hosts, paths = _hosts_and_paths(cluster, ws)
    by_name = {n.name: n for n, _ in hosts}
    wanted_: dict[str, tuple[str, str]] = {}   # run id -> (controller host, its workspace)
    for run_dir in sorted(ws.runs_dir.glob("*")) if ws.runs_dir.is_dir() else []:
        record = runs.read_record(run_dir)
        held = record.get("controller")
        if held and record.get("status") in runs.OPEN:
            wanted_[run_dir.name] = (str(held.get("host")), str(PurePosixPath(held["dir"]) / "ws"))
    for h in lock.holders([n for n, _ in hosts], remote.layout_for(paths, "-")):
        if not runs.RUN_ID.fullmatch(h.run_id):   # a lock is data from a node: never a path out of runs/
            continue
        if h.controller in by_name and not (ws.runs_dir / h.run_id / "run.json").is_file():
            wanted_.setdefault(h.run_id, (h.controller, h.workspace))
    if wanted_:
        ws.ensure()   # a workspace that never saw the run becomes one (marked), as apply makes it
    copied = [run_id for run_id, (host, where) in wanted_.items()
              if host in by_name and _mirror(by_name[host], where, run_id, ws)]
    if copied:   # the hosts as the controller left them (spares it put in): the inventory from them
        prepare_inventory(effective_cluster(cluster, ws), ws)
    return copied


def _mirror(host: Node, where: str, run_id: str, ws: Workspace) -> bool:
    """runs/<run_id>/ and hosts.json of the controller workspace `where` on `host` into `ws`."""
    q = shlex.quote
    names = f"{q('runs/' + run_id)} hosts.json"
    res = host.sh(f"cd {q(where)} && tar -c -f - $(ls -d {names} 2>/dev/null)", timeout=SHIP_S)
    if res.returncode != 0 or not res.stdout:
        return False
    local = ws.runs_dir / run_id
    before = runs.read_record(local) if local.is_dir() else {}
    ws.root.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(res.stdout)) as tar:
        tar.extractall(ws.root, filter="data")   # paths under ws only (no links out, no absolute names)
    if before and (local / "run.json").is_file():   # this workspace's config path and controller record
        keep = {k: before[k] for k in ("config", "controller") if k in before}
        runs.write_record(local, {**runs.read_record(local), **keep})
    return (local / "run.json").is_file()
