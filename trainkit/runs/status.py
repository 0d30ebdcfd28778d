"""A run's status as its nodes have it now, for the commands that must not act on a busy cluster
or a finished run (train, cancel, destroy), the rows of `trainkit runs`, and a run's logs for
`trainkit logs` (fetched ones, or read from a node while the run is open). Reads run.json and
asks each node's supervisor state (one ssh per node); changes nothing.
"""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path
from typing import Callable, Iterator

from trainkit.errors import InputError
from trainkit.provision.node import Node, read_nodes
from trainkit.runs import record as runs
from trainkit.runs import remote, slurm_runs
from trainkit.spec.resolve import Cluster
from trainkit.workspace import Workspace


def live_status(cluster: Cluster, ws: Workspace, run_dir: Path) -> str:
    """The run's status now: its record's once closed (results fetched); else what the nodes'
    supervisors say for its newest attempt (`runs.combined_status`); "starting" when no attempt
    was launched. InputError when run.json cannot be read."""
    record = runs.read_record(run_dir)
    if record.get("slurm_job"):   # a batch job: the scheduler has its state
        return slurm_runs.live_status(ws, run_dir)
    status = record.get("status") or "unknown"
    attempt = len(record.get("attempts") or [])
    if status not in runs.OPEN or not ws.inventory_yml.exists():
        return status
    if not attempt:
        return "starting"
    nodes, paths = read_nodes(ws.inventory_yml)
    states = remote.node_states(nodes, remote.layout_for(paths, run_dir.name), attempt)
    return runs.combined_status([s.status for s in states])


def open_runs(ws: Workspace) -> list[Path]:
    """Runs whose record is not closed (their results are still on the nodes), oldest first."""
    if not ws.runs_dir.is_dir():
        return []
    found = sorted((p for p in ws.runs_dir.iterdir() if (p / "run.json").is_file()), key=runs.created_at)
    return [p for p in found if runs.read_record(p).get("status") in runs.OPEN]


def active_runs(cluster: Cluster, ws: Workspace) -> list[Path]:
    """Runs whose jobs are running on the nodes now."""
    return [p for p in open_runs(ws) if runs.read_record(p).get("attempts")
            and live_status(cluster, ws, p) == "running"]


class Follower:
    """Reads the head's log and metrics.jsonl incrementally; prints the log when asked to."""

    def __init__(self, head: Node, lay: remote.Layout, job: runs.Job, echo: Callable[[str], None] | None):
        self.head, self.lay, self.echo = head, lay, echo
        name = "rank-0.log" if job.command is None else "node-0.log"
        self.log = f"{lay.run_dir}/logs/{name}"
        self.offsets = {"log": 0, "metrics": 0}
        self.partial = b""
        self.last_step: int | None = None
        self.resumed_from: int | None = None
        self.before_run: int | None = None   # the last step logged before the newest `run` record
        self.first_step_at: float | None = None
        self.step_time_s: float | None = None

    def poll(self) -> None:
        if self.echo:
            data, _ = remote.read_from(self.head, self.log, self.offsets["log"])
            self.offsets["log"] += len(data)
            for line in data.decode(errors="replace").splitlines():
                self.echo(line)
        data, _ = remote.read_from(self.head, f"{self.lay.run_dir}/metrics.jsonl", self.offsets["metrics"])
        text = (self.partial + data).split(b"\n")
        self.partial = text.pop()
        self.offsets["metrics"] += len(data)
        for line in text:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("kind") == "run":
                self.resumed_from, self.first_step_at = rec.get("resumed_from_step"), None
                self.before_run = self.last_step
            elif rec.get("kind") in ("step", "checkpoint", "epoch") and rec.get("step") is not None:
                self.last_step = rec["step"]
                if rec.get("kind") == "step":
                    self.step_time_s = rec.get("step_time_s", self.step_time_s)
                    if self.first_step_at is None:
                        self.first_step_at = rec.get("time", time.time())


def run_row(ws: Workspace, run_dir: Path) -> dict:
    """One row of `trainkit runs`: the run's summary, with status and step read from the nodes
    while it is open (closed runs: from their record only)."""
    record = runs.read_record(run_dir)
    if record.get("status") not in ("running", "starting") or not ws.inventory_yml.exists():
        return runs.summarize(run_dir)
    if record.get("slurm_job"):   # a batch job: its state from the scheduler
        return runs.summarize(run_dir, {"status": slurm_runs.live_status(ws, run_dir), "step": None})
    nodes, paths = read_nodes(ws.inventory_yml)
    lay = remote.layout_for(paths, run_dir.name)
    states = remote.node_states(nodes, lay, len(record.get("attempts") or []))
    config = Path(record.get("config", ""))
    job = runs.load_job(config, record.get("overrides") or []) if config.is_file() else \
        runs.Job(name="unknown", source=Path("."), engine_config={})
    follower = Follower(nodes[0], lay, job, None)
    follower.poll()
    return runs.summarize(run_dir, {"status": runs.combined_status([s.status for s in states]),
                                    "step": follower.last_step})


def log_name(record: dict, rank: int | None, node_index: int | None) -> str:
    """The log file `logs --rank/--node` names: node-I.log, rank-N.log (engine runs), and for a
    `command:` run node 0's log when neither is given, node-N.log for --rank N with one process
    per node (that process is rank N; with more, see `_rank_glob`)."""
    if node_index is not None:
        return f"node-{node_index}.log"
    if record.get("mode") != "command":
        return f"rank-{rank or 0}.log"
    per = int(record.get("nproc_per_node") or 1)
    return f"node-{(rank or 0) // per}.log" if per == 1 or rank is None else f"rank-{rank}.log"


def _rank_glob(record: dict, rank: int) -> str:
    """Under logs/: the files a torchrun in a `command:` job wrote for global rank `rank`
    (launch.command_rank_logs: node-<rank // per>/<rdzv id>_*/attempt_*/<rank % per>/stdout.log)."""
    per = int(record.get("nproc_per_node") or 1)
    return f"torchrun/node-{rank // per}/*/attempt_*/{rank % per}/stdout.log"


def _newest(paths: list[Path]) -> Path | None:
    return max(paths, key=lambda p: p.stat().st_mtime) if paths else None


def _rank_log_on(node: Node, lay: remote.Layout, record: dict, rank: int) -> str:
    """The path of rank `rank`'s log of an open `command:` run on `node`: torchrun's per-rank file
    (the newest), else node-N.log with one process per node; InputError when there is none."""
    q = shlex.quote
    logs = f"{lay.run_dir}/logs"
    single = f"{logs}/{log_name(record, rank, None)}"
    res = node.sh(f"cd {q(logs)} 2>/dev/null && {{ ls -t {_rank_glob(record, rank)} 2>/dev/null | head -n 1; "
                  f"test -f {q(single)} && echo {q(single)}; ls; }}; true", timeout=30)
    lines = res.stdout.decode(errors="replace").splitlines()
    found = [ln for ln in lines if ln.endswith("/stdout.log") or ln == single]
    if found:
        return found[0] if found[0].startswith("/") else f"{logs}/{found[0]}"
    names = ", ".join(ln for ln in lines if ln.endswith(".log")) or "none yet"
    raise InputError(f"run {lay.run_id} has no log for rank {rank} (yet): neither torchrun's per-rank "
                     f"file logs/{_rank_glob(record, rank)} nor {log_name(record, rank, None)}",
                     fix=f"logs there now: {names} (--node I reads a node's whole output)")


def read_log(ws: Workspace, run_dir: Path, rank: int | None = None, node_index: int | None = None,
             follow: bool = False, poll_s: float = 1.0,
             on_wait: Callable[[str], None] | None = None) -> Iterator[bytes]:
    """The bytes of one log of a run, in pieces as they come. A closed run's logs were fetched
    into `run_dir/logs`; an open run's are read from the node that writes them, and with `follow`
    until the run ends (or its nodes are gone). InputError for a rank or node the cluster does not
    have, or a log that was not fetched (naming the ones that were). While following a log that
    is still empty (the run is starting: sync, setup, torchrun, `import torch`), `on_wait` is
    called once with a line saying which log on which node it waits for."""
    record = runs.read_record(run_dir)
    if record.get("slurm_job"):   # a batch job: one log per node on the shared storage
        yield from slurm_runs.read_log(ws, run_dir, rank, node_index, follow)
        return
    name = log_name(record, rank, node_index)
    per_rank = record.get("mode") == "command" and rank is not None and node_index is None
    if record.get("status") not in runs.OPEN:  # ended and fetched: the logs are here, the nodes may be gone
        path = run_dir / "logs" / name
        if per_rank:
            path = _newest(sorted(run_dir.glob(f"logs/{_rank_glob(record, rank)}"))) or path
        if not path.is_file():
            found = ", ".join(sorted(p.name for p in (run_dir / "logs").glob("*.log"))) or "none"
            raise InputError(f"run {run_dir.name} has no {name} in {run_dir / 'logs'}",
                             fix=f"logs fetched when it ended: {found} (--rank N / --node I)")
        yield path.read_bytes()
        return
    if not ws.inventory_yml.exists():
        raise InputError(f"no inventory in {ws.root}", fix="run `trainkit apply` first")
    nodes, paths = read_nodes(ws.inventory_yml)
    node = _log_node(nodes, record, rank, node_index)
    lay = remote.layout_for(paths, run_dir.name)
    path, offset, attempt = f"{lay.run_dir}/logs/{name}", 0, len(record.get("attempts") or [])
    if per_rank:
        path = _rank_log_on(node, lay, record, rank)
    while True:
        data, _ = remote.read_from(node, path, offset)
        offset += len(data)
        yield data
        if not follow:
            return
        if not offset and on_wait is not None:
            on_wait(f"waiting for {name} on node {node.name} ({path}): run {run_dir.name} is starting "
                    "(code sync, setup, torchrun); Ctrl-C stops watching, not the run")
            on_wait = None
        states = remote.node_states(nodes, lay, attempt)
        if runs.combined_status([s.status for s in states]) != "running":  # ended, or its nodes are gone
            yield remote.read_from(node, path, offset)[0]
            return
        time.sleep(poll_s)


def _log_node(nodes: list[Node], record: dict, rank: int | None, node_index: int | None) -> Node:
    """The node whose disk holds the log (all of them on shared storage: the head)."""
    if node_index is not None:
        if node_index >= len(nodes):
            raise InputError(f"--node {node_index}: the cluster has {len(nodes)} node(s)")
        return nodes[node_index]
    per, r = nodes[0].nproc, rank or 0
    if r >= per * len(nodes):
        raise InputError(f"--rank {r}: the cluster runs {per * len(nodes)} rank(s) "
                         f"({len(nodes)} node(s) x {per})", fix=f"give --rank 0 to {per * len(nodes) - 1}")
    return nodes[0] if record.get("shared") else nodes[min(r // per, len(nodes) - 1)]
