"""The run lock that lives with the cluster: `<launch.root>/run.lock` on every node of a run.

The workspace lock (workspace.py) keeps two commands of ONE workspace apart; two workspaces on the
same machines (a second checkout, a colleague's laptop, CI) do not share it. So every launch also
writes, on each of its nodes, which run holds them (JSON, temp + rename):

    {"run_id", "attempt", "work", "root", "checkpoint_root", "workspace", "controller", "time"}

`work`/`root`/`checkpoint_root` are the run's node layout (remote.Layout), so a workspace that
never saw the run can still ask its supervisors whether it runs (remote.node_states), stop it and
fetch it. The file is not removed when a run ends: a lock whose run no longer runs is free.
`foreign_live()` is what `train` checks before it starts (LockedError, exit 8, naming the run and
the workspace holding it) and what `destroy` stops and fetches before it removes launch.root.
"""

from __future__ import annotations

import json
import shlex
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from trainkit.errors import LockedError
from trainkit.provision.node import Node
from trainkit.runs import remote

LOCK_NAME = "run.lock"


@dataclass(frozen=True)
class Holder:
    run_id: str
    attempt: int
    lay: remote.Layout
    workspace: str
    controller: str


def lock_path(lay: remote.Layout) -> str:
    return f"{lay.root}/{LOCK_NAME}"


def take(nodes: list[Node], lay: remote.Layout, attempt: int, workspace: Path | str,
         controller: str | None = None) -> None:
    """Write the lock of `lay.run_id`'s `attempt` on every node (best effort: a node that fails
    here has failed the launch already or will show as lost). `controller`: the host whose loop
    drives the run (default this machine); `workspace` a str when it is that host's folder."""
    where = str(workspace.resolve()) if isinstance(workspace, Path) else workspace
    body = json.dumps({"run_id": lay.run_id, "attempt": attempt, "work": lay.work, "root": lay.root,
                       "checkpoint_root": lay.checkpoint_root, "workspace": where,
                       "controller": controller or socket.gethostname(), "time": time.time()})
    path = shlex.quote(lock_path(lay))
    script = f"mkdir -p {shlex.quote(lay.root)} && cat > {path}.tmp && mv -f {path}.tmp {path}"
    remote.on_nodes(nodes, lambda n: n.sh(script, body.encode(), timeout=30))


def holders(nodes: list[Node], lay: remote.Layout) -> list[Holder]:
    """The runs named by the locks on `nodes` (each once), unreadable locks left out."""
    res = remote.on_nodes(nodes, lambda n: n.sh(f"cat {shlex.quote(lock_path(lay))} 2>/dev/null; true", timeout=30))
    found: dict[str, Holder] = {}
    for r in res:
        try:
            d = json.loads(r.stdout or b"{}")
            h = Holder(str(d["run_id"]), int(d["attempt"]),
                       remote.Layout(work=str(d["work"]), root=str(d["root"]), run_id=str(d["run_id"]),
                                     checkpoint_root=str(d.get("checkpoint_root") or "")),
                       str(d.get("workspace", "")), str(d.get("controller", "")))
        except (ValueError, KeyError, TypeError):
            continue
        if h.run_id not in found or h.attempt > found[h.run_id].attempt:
            found[h.run_id] = h
    return list(found.values())


def foreign_live(nodes: list[Node], lay: remote.Layout, runs_dir: Path) -> list[Holder]:
    """Runs of OTHER workspaces (not in `runs_dir`) that still run on `nodes`."""
    out = []
    for h in holders(nodes, lay):
        if (runs_dir / h.run_id / "run.json").is_file():
            continue
        states = remote.node_states(nodes, h.lay, h.attempt)
        if any(s.status in ("running", "starting") or (s.reachable and s.alive) for s in states):
            out.append(h)
    return out


def check_free(nodes: list[Node], lay: remote.Layout, runs_dir: Path, source: str) -> None:
    """LockedError (exit 8) while a run of another workspace runs on these nodes."""
    live = foreign_live(nodes, lay, runs_dir)
    if live:
        h = live[0]
        raise LockedError(f"the cluster's nodes are busy: run {h.run_id} of another workspace "
                          f"({h.workspace} on {h.controller}) is running on them",
                          fix=f"wait for it, or stop it from its workspace (trainkit cancel {source} {h.run_id}); "
                              "trainkit destroy from this workspace stops and fetches it first")
