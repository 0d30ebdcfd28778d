"""Run a job to its end: launch, watch, and (with --recover) replace what was reclaimed and resume.

`start()` names the run and writes its record; `watch()` follows one attempt until every node's
supervisor has a final state or a node is lost; `drive()` loops over attempts:

    reclaim (a notice, exit 75 / "preempted", a node unreachable or its processes gone)
        -> stop the survivors -> replace lost nodes (hosts: a spare) -> provision only them
        -> back off -> relaunch on every node -> the job resumes from the newest checkpoint
    failure of the user's code (every node reachable, one exited non-zero, no notice)
        -> retried at most `max_restarts_on_errors` times (default 0)

Every step is an event in runs/<id>/events.jsonl; summary.json gains a cost ledger.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

from trainkit import clouds
from trainkit.clouds.base import MetadataToken
from trainkit.cluster import teardown
from trainkit.cluster.replace import effective_cluster, replace_lost
from trainkit.errors import BAD_INPUT, DESTROY, PREEMPTED, TRAIN, InputError, LockedError, TrainkitError
from trainkit.money import cost
from trainkit.provision import reach
from trainkit.provision.inventory import stage_vars
from trainkit.provision.playbook import run_playbook
from trainkit.runs import launch, remote
from trainkit.runs import record as runs
from trainkit.runs import status as run_status
from trainkit.spec.resolve import Cluster
from trainkit.util import progress
from trainkit.workspace import Workspace, write_atomic

FINAL = ("completed", "failed", "preempted", "cancelled")


@dataclass
class Options:
    detach: bool = False
    follow: bool = True                 # stream rank 0's log while attached
    recover: bool = False
    max_recoveries: int = 3
    max_restarts_on_errors: int = 0
    backoff_s: float = 60.0             # first wait before a relaunch; doubles each time
    backoff_max_s: float = 900.0
    poll_s: float = 2.0
    lost_after: int = 2                 # consecutive failed polls before a node counts as lost
    lost_after_s: float = 5.0           # ... spanning at least this long
    start_grace_s: float = 60.0         # a supervisor that has not written its state yet
    grace_s: float = 60.0               # survivors of a failed node get this long to stop alone
    notice_url: str | None = None
    notice_poll_s: float = 5.0


@dataclass
class Outcome:
    status: str                         # completed | failed | preempted | cancelled | reclaimed
    lost: list[str] = field(default_factory=list)
    last_step: int | None = None
    detected_at: float | None = None
    step_time_s: float | None = None    # the job's last logged mean step time (lost-work estimate)


# ------------------------------------------------------------------ the cluster as it is now


def _nodes(cluster: Cluster, ws: Workspace):
    if not ws.inventory_yml.exists():
        raise TrainkitError(f"cluster {cluster.name} is not set up in {ws.root}: apply first",
                            fix=f"run `trainkit apply {cluster.source}` first", exit_code=BAD_INPUT)
    return reach.nodes_from_inventory(ws.inventory_yml)


def notice_url(cluster: Cluster, configured: str | None) -> str | None:
    """The spot-termination URL to poll: --notice-url, else the cloud room's when spot is on."""
    if configured:
        return configured
    if cluster.spec.spot.enabled:
        return clouds.get(cluster.spec.cloud).spot_notice_url
    return None


def notice_token(cluster: Cluster, url: str | None) -> MetadataToken | None:
    """The session-token endpoint the supervisor needs before it reads `url`: the cloud room's,
    when `url` is on the same metadata host as it (also a --notice-url there); None otherwise."""
    if not url or not clouds.is_cloud(cluster.spec.cloud):
        return None
    token = clouds.get(cluster.spec.cloud).spot_notice_token
    if token and urlsplit(token.url).netloc == urlsplit(url).netloc:
        return token
    return None


# ------------------------------------------------------------------ closing runs (destroy)

def close_runs(cluster: Cluster, ws: Workspace, wait_s: float = 120,
               unreachable_ok: bool = False) -> list[tuple[str, str]]:
    """Before the nodes go (destroy): stop each run still running (SIGTERM: it checkpoints), then
    fetch every open run into runs/<id>/ and close its record. Returns [(run id, status)].
    A run whose head node cannot be reached: TrainkitError(DESTROY) (its results would be lost),
    or with `unreachable_ok` (destroy --yes: a cluster must not keep billing) a warning, and the
    run is closed as "unreachable"."""
    done = []
    for run_dir in run_status.open_runs(ws):
        attempt = len(runs.read_record(run_dir).get("attempts") or [])
        status = "cancelled" if not attempt else _stop_for_good(cluster, ws, run_dir, attempt, wait_s,
                                                                 unreachable_ok)
        finish(cluster, ws, run_dir, status)
        done.append((run_dir.name, status))
    return done


def _stop_for_good(cluster: Cluster, ws: Workspace, run_dir: Path, attempt: int, wait_s: float,
                   unreachable_ok: bool) -> str:
    """Stop `run_dir`'s attempt if it still runs; its final status (see close_runs)."""
    nodes, group = _nodes(cluster, ws)
    if nodes[0].sh("true", timeout=15).returncode != 0:
        if not unreachable_ok:
            raise TrainkitError(f"run {run_dir.name}: its results are on {nodes[0].name}, which cannot be "
                                "reached, so nothing was destroyed", exit_code=DESTROY,
                                fix=f"make the node reachable and destroy again, or give the results up: "
                                    f"`trainkit destroy {cluster.source} --yes`")

        progress.info(f"warning: run {run_dir.name}: {nodes[0].name} cannot be reached; the results it "
                      "holds go with the cluster")
        runs.event(run_dir, "unreachable", attempt=attempt, by="destroy")
        return "unreachable"
    status = run_status.live_status(cluster, ws, run_dir)
    if status == "running":
        stop_survivors(nodes, remote.layout_for(group, run_dir.name), attempt, [], wait_s=wait_s)
        runs.event(run_dir, "cancelled", attempt=attempt, by="destroy")
        status = "cancelled"
    return status


# ------------------------------------------------------------------ start / attach

def start(cluster: Cluster, ws: Workspace, config: Path, overrides: list[str], *,
          resume: str | None = None, force: bool = False) -> tuple[runs.Job, Path]:
    """A new run (or `resume`'s) with its record written. InputError on a changed config or a
    completed run to resume; LockedError while a run is still running on the cluster (two jobs
    would share its GPUs, rendezvous port and, on resume, checkpoints)."""
    job = runs.load_job(config, overrides)
    check_job(cluster, job)
    _nodes(cluster, ws)
    busy = run_status.active_runs(cluster, ws)
    if resume:
        run_dir = runs.resolve_run(ws.runs_dir, resume)
        record = runs.read_record(run_dir)
        status = run_status.live_status(cluster, ws, run_dir)
        if run_dir in busy:
            raise LockedError(f"run {run_dir.name} is still running: a second attempt would write the same "
                              "checkpoints", fix=f"follow it: trainkit train {cluster.source} --attach {run_dir.name}")
        if status == "completed":
            raise InputError(f"run {run_dir.name} completed: there is nothing to resume",
                             fix="start a new run (drop --resume); its results are in " + str(run_dir))
        runs.check_resume(record, job, force)
    if busy:
        names = ", ".join(p.name for p in busy)
        raise LockedError(f"cluster {cluster.name} is busy: run {names} is still running on it",
                          fix=f"wait for it (trainkit train {cluster.source} --attach {busy[-1].name}) or stop "
                              f"it (trainkit cancel {cluster.source} {busy[-1].name}), then train again")
    if resume:
        return job, run_dir
    run_id = runs.new_run_id(job.name, ws.runs_dir)
    run_dir = ws.runs_dir / run_id
    runs.write_record(run_dir, {"run_id": run_id, "name": job.name, "config": str(config.resolve()),
                                "overrides": list(overrides), "config_hash": job.fingerprint(),
                                "mode": job.mode, "created_at": time.time(), "status": "starting",
                                "attempts": []})
    return job, run_dir


def launch_attempt(cluster: Cluster, ws: Workspace, job: runs.Job, run_dir: Path, opts: Options) -> int:
    """Start attempt K+1 on every node; returns K+1 (recorded in run.json and events.jsonl)."""
    nodes, group = _nodes(cluster, ws)
    stage_data(cluster, ws, job, group)
    record = runs.read_record(run_dir)
    attempt = len(record.get("attempts") or []) + 1
    lay = remote.layout_for(group, run_dir.name)
    url = notice_url(cluster, opts.notice_url)
    how = launch.launch(job, nodes, lay, attempt, notice_url=url, notice_poll=opts.notice_poll_s,
                        notice_token=notice_token(cluster, url))
    record.setdefault("attempts", []).append({"attempt": attempt, "nodes": [n.name for n in nodes],
                                              "started_at": time.time(), "ended_at": None})
    record.update(status="running", node_run_dir=lay.run_dir, checkpoint_dir=lay.checkpoint_dir,
                  shared=bool(group.get("trainkit_shared_work_dir")) or nodes[0].local)
    runs.write_record(run_dir, record)
    runs.event(run_dir, "launched", attempt=attempt, nodes=[n.name for n in nodes],
               supervisor=sorted(set(how.values())))
    return attempt


def stage_data(cluster: Cluster, ws: Workspace, job: runs.Job, group: dict) -> None:
    """Stage the spec's `data:` and then the job's own `stage:` section on the nodes, before every
    attempt (cheap when the files are present and verified: trainkit/staging/fetch.py)."""
    if not (cluster.spec.data.sources or job.stage):
        return

    if cluster.spec.data.sources:
        run_playbook("stage.yml", cluster, ws, exit_code=TRAIN)
    if job.stage:
        run_playbook("stage.yml", cluster, ws, stage_vars(job.stage, group), exit_code=TRAIN)


def check_job(cluster: Cluster, job: runs.Job) -> None:
    """What a job asks of the cluster it runs on; InputError (exit 2) before any node is touched."""
    if job.stage and job.stage.target == "nas" and not cluster.nas.get("enabled"):
        raise InputError(f"{job.source}: stage.target: nas, but cluster {cluster.name} has no NAS",
                         fix="use stage.target: disk, or enable storage.nas in the cluster spec")


# ------------------------------------------------------------------ watch one attempt


def watch(nodes, lay: remote.Layout, attempt: int, run_dir: Path, follower: run_status.Follower, opts: Options,
          *, stop_on_preempt: bool = True) -> Outcome:
    """Poll every node until all are final or one is lost; records notices as events."""
    misses: dict[str, list[float]] = {n.name: [] for n in nodes}   # times of consecutive bad polls
    first_end, signalled, noticed, began = None, False, set(), time.time()
    while True:
        states = remote.node_states(nodes, lay, attempt)
        follower.poll()
        now = time.time()
        for s in states:
            bad = s.status in ("unreachable", "lost") and not (
                not s.state and s.reachable and now - began < opts.start_grace_s)
            misses[s.name] = misses[s.name] + [now] if bad else []
            if s.state.get("notice") and s.name not in noticed:
                noticed.add(s.name)
                runs.event(run_dir, "notice", node=s.name, body=s.state["notice"].get("body"))
        lost = [n for n, t in misses.items() if len(t) >= opts.lost_after and t[-1] - t[0] >= opts.lost_after_s]
        if lost:
            return Outcome("reclaimed", lost, follower.last_step, time.time(), follower.step_time_s)
        finals = [s.status for s in states if s.status in FINAL]
        if len(finals) == len(states):
            status = ("completed" if set(finals) == {"completed"} else "cancelled" if "cancelled" in finals
                      else "preempted" if "preempted" in finals or noticed else "failed")
            return Outcome(status, [], follower.last_step, time.time(), follower.step_time_s)
        if finals and first_end is None:
            first_end = time.time()
        if first_end and not signalled and time.time() - first_end > opts.grace_s:
            remote.signal_nodes(nodes, lay, attempt)   # survivors of a dead peer stuck in a collective
            signalled = True
        time.sleep(opts.poll_s)


def stop_survivors(nodes, lay: remote.Layout, attempt: int, lost: list[str], wait_s: float = 60) -> None:
    """SIGTERM the supervisors on reachable nodes; after `wait_s`, a hard stop (every process of
    each job's tree: remote.signal_nodes KILL). No survivor (every node lost): nothing to stop."""
    alive = [n for n in nodes if n.name not in lost]
    if not alive:
        return
    remote.signal_nodes(alive, lay, attempt, "TERM")
    deadline = time.time() + wait_s
    while time.time() < deadline:
        states = remote.node_states(alive, lay, attempt)
        if all(s.status not in ("running", "starting") for s in states):
            return
        time.sleep(1)
    remote.signal_nodes(alive, lay, attempt, "KILL")


# ------------------------------------------------------------------ the loop

def drive(cluster: Cluster, ws: Workspace, job: runs.Job, run_dir: Path, opts: Options,
          echo: Callable[[str], None] | None = None, attach_attempt: int | None = None) -> dict[str, Any]:
    """Run (or re-attach to) `run_dir` until it ends; with opts.recover, through reclaims.
    Returns the final summary; TrainkitError(PREEMPTED) / (TRAIN) when it does not complete."""

    recoveries, restarts, backoff = 0, 0, opts.backoff_s
    attempt = attach_attempt or launch_attempt(cluster, ws, job, run_dir, opts)
    while True:
        cluster = effective_cluster(cluster, ws)
        nodes, group = _nodes(cluster, ws)
        lay = remote.layout_for(group, run_dir.name)
        follower = run_status.Follower(nodes[0], lay, job, echo if opts.follow else None)
        out = watch(nodes, lay, attempt, run_dir, follower, opts)
        _end_attempt(run_dir, attempt, out)
        if out.status == "completed":
            runs.event(run_dir, "completed", attempt=attempt, step=out.last_step)
            return finish(cluster, ws, run_dir, "completed")
        reclaim = out.status in ("reclaimed", "preempted")
        runs.event(run_dir, "preempted" if reclaim else out.status, attempt=attempt, lost=out.lost,
                   last_step=out.last_step)
        if out.status == "cancelled" or not opts.recover:
            return finish(cluster, ws, run_dir, out.status, raise_=True)
        if reclaim:
            recoveries += 1
            if recoveries > opts.max_recoveries:
                return finish(cluster, ws, run_dir, "preempted", raise_=True,
                              why=f"gave up after {opts.max_recoveries} recoveries")
        else:
            restarts += 1
            if restarts > opts.max_restarts_on_errors:
                return finish(cluster, ws, run_dir, "failed", raise_=True)
        stop_survivors(nodes, lay, attempt, out.lost)
        if out.lost:
            try:
                cluster, events = replace_lost(cluster, ws, out.lost,
                                               f"trainkit train --resume {run_dir.name}")
            except TrainkitError as err:  # nothing to replace them with: close the run, then say so
                finish(cluster, ws, run_dir, "preempted")
                raise TrainkitError(f"run {run_dir.name} preempted: {err.message}", fix=err.fix,
                                    exit_code=err.exit_code) from None
            for ev in events:
                runs.event(run_dir, **ev)
        runs.event(run_dir, "backoff", seconds=backoff)
        time.sleep(backoff)
        backoff = min(backoff * 2, opts.backoff_max_s)
        attempt = launch_attempt(cluster, ws, job, run_dir, opts)
        _await_resume(cluster, ws, job, run_dir, attempt, out)


def _await_resume(cluster: Cluster, ws: Workspace, job: runs.Job, run_dir: Path, attempt: int,
                  before: Outcome, timeout_s: float = 300) -> None:
    """Record `resumed` (step, lost work) once the relaunched job logs its first step."""
    nodes, group = _nodes(cluster, ws)
    follower = run_status.Follower(nodes[0], remote.layout_for(group, run_dir.name), job, None)
    launched, deadline = time.time(), time.time() + timeout_s
    while time.time() < deadline:
        follower.poll()   # reads the whole metrics.jsonl: the newest `run` record is this attempt's
        if follower.first_step_at and follower.first_step_at >= launched - 1:
            break
        time.sleep(0.5)
    resumed = follower.resumed_from
    lost = (before.last_step - resumed) if (before.last_step is not None and resumed is not None) else None
    runs.event(run_dir, "resumed", attempt=attempt, step=resumed, lost_steps=lost,
               lost_s=round(lost * before.step_time_s, 3) if lost is not None and before.step_time_s else None,
               first_step_at=follower.first_step_at)


def _end_attempt(run_dir: Path, attempt: int, out: Outcome) -> None:
    record = runs.read_record(run_dir)
    for a in record.get("attempts") or []:
        if a["attempt"] == attempt:
            a.update(ended_at=out.detected_at, outcome=out.status, last_step=out.last_step)
    runs.write_record(run_dir, record)


def finish(cluster: Cluster, ws: Workspace, run_dir: Path, status: str, *, raise_: bool = False,
           why: str = "") -> dict[str, Any]:
    """Fetch the run's files, add the cost ledger to summary.json, close the record."""
    nodes, group = _nodes(cluster, ws)
    record = runs.read_record(run_dir)
    lay = remote.layout_for(group, run_dir.name)
    reachable = [n for n in nodes if n.sh("true", timeout=15).returncode == 0]
    if reachable and reachable[0].rank == 0:
        remote.fetch_run(reachable, lay, run_dir, shared=bool(record.get("shared")))
    summary_path = run_dir / "summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.is_file() else {}
    for a in record.get("attempts") or []:
        a["ended_at"] = a.get("ended_at") or time.time()
    summary = runs.kept_summary(summary, lay.run_dir, run_dir, status)  # paths and status as runs/<id>/ has them
    summary["cost"] = cost.run_ledger(cluster, record)
    summary["recoveries"] = sum(1 for e in runs.read_events(run_dir) if e["event"] == "resumed")
    write_atomic(summary_path, json.dumps(summary, indent=2, sort_keys=True))
    now = time.time()
    for a in record.get("attempts") or []:
        a["ended_at"] = a.get("ended_at") or now
    record.update(status=status, ended_at=now)
    runs.write_record(run_dir, record)
    if raise_ and status != "completed":
        code = PREEMPTED if status == "preempted" else TRAIN
        fix = (f"resume it: trainkit train {cluster.source} --resume {run_dir.name} (add --recover "
               "to keep it going)") if status in ("preempted", "cancelled") else \
            f"see `trainkit logs {cluster.source} {run_dir.name}` and {run_dir}/logs/"
        raise TrainkitError(f"run {run_dir.name} {status}{': ' + why if why else ''}", fix=fix, exit_code=code)
    return {"run_id": run_dir.name, "run_dir": str(run_dir), "status": status, **summary}


def cancel(cluster: Cluster, ws: Workspace, run_dir: Path, wait_s: float) -> tuple[str, bool, Path]:
    """Stop a run cleanly: SIGTERM to its job on every node (it writes a checkpoint), wait up to
    `wait_s`, then SIGKILL what is left, fetch the results and close the record as cancelled.
    A run that has already ended keeps its true status (its results are fetched if not yet).
    Returns (status, whether it had ended before this call, the run folder the results are in)."""
    record = runs.read_record(run_dir)
    if not ws.inventory_yml.exists():
        raise InputError(f"no inventory in {ws.root}", fix="run `trainkit apply` first")
    status = run_status.live_status(cluster, ws, run_dir)
    if status not in runs.OPEN:
        if record.get("status") in runs.OPEN:
            finish(cluster, ws, run_dir, status)
        return status, True, run_dir
    nodes, group = reach.nodes_from_inventory(ws.inventory_yml)
    attempt = len(record.get("attempts") or [])
    stop_survivors(nodes, remote.layout_for(group, run_dir.name), attempt, [], wait_s=wait_s)
    runs.event(run_dir, "cancelled", attempt=attempt)
    return "cancelled", False, Path(finish(cluster, ws, run_dir, "cancelled")["run_dir"])


def destroy(cluster: Cluster, ws: Workspace, *, sweep: bool, confirm_sweep, unreachable_ok: bool
            ) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Destroy the cluster, its runs first: under the workspace lock, every open run is stopped
    (SIGTERM: it checkpoints) and its results fetched, then trainkit.cluster.teardown.destroy runs.
    Returns (teardown's result, [(run id, status it was closed as)]); `unreachable_ok` lets a run
    whose nodes are gone be closed as "unreachable" instead of stopping the destroy."""
    with ws.lock("destroy"):
        closed = close_runs(cluster, ws, unreachable_ok=unreachable_ok) if ws.inventory_yml.exists() else []
        return teardown.destroy(cluster, ws, sweep=sweep, confirm_sweep=confirm_sweep), closed
