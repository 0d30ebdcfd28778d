"""A run as its nodes hold it: the node paths of a run (`Layout`), each node's supervisor state,
signals to every node's job, and reading or fetching the run's files back to the controller.

Side effects only (ssh, or bash on `local`), through `trainkit.provision.reach.Node`.
"""

from __future__ import annotations

import io
import json
import shlex
import tarfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainkit.provision.reach import Node


@dataclass(frozen=True)
class Layout:
    """Node paths of one run (the same on every node)."""

    work: str
    root: str
    run_id: str
    checkpoint_root: str = ""

    run_dir = property(lambda self: f"{self.work}/runs/{self.run_id}")
    checkpoint_dir = property(lambda self: f"{self.checkpoint_root}/{self.run_id}/checkpoints"
                              if self.checkpoint_root else f"{self.work}/checkpoints/{self.run_id}")
    code_dir = property(lambda self: f"{self.root}/code/{self.run_id}")

    def node_dir(self, rank: int) -> str:
        return f"{self.run_dir}/nodes/node-{rank}"

    def state_file(self, rank: int, attempt: int) -> str:
        return f"{self.node_dir(rank)}/attempt-{attempt}.json"


def layout_for(group: dict[str, Any], run_id: str) -> Layout:
    """Where a run lives on the nodes. `trainkit_checkpoint_root` (local: the workspace's runs/)
    keeps checkpoints out of the node folder that `destroy` removes."""
    return Layout(work=str(group.get("trainkit_work_dir", "/opt/trainkit/work")),
                  root=str(group.get("trainkit_root", "/opt/trainkit")), run_id=run_id,
                  checkpoint_root=str(group.get("trainkit_checkpoint_root") or ""))


@dataclass
class NodeState:
    name: str
    rank: int
    reachable: bool
    state: dict[str, Any] = field(default_factory=dict)
    alive: bool = False              # the supervisor process still exists
    job_alive: bool = False          # the job's process group still exists

    @property
    def status(self) -> str:
        if not self.reachable:
            return "unreachable"
        st = self.state.get("status", "missing")
        if st in ("running", "starting", "missing") and not self.alive:
            # the supervisor was killed: a job it left behind still runs (and holds the GPUs)
            return "running" if self.job_alive else "lost"
        return st


# Shell: the supervisor's pid and its job's (a process group leader) from a state file {sf}.
_PIDS = ("sup=$(sed -n 's/.*\"supervisor_pid\": \\([0-9]*\\).*/\\1/p' {sf} 2>/dev/null); "
         "job=$(sed -n 's/.*\"pid\": \\([0-9]*\\).*/\\1/p' {sf} 2>/dev/null)")


def node_states(nodes: list[Node], lay: Layout, attempt: int) -> list[NodeState]:
    """Each node's supervisor state (one ssh per node, in parallel)."""
    def one(node: Node) -> NodeState:
        sf = shlex.quote(lay.state_file(node.rank, attempt))
        script = (f"cat {sf} 2>/dev/null || printf '{{}}'; echo; {_PIDS.format(sf=sf)}; "
                  "if [ -n \"$sup\" ] && kill -0 \"$sup\" 2>/dev/null; then echo alive; else echo dead; fi; "
                  "if [ -n \"$job\" ] && kill -0 -- -\"$job\" 2>/dev/null; then echo job; else echo nojob; fi")
        res = node.sh(script, timeout=20)
        if res.returncode != 0:
            return NodeState(node.name, node.rank, reachable=False)
        lines = res.stdout.decode(errors="replace").strip().splitlines()
        try:
            state = json.loads(lines[0]) if lines else {}
        except ValueError:  # written atomically; a torn read cannot happen, garbage can
            state = {}
        return NodeState(node.name, node.rank, True, state, alive=lines[-2:-1] == ["alive"],
                         job_alive=lines[-1:] == ["job"])

    with ThreadPoolExecutor(max_workers=min(16, len(nodes))) as pool:
        return list(pool.map(one, nodes))


def signal_nodes(nodes: list[Node], lay: Layout, attempt: int, sig: str = "TERM") -> None:
    """Send `sig` to each node's supervisor, which forwards SIGTERM to the job; with the
    supervisor gone (killed), to the job's process group itself. KILL cannot be forwarded: it
    goes to the job's group and to the supervisor alike, so no job outlives a stop."""
    first = 'kill -KILL -- -"$job"; ' if sig == "KILL" else ""

    def one(node: Node) -> None:
        sf = shlex.quote(lay.state_file(node.rank, attempt))
        node.sh(f"{_PIDS.format(sf=sf)}; {{ if [ -n \"$job\" ]; then {first}true; fi; "
                f"if [ -n \"$sup\" ] && kill -0 \"$sup\"; then kill -{sig} \"$sup\"; "
                f"elif [ -n \"$job\" ]; then kill -{sig} -- -\"$job\"; fi; }} 2>/dev/null; true", timeout=20)

    with ThreadPoolExecutor(max_workers=min(16, len(nodes))) as pool:
        list(pool.map(one, nodes))


def read_from(node: Node, path: str, offset: int) -> tuple[bytes, bool]:
    """Bytes of `path` on `node` from byte `offset`; (data, reachable)."""
    res = node.sh(f"tail -c +{offset + 1} {shlex.quote(path)} 2>/dev/null; true", timeout=30)
    return (res.stdout if res.returncode == 0 else b""), res.returncode == 0


def fetch_run(nodes: list[Node], lay: Layout, dest: Path, shared: bool) -> list[Path]:
    """Copy the node run folder(s) into `dest` (tar over ssh): the head's whole folder, and the
    other nodes' logs/ and nodes/ unless the folder is shared."""
    dest.mkdir(parents=True, exist_ok=True)
    for node in nodes if not shared else nodes[:1]:
        what = "." if node.rank == 0 else "logs nodes"
        res = node.sh(f"cd {shlex.quote(lay.run_dir)} && tar -cf - {what} 2>/dev/null", timeout=300)
        if res.returncode not in (0, 2) or not res.stdout:
            continue
        with tarfile.open(fileobj=io.BytesIO(res.stdout)) as tar:
            members = [m for m in tar.getmembers() if m.isfile() or m.isdir()]
            tar.extractall(dest, members=members, filter="data")
    return sorted(p for p in dest.rglob("*") if p.is_file())
