"""A run as its nodes hold it: the node paths of a run (`Layout`), each node's supervisor state,
signals to every node's job, and reading or fetching the run's files back to the controller.

Side effects only (ssh, or bash on `local`), through `trainkit.provision.node.Node.sh`.
"""

from __future__ import annotations

import hashlib
import io
import json
import shlex
import tarfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainkit.provision.node import Node, Paths


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

    def exit_file(self, rank: int, attempt: int) -> str:
        """launch.sh's record of the job's end (`exit=<rc> status=<word>`), kept without the supervisor."""
        return f"{self.node_dir(rank)}/attempt-{attempt}.exit"


def layout_for(paths: Paths, run_id: str) -> Layout:
    """Where a run lives on the nodes. `checkpoint_root` (local: the workspace's runs/) keeps
    checkpoints out of the node folder that `destroy` removes."""
    return Layout(work=paths.work_dir, root=paths.root, run_id=run_id, checkpoint_root=paths.checkpoint_root)


@dataclass
class NodeState:
    name: str
    rank: int
    reachable: bool
    state: dict[str, Any] = field(default_factory=dict)
    alive: bool = False              # the supervisor process still exists
    job_alive: bool = False          # the job's process group still exists
    job_record: str | None = None    # what the job left of its end: launch.sh's exit file, else the engine's summary
    uptime: float | None = None      # the node's CLOCK_BOOTTIME now (/proc/uptime): `progress` times are on it

    def progress_age(self) -> float | None:
        """Seconds since the job's step or phase last changed, on the node's own clock; None when
        it reported none (not started yet, no progress file: a `command:` job that writes none)."""
        p = self.state.get("progress") or {}
        if self.uptime is None or not isinstance(p.get("at"), (int, float)):
            return None
        return max(0.0, self.uptime - p["at"])

    @property
    def status(self) -> str:
        if not self.reachable:
            return "unreachable"
        st = self.state.get("status", "missing")
        if st in ("running", "starting", "missing") and not self.alive:
            # the supervisor was killed: a job it left behind still runs (and holds the GPUs); a
            # job that ended has its end recorded by launch.sh (its exit status) or by the engine
            if self.job_record and not self.job_record.lstrip().startswith("{"):
                return ended_status(self.job_record)   # launch.sh's last act: the job has ended
            return "running" if self.job_alive else ended_status(self.job_record)
        return st


PREEMPTED_EXIT = 75  # trainkit.errors.PREEMPTED (EX_TEMPFAIL), the resumable-command contract


def ended_status(record: str | None) -> str:
    """The status a job's own end record means (launch.sh writes `exit=<rc> status=<word>`: its
    exit status and what $TRAINKIT_STATUS_FILE said, or `rendezvous` when torchrun's rendezvous
    failed: a lost peer, counted as a preemption, never as the user's code failing; the engine's
    summary.json is `{"status": ...}`);
    "lost" when there is none (the job was killed with its supervisor, or never wrote one)."""
    if not record:
        return "lost"
    if record.lstrip().startswith("{"):
        try:
            word = json.loads(record).get("status")
        except (ValueError, AttributeError):
            return "lost"
        return word if word in ("completed", "preempted", "failed") else "lost"
    fields = dict(part.split("=", 1) for part in record.split() if "=" in part)
    rc = fields.get("exit", "")
    if rc == "0":
        return "completed"
    if rc == str(PREEMPTED_EXIT) or fields.get("status") in ("preempted", "rendezvous"):
        return "preempted"
    return "failed" if rc.lstrip("-").isdigit() else "lost"


# Shell: the supervisor's pid and its job's (a process group leader) from a state file {sf}.
_PIDS = ("sup=$(sed -n 's/.*\"supervisor_pid\": \\([0-9]*\\).*/\\1/p' {sf} 2>/dev/null); "
         "job=$(sed -n 's/.*\"pid\": \\([0-9]*\\).*/\\1/p' {sf} 2>/dev/null)")


def on_nodes(nodes: list, one) -> list:
    """`one` over `nodes` in parallel (at most 16 ssh at once); [] for no nodes (a pool of 0
    workers is a ValueError: every node of a run can be lost at once)."""
    if not nodes:
        return []
    with ThreadPoolExecutor(max_workers=min(16, len(nodes))) as pool:
        return list(pool.map(one, nodes))


def node_states(nodes: list[Node], lay: Layout, attempt: int) -> list[NodeState]:
    """Each node's supervisor state (one ssh per node, in parallel); [] for no nodes."""
    def one(node: Node) -> NodeState:
        path = lay.state_file(node.rank, attempt)
        # the supervisor's copy in memory when its disk took no write (supervise.py, storage faults)
        sf, mem = shlex.quote(path), shlex.quote(memory_state_path(path))
        ends = " ".join(shlex.quote(p) for p in (lay.exit_file(node.rank, attempt), f"{lay.run_dir}/summary.json"))
        script = (f"sf={sf}; if [ -s {mem} ]; then sf={mem}; fi; "
                  "cat \"$sf\" 2>/dev/null | tr -d '\\n' || true; echo; " + _PIDS.format(sf='"$sf"') + "; "
                  f"for f in {ends}; do if [ -s \"$f\" ]; then tr '\\n' ' ' < \"$f\"; break; fi; done; echo; "
                  "if [ -n \"$sup\" ] && kill -0 \"$sup\" 2>/dev/null; then echo alive; else echo dead; fi; "
                  "if [ -n \"$job\" ] && kill -0 -- -\"$job\" 2>/dev/null; then echo job; else echo nojob; fi; "
                  "cut -d ' ' -f 1 /proc/uptime 2>/dev/null || echo -")
        res = node.sh(script, timeout=20)
        if res.returncode != 0:
            return NodeState(node.name, node.rank, reachable=False)
        return parse_node_state(node.name, node.rank, res.stdout.decode(errors="replace"))

    return on_nodes(nodes, one)


def memory_state_path(state_file: str) -> str:
    """supervise.memory_state_path (the supervisor is copied alone to the node: the rule is
    repeated here, and tests/unit/runs/test_remote_state.py holds the two equal)."""
    digest = hashlib.sha256(state_file.encode()).hexdigest()[:16]
    return f"/dev/shm/trainkit-state-{digest}.json"


def parse_node_state(name: str, rank: int, text: str) -> NodeState:
    """node_states' script output: the state (one line; {} when none or damaged), the job's end
    record, alive|dead, job|nojob, and the node's uptime."""
    lines = text.splitlines()
    if len(lines) < 5:
        return NodeState(name, rank, True, {})
    try:
        state = json.loads(lines[0]) if lines[0].strip() else {}
    except ValueError:  # written atomically; a torn read cannot happen, garbage can
        state = {}
    try:
        uptime = float(lines[4])
    except ValueError:
        uptime = None
    return NodeState(name, rank, True, state if isinstance(state, dict) else {}, alive=lines[2] == "alive",
                     job_alive=lines[3] == "job", job_record=lines[1].strip() or None, uptime=uptime)


def signal_nodes(nodes: list[Node], lay: Layout, attempt: int, sig: str = "TERM") -> None:
    """Send `sig` to each node's supervisor, which forwards SIGTERM to the job; with the
    supervisor gone (killed), to the job's process group itself. KILL cannot be forwarded: it is a
    hard stop, `supervise.py --hard-stop`, which SIGKILLs the supervisor and every process of its
    job's tree (also workers in sessions of their own, as torchrun starts them), found before any
    is signalled; where the node has no Python, the job's group and the supervisor. No nodes: nothing."""
    def one(node: Node) -> None:
        sf = shlex.quote(lay.state_file(node.rank, attempt))
        if sig == "KILL":
            py = shlex.quote(node.python)
            helper = shlex.quote(f"{lay.node_dir(node.rank)}/supervise.py")
            node.sh(f"{py} {helper} --hard-stop {sf} 2>/dev/null || {{ {_PIDS.format(sf=sf)}; "
                    "{ if [ -n \"$job\" ]; then kill -KILL -- -\"$job\"; fi; "
                    "if [ -n \"$sup\" ]; then kill -KILL \"$sup\"; fi; } 2>/dev/null; }; true", timeout=20)
            return
        node.sh(f"touch {sf}.cancel 2>/dev/null; "   # trainkit's stop, not the machine's (supervise.py)
                f"{_PIDS.format(sf=sf)}; {{ if [ -n \"$sup\" ] && kill -0 \"$sup\"; then kill -{sig} \"$sup\"; "
                f"elif [ -n \"$job\" ]; then kill -{sig} -- -\"$job\"; fi; }} 2>/dev/null; true", timeout=20)

    on_nodes(nodes, one)


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
