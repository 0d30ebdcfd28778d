"""One attempt of a run on the nodes: which nodes answer, the launch, and the roll-back of a
launch that worked on some nodes only.

`launch_attempt()` starts attempt K+1 on every node and records it (run.json `attempts`,
events.jsonl `launched`). When the launch fails on some nodes (trainkit.runs.launch.LaunchError),
what it started on the others (supervisors, torchrun agents holding the rendezvous port) is
stopped here before the error goes up, and the attempt is recorded all the same: in run.json
with `outcome: launch_failed` and the nodes it failed on, in events.jsonl as `launch_failed` with
how many processes the roll-back stopped per node. The next attempt has a number, a rendezvous id
and state files of its own, so nothing of the failed one can meet it.
"""

from __future__ import annotations

import dataclasses
import shlex
import time
from pathlib import Path
from urllib.parse import urlsplit

from trainkit.clouds.base import MetadataToken
from trainkit.errors import BAD_INPUT, TRAIN, TrainkitError
from trainkit.provision.inventory import stage_vars
from trainkit.provision.node import Node, Paths, read_nodes
from trainkit.provision.playbook import run_playbook
from trainkit.runs import launch, lock, remote
from trainkit.runs import record as runs
from trainkit.spec.resolve import Cluster
from trainkit.util.nodeargs import http_url
from trainkit.workspace import Workspace

PROBE_TIMEOUT_S = 15      # one `true` over ssh (ConnectTimeout 5 s, node.Node.sh) and a margin
STATE_WAIT_S = 30         # a supervisor just started writes its state file within a second or two


def nodes_of(cluster: Cluster, ws: Workspace) -> tuple[list[Node], Paths]:
    """The nodes in rank order and the cluster's node paths; TrainkitError before the cluster is applied."""
    if not ws.inventory_yml.exists():
        raise TrainkitError(f"cluster {cluster.name} is not set up in {ws.root}: apply first",
                            fix=f"run `trainkit apply {cluster.source}` first", exit_code=BAD_INPUT)
    return read_nodes(ws.inventory_yml)


def subset(nodes: list[Node], names: list[str]) -> list[Node]:
    """The nodes named in `names`, in their rank order, ranked again from 0 (a smaller world:
    the first of them hosts the rendezvous)."""
    kept = [n for n in nodes if n.name in names]
    return [dataclasses.replace(n, rank=i) for i, n in enumerate(kept)]


def unreachable(nodes: list[Node]) -> list[str]:
    """Names of the `nodes` that do not run `true` over ssh (in parallel), in rank order."""
    ok = remote.on_nodes(nodes, lambda n: n.sh("true", timeout=PROBE_TIMEOUT_S).returncode == 0)
    return [n.name for n, up in zip(nodes, ok) if not up]


def notice_url(cluster: Cluster, configured: str | None) -> str | None:
    """The spot-termination URL to poll: --notice-url, else the cloud room's when spot is on."""
    if configured is not None:
        return http_url(configured, "--notice-url")  # InputError for anything but http(s)://host
    if cluster.spec.spot.enabled:
        return cluster.room.spot_notice_url
    return None


def notice_token(cluster: Cluster, url: str | None) -> MetadataToken | None:
    """The session-token endpoint the supervisor needs before it reads `url`: the cloud room's,
    when `url` is on the same metadata host as it (also a --notice-url there); None otherwise."""
    token = cluster.room.spot_notice_token if url else None
    if token and urlsplit(token.url).netloc == urlsplit(url).netloc:
        return token
    return None


def stage_data(cluster: Cluster, ws: Workspace, job: runs.Job, paths: Paths) -> None:
    """Stage the spec's `data:` and then the job's own `stage:` section on the nodes, before every
    attempt (cheap when the files are present and verified: trainkit/staging/fetch.py)."""
    if cluster.spec.data.sources:
        run_playbook("stage.yml", cluster, ws, exit_code=TRAIN)
    if job.stage:
        extra = stage_vars(job.stage, paths.data_roots, paths.data_root, paths.shared_work_dir)
        run_playbook("stage.yml", cluster, ws, extra, exit_code=TRAIN)


def launch_attempt(cluster: Cluster, ws: Workspace, job: runs.Job, run_dir: Path, opts,
                   only: list[str] | None = None) -> int:
    """Start attempt K+1 on every node, or on the nodes named in `only` (recover.elastic: the
    survivors, ranked 0.. in their order; their data is staged already); returns K+1 (recorded in
    run.json and events.jsonl). LaunchError when it failed on some node, after the others were
    rolled back (module doc)."""
    nodes, paths = nodes_of(cluster, ws)
    if only is None:
        stage_data(cluster, ws, job, paths)
    else:
        nodes = subset(nodes, only)
    record = runs.read_record(run_dir)
    attempt = len(record.get("attempts") or []) + 1
    lay = remote.layout_for(paths, run_dir.name)
    url = notice_url(cluster, opts.notice_url)
    names, t0 = [n.name for n in nodes], time.time()
    record.update(node_run_dir=lay.run_dir, checkpoint_dir=lay.checkpoint_dir,
                  shared=paths.shared_work_dir or nodes[0].local, nproc_per_node=nodes[0].nproc)
    try:
        how = launch.launch(job, nodes, lay, attempt, notice_url=url, notice_poll=opts.notice_poll_s,
                            notice_token=notice_token(cluster, url))
    except launch.LaunchError as err:
        stopped = roll_back([n for n in nodes if n.name in err.started], lay, attempt)
        record.setdefault("attempts", []).append({"attempt": attempt, "nodes": names, "started_at": t0,
                                                  "ended_at": time.time(), "outcome": "launch_failed",
                                                  "failed": err.failed})
        runs.write_record(run_dir, record)
        runs.event(run_dir, "launch_failed", attempt=attempt, failed=err.failed, stopped=stopped,
                   error=err.message[-600:])
        raise
    lock.take(nodes, lay, attempt, ws.root)
    record.setdefault("attempts", []).append({"attempt": attempt, "nodes": names, "started_at": t0,
                                              "ended_at": None})
    record.update(status="running")
    runs.write_record(run_dir, record)
    runs.event(run_dir, "launched", attempt=attempt, nodes=names, supervisor=sorted(set(how.values())))
    return attempt


def roll_back(nodes: list[Node], lay: remote.Layout, attempt: int) -> dict[str, int]:
    """Stop `attempt` where its launch worked: wait (at most STATE_WAIT_S) for each supervisor's
    state file, then the hard stop (supervise.py --hard-stop: the supervisor and its whole job
    tree). Returns {node: processes killed} (-1: the node did not answer)."""
    def one(node: Node) -> int:
        q = shlex.quote
        sf = q(lay.state_file(node.rank, attempt))
        py = q(node.python)
        script = (f"for i in $(seq {STATE_WAIT_S * 2}); do grep -qs supervisor_pid {sf} && break; sleep 0.5; done; "
                  f"{py} {q(lay.node_dir(node.rank) + '/supervise.py')} --hard-stop {sf}")
        res = node.sh(script, timeout=STATE_WAIT_S + 30)
        words = res.stdout.decode(errors="replace").split()
        return int(words[1]) if res.returncode == 0 and len(words) > 1 and words[1].isdigit() else -1

    return dict(zip((n.name for n in nodes), remote.on_nodes(nodes, one)))
