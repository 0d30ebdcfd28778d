"""Run a job to its end: launch, watch, and (with --recover) replace what was reclaimed and resume.

`start()` names the run and writes its record; `watch()` follows one attempt until every node's
supervisor has a final state or a node is lost; `drive()` loops over attempts:

    reclaim (a notice, exit 75 / "preempted", a node unreachable or its processes gone)
        -> stop the survivors -> replace lost nodes (hosts: a spare; the lost host is fenced if it
           comes back: runs/fence.py) -> provision only them -> doctor
        -> back off -> relaunch on every node -> the job resumes from the newest checkpoint
    failure of the user's code (every node reachable, one exited non-zero, no notice)
        -> retried at most `max_restarts_on_errors` times (default 0)

Every step is an event in runs/<id>/events.jsonl; summary.json gains a cost ledger.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from trainkit import records
from trainkit.cluster import doctor, lost
from trainkit.cluster.replace import effective_cluster, replace_lost
from trainkit.errors import PREEMPTED, TRAIN, InputError, LockedError, TrainkitError
from trainkit.money import cost
from trainkit.provision.playbook import prepare_inventory, run_site
from trainkit.runs import attempt as attempt_
from trainkit.runs import elastic, fence, hang, launch, lock, remote, resume_wait, storage_faults, watchdog
from trainkit.runs import record as runs
from trainkit.runs import status as run_status
from trainkit.spec.resolve import Cluster
from trainkit.util import progress
from trainkit.workspace import Workspace, write_atomic

FINAL = ("completed", "failed", "preempted", "cancelled")
LOST_PEER_WAIT_S = 10  # survivors of a lost node: time to end alone before the hard stop
# recover.elastic: the survivors' time to write their checkpoint and exit before the hard stop;
# torchrun gives its ranks 30 s after a SIGTERM before SIGKILL (pytorch PR #61602), and a margin.
STOP_TO_GROW_S = 60


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
    doctor: bool = True                 # doctor's checks after every replacement (train --no-doctor: off)
    hang_after_s: float | None = None   # the watchdog's fixed window (None: from the step time; 0: off)


@dataclass
class Outcome:
    status: str                         # completed | failed | preempted | cancelled | reclaimed
    lost: list[str] = field(default_factory=list)
    last_step: int | None = None
    detected_at: float | None = None
    step_time_s: float | None = None    # the job's last logged mean step time (lost-work estimate)
    detail: dict[str, Any] = field(default_factory=dict)   # hung: the stalls; a storage fault: what, where


# ------------------------------------------------------------------ the cluster as it is now


_nodes = attempt_.nodes_of


# ------------------------------------------------------------------ start / attach

def check_free(cluster: Cluster, ws: Workspace) -> None:
    """LockedError while a run of another workspace holds the cluster's nodes (their run lock).
    Asked before anything else runs on the nodes (doctor's all-reduce, a launch)."""
    nodes, group = _nodes(cluster, ws)
    lock.check_free(nodes, remote.layout_for(group, "-"), ws.runs_dir, str(cluster.source))


def start(cluster: Cluster, ws: Workspace, config: Path, overrides: list[str], *,
          resume: str | None = None, force: bool = False, recover: bool = False) -> tuple[runs.Job, Path]:
    """A new run (or `resume`'s) with its record written. InputError on a changed config or a
    completed run to resume; LockedError while a run is still running on the cluster (two jobs
    would share its GPUs, rendezvous port and, on resume, checkpoints). With `recover`, a run to
    resume that still runs on some nodes while others do not answer (its controller died, then a
    node) is a run that cannot go on: what is left of it is stopped and it is resumed."""
    job = runs.load_job(config, overrides)
    check_job(cluster, job)
    check_free(cluster, ws)
    busy = run_status.active_runs(cluster, ws)
    if resume:
        run_dir = runs.resolve_run(ws.runs_dir, resume)
        record = runs.read_record(run_dir)
        if recover and run_dir in busy and _stop_if_crippled(cluster, ws, run_dir):
            busy.remove(run_dir)
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


def check_job(cluster: Cluster, job: runs.Job) -> None:
    """What a job asks of the cluster it runs on; InputError (exit 2) before any node is touched."""
    if job.stage and job.stage.target == "nas" and not cluster.nas.get("enabled"):
        raise InputError(f"{job.source}: stage.target: nas, but cluster {cluster.name} has no NAS",
                         fix="use stage.target: disk, or enable storage.nas in the cluster spec")


# ------------------------------------------------------------------ watch one attempt


def watch(nodes, lay: remote.Layout, attempt: int, run_dir: Path, follower: run_status.Follower, opts: Options,
          *, stop_on_preempt: bool = True, interrupt: Callable[[], bool] | None = None) -> Outcome:
    """Poll every node until all are final or one is lost; records notices as events. With
    `interrupt`, an Outcome "interrupted" as soon as it answers True (the job is left running)."""
    misses: dict[str, list[float]] = {n.name: [] for n in nodes}   # times of consecutive bad polls
    first_end, signalled, noticed, began = None, False, set(), time.time()
    ended_alone: dict[str, str] = {}   # the nodes that ended before the controller stopped the rest
    while True:
        states = remote.node_states(nodes, lay, attempt)
        follower.poll()
        now = time.time()
        step = follower.last_step if follower.last_step is not None else watchdog.last_step(states)
        for s in states:
            bad = s.status in ("unreachable", "lost") and not (
                not s.state and s.reachable and now - began < opts.start_grace_s)
            misses[s.name] = misses[s.name] + [now] if bad else []
            if s.state.get("notice") and s.name not in noticed:
                noticed.add(s.name)
                runs.event(run_dir, "notice", node=s.name, body=s.state["notice"].get("body"))
        lost = [n for n, t in misses.items() if len(t) >= opts.lost_after and t[-1] - t[0] >= opts.lost_after_s]
        if lost:
            return Outcome("reclaimed", lost, step, time.time(), follower.step_time_s)
        stalls = watchdog.stalls(states, opts.hang_after_s)
        if stalls:
            return Outcome("hung", [], step, time.time(), follower.step_time_s,
                           detail={"stalls": [x.as_dict() for x in stalls]})
        finals = {s.name: s.status for s in states if s.status in FINAL}
        if len(finals) == len(states):
            status = watchdog.ended_as(ended_alone or finals, bool(noticed))
            return Outcome(status, [], step, time.time(), follower.step_time_s)
        if finals and first_end is None:
            first_end = time.time()
        if first_end and not signalled and time.time() - first_end > opts.grace_s:
            ended_alone = dict(finals)
            remote.signal_nodes(nodes, lay, attempt)   # survivors of a dead peer stuck in a collective
            signalled = True
        if interrupt and interrupt():
            return Outcome("interrupted", [], step, time.time(), follower.step_time_s)
        time.sleep(opts.poll_s)


def stop_survivors(nodes, lay: remote.Layout, attempt: int, lost: list[str], wait_s: float = 60) -> None:
    """SIGTERM the supervisors on reachable nodes; after `wait_s`, a hard stop (every process of
    each job's tree: remote.signal_nodes KILL). No survivor (every node lost): nothing to stop.
    With a node lost, at most LOST_PEER_WAIT_S: a job missing a rank cannot agree on a checkpoint
    (the agreement is a collective that waits for the lost rank), so waiting longer saves nothing."""
    alive = [n for n in nodes if n.name not in lost]
    if not alive:
        return
    wait_s = min(wait_s, LOST_PEER_WAIT_S) if lost else wait_s
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
    if job.hang_after_s is not None:
        opts = dataclasses.replace(opts, hang_after_s=job.hang_after_s)
    attempt = attach_attempt or launch_recovering(cluster, ws, job, run_dir, opts)
    _resumed_unless_recorded(cluster, ws, job, run_dir, attempt)
    fencer = fence.Fencer(run_dir)   # hosts lost on the way: their old job is stopped if they come back
    ended: Outcome | None = None     # recover.elastic: how the survivors' attempt ended by itself
    try:
        while True:
            cluster = effective_cluster(cluster, ws)
            nodes, group = _nodes(cluster, ws)
            lay = remote.layout_for(group, run_dir.name)
            if ended is None:
                follower = run_status.Follower(nodes[0], lay, job, echo if opts.follow else None)
                out = watch(nodes, lay, attempt, run_dir, follower, opts)
            else:
                out, ended = ended, None
            _end_attempt(run_dir, attempt, out)
            if out.status == "completed":
                fencer.close()
                runs.event(run_dir, "completed", attempt=attempt, step=out.last_step)
                return finish(cluster, ws, run_dir, "completed")
            # a full or read-only disk when no node was lost: no node is at fault then
            fault = storage_faults.find(nodes, lay, attempt) if not out.lost else None
            reclaim = out.status in ("reclaimed", "preempted") and not fault
            runs.event(run_dir, "preempted" if reclaim else out.status, attempt=attempt, lost=out.lost,
                       last_step=out.last_step, **out.detail)
            if out.status == "hung":   # stack dumps, then SIGTERM -> SIGKILL of every node's job
                hang.stop_hung(nodes, lay, attempt, run_dir, stop_survivors)
            if fault:
                fencer.close()
                storage_faults.close_run(run_dir, attempt, fault, functools.partial(finish, cluster, ws, run_dir, "failed"),
                                         str(cluster.source))
            if out.status == "cancelled" or not opts.recover:
                fencer.close()
                return finish(cluster, ws, run_dir, "failed" if out.status == "hung" else out.status, raise_=True,
                              why="hung (no step for the watchdog's window)" if out.status == "hung" else "")
            if reclaim:
                recoveries += 1
                if recoveries > opts.max_recoveries:
                    fencer.close()
                    return finish(cluster, ws, run_dir, "preempted", raise_=True,
                                  why=f"gave up after {opts.max_recoveries} recoveries")
            else:
                restarts += 1
                if restarts > opts.max_restarts_on_errors:
                    fencer.close()
                    return finish(cluster, ws, run_dir, "failed", raise_=True,
                                  why="hung, and --max-restarts-on-errors is spent" if out.status == "hung" else "")
            stop_survivors(nodes, lay, attempt, out.lost)
            if out.lost and cluster.spec.cloud == "hosts":   # a lost cloud instance is terminated by its replacement
                fencer.add(nodes, lay, attempt, out.lost)
            if out.lost and job.elastic:
                went_on = _on_survivors(cluster, ws, job, run_dir, opts, nodes, out.lost, echo)
                if went_on is not None:
                    cluster, attempt, ended = went_on
                    continue
            if out.lost:
                cluster = _replace(cluster, ws, run_dir, out.lost, opts)
            runs.event(run_dir, "backoff", seconds=backoff)
            time.sleep(backoff)
            backoff = min(backoff * 2, opts.backoff_max_s)
            attempt = launch_recovering(cluster, ws, job, run_dir, opts)
            _await_resume(cluster, ws, job, run_dir, attempt)
    finally:
        fencer.stop()


def stop_if_crippled(cluster: Cluster, ws: Workspace, resume: str) -> None:
    """`train --resume RUN --recover` before anything else runs on the nodes (doctor's checks,
    its replacements): the run's jobs on the nodes that answer are stopped when a node of it does
    not (its controller died, then a node); a run that runs whole is left alone (start() says so)."""
    run_dir = runs.resolve_run(ws.runs_dir, resume)
    runs.refuse_completed(run_dir)
    if run_dir in run_status.active_runs(cluster, ws):
        _stop_if_crippled(cluster, ws, run_dir)



def provision_unfinished(cluster: Cluster, ws: Workspace, resume: str) -> None:
    """`train --resume RUN --recover` after a controller that died while it provisioned a
    replacement: the nodes the run's events put in (`replaced`) with no `provisioned` after it,
    and still in the cluster, are provisioned now (site.yml --limit), recorded as `provisioned`."""
    run_dir = runs.resolve_run(ws.runs_dir, resume)
    pending: list[str] = []
    for e in runs.read_events(run_dir):
        if e["event"] == "replaced":
            pending.append(e.get("by") or e["node"])   # hosts: the spare; a cloud: the node's own name
        elif e["event"] == "provisioned":
            pending = [n for n in pending if n not in (e.get("nodes") or [])]
    cluster = effective_cluster(cluster, ws)   # hosts: hosts.json's active list, written before provisioning
    active = ({h.name for h in cluster.spec.hosts if not h.spare} if cluster.spec.cloud == "hosts"
              else {n.name for n in _nodes(cluster, ws)[0]})
    todo = [n for n in dict.fromkeys(pending) if n in active]
    if not todo:
        return
    progress.info(f"provisioning {', '.join(todo)}: put in by run {run_dir.name}'s last controller, "
                  "which stopped before it finished")
    t0 = time.time()
    prepare_inventory(cluster, ws)
    run_site(cluster, ws, limit=todo)
    runs.event(run_dir, "provisioned", nodes=todo, took_s=round(time.time() - t0, 3), by="resume")


def record_events(run_dir: Path, events: list[dict[str, Any]]) -> None:
    """Events of work done for the run before it started (doctor's replacements) into its events.jsonl."""
    for ev in events:
        runs.event(run_dir, **ev)


def _stop_if_crippled(cluster: Cluster, ws: Workspace, run_dir: Path) -> bool:
    """Whether a node of the run's newest attempt does not answer; if so, the others' jobs are
    stopped (`unreachable` and `preempted` events: the resume that follows replaces the node)."""
    nodes, group = _nodes(cluster, ws)
    down = attempt_.unreachable(nodes)
    if not down:
        return False
    attempt = len(runs.read_record(run_dir).get("attempts") or [])
    runs.event(run_dir, "unreachable", nodes=down, by="resume", attempt=attempt)
    stop_survivors(nodes, remote.layout_for(group, run_dir.name), attempt, down)
    runs.event(run_dir, "preempted", attempt=attempt, lost=down, last_step=None)
    return True


def launch_recovering(cluster: Cluster, ws: Workspace, job: runs.Job, run_dir: Path, opts: Options) -> int:
    """Start the run's next attempt; returns its number. With opts.recover the nodes are probed
    first and the unreachable ones replaced (a spare, a new instance: the state comes from the
    nodes, not from what the last controller saw), and a launch that failed on nodes that then
    do not answer is tried again after replacing them (at most max_recoveries times). Otherwise,
    or when the nodes it failed on answer (a fault a spare would not fix), the run is closed:
    TrainkitError PREEMPTED (a node is gone: resume it with --recover) or TRAIN. A failed launch
    has been rolled back and recorded (trainkit/runs/attempt.py) either way."""
    tries = 0
    while True:
        cluster = effective_cluster(cluster, ws)
        down = (attempt_.unreachable(_nodes(cluster, ws)[0]) + lost.lost_in(cluster, ws, runs.read_events(run_dir))
                if opts.recover else [])
        if down:
            runs.event(run_dir, "unreachable", nodes=down, by="probe")
            cluster = _replace(cluster, ws, run_dir, down, opts)
        try:
            return attempt_.launch_attempt(cluster, ws, job, run_dir, opts)
        except launch.LaunchError as err:
            down = attempt_.unreachable([n for n in _nodes(cluster, ws)[0] if n.name in err.failed])
            tries += 1
            if opts.recover and down and tries <= opts.max_recoveries:
                continue                                   # the probe above replaces them
            status = "preempted" if down else "failed"
            finish(cluster, ws, run_dir, status)
            fix = (f"resume it with a spare: trainkit train {cluster.source} --resume {run_dir.name} --recover"
                   if down else err.fix)
            raise TrainkitError(f"run {run_dir.name} {status}: {err.message}", fix=fix,
                                exit_code=PREEMPTED if down else TRAIN) from None


def _replace(cluster: Cluster, ws: Workspace, run_dir: Path, lost: list[str], opts: Options,
             replaced: tuple[Cluster, list[str]] | None = None) -> Cluster:
    """replace_lost, its events written to the run (unless `replaced`: the cluster a background
    replacement made and the survivors it ran beside, recover.elastic); then (opts.doctor)
    doctor's checks on the cluster as it is now, which replace a failed replacement the same way
    (at most opts.max_recoveries times). With nothing to replace them, or a node that still
    fails, the run is closed as preempted and the error says so."""
    hint = f"trainkit train --resume {run_dir.name}"
    survivors = set(replaced[1]) if replaced else {n.name for n in _nodes(cluster, ws)[0]} - set(lost)
    try:
        cluster = replaced[0] if replaced else _replace_lost(cluster, ws, run_dir, lost)
        if opts.doctor:
            cluster, _ = doctor.gate(cluster, ws, progress.info, opts.max_recoveries, hint, trusted=survivors,
                                     record=lambda ev: record_events(run_dir, [ev]))
    except TrainkitError as err:  # nothing to replace them with, or a failed node: close the run, then say so
        _raise_preempted(cluster, ws, run_dir, err)
    return cluster


def _replace_lost(cluster: Cluster, ws: Workspace, run_dir: Path, lost: list[str]) -> Cluster:
    return replace_lost(cluster, ws, lost, f"trainkit train --resume {run_dir.name}",
                        record=lambda ev: record_events(run_dir, [ev]))


def _on_survivors(cluster: Cluster, ws: Workspace, job: runs.Job, run_dir: Path, opts: Options,
                  nodes: list, lost: list[str], echo) -> tuple[Cluster, int, Outcome | None] | None:
    """recover.elastic (trainkit/runs/elastic.py): replace `lost` in the background while the
    survivors resume the run at the smaller world size; once the replacement is provisioned, stop
    them (the engine checkpoints on SIGTERM), run doctor's checks and relaunch on every node.

    Returns (cluster, the full attempt, None) once grown back; (cluster, the survivors' attempt,
    its outcome) when that attempt ended by itself first (completed, or another fault: the caller
    handles it as any attempt's, with the replacement done); None when the survivors cannot carry
    the run (elastic.why_not) or their launch failed: the caller recovers as without elastic."""
    survivors = [n.name for n in nodes if n.name not in lost]
    nproc = int(nodes[0].vars.get("trainkit_nproc_per_node", 1))
    why = elastic.why_not(job, len(survivors) * nproc)
    if why:
        progress.info(f"recover.elastic: {why}; waiting for the replacement")
        return None
    replacing = elastic.Replacing(lambda: _replace_lost(cluster, ws, run_dir, lost))
    runs.event(run_dir, "shrunk", nodes=survivors, lost=lost, world=len(survivors) * nproc)
    try:
        attempt = attempt_.launch_attempt(cluster, ws, job, run_dir, opts, only=survivors)
    except launch.LaunchError as err:
        progress.info(f"recover.elastic: the survivors did not start ({err.message[-200:]}); "
                      "waiting for the replacement")
        replacing.join()
        if replacing.error:
            _raise_preempted(cluster, ws, run_dir, replacing.error)
        return _grow(replacing.result, survivors, ws, job, run_dir, opts, lost)
    small, group = attempt_.subset(nodes, survivors), _nodes(cluster, ws)[1]
    lay = remote.layout_for(group, run_dir.name)
    # survivors that end before their first step never grow back: their end is recovered instead
    started = _await_resume(cluster, ws, job, run_dir, attempt, node=small[0])
    follower = run_status.Follower(small[0], lay, job, echo if opts.follow else None)
    while True:
        out = watch(small, lay, attempt, run_dir, follower, opts,
                    interrupt=(lambda r=replacing: r.done) if replacing and started else None)
        if out.status != "interrupted":
            break
        if replacing.error:   # the survivors go on alone; the next fault is recovered as usual
            runs.event(run_dir, "replacement_failed", nodes=lost, error=replacing.error.message[-600:])
            progress.info(f"recover.elastic: replacing {', '.join(lost)} failed ({replacing.error.message}); "
                          "the survivors go on alone")
            replacing = None
            continue
        stop_survivors(small, lay, attempt, [], wait_s=STOP_TO_GROW_S)   # SIGTERM: a checkpoint, then exit
        out = Outcome("grown", [], out.last_step, time.time(), follower.step_time_s)
        _end_attempt(run_dir, attempt, out)
        runs.event(run_dir, "grown", attempt=attempt, step=out.last_step)
        return _grow(replacing.result, survivors, ws, job, run_dir, opts, lost)
    if replacing:
        replacing.join()
        if replacing.error:   # it failed while the survivors' attempt ended
            runs.event(run_dir, "replacement_failed", nodes=lost, error=replacing.error.message[-600:])
            replacing = None
    if replacing is None and out.status == "reclaimed":   # never replaced: still lost beside the new loss
        out.lost += [n for n in lost if n not in out.lost]
    if out.last_step is None:   # the survivors logged no step (gone at start-up): the run's last one
        out.last_step = elastic.last_step_before(runs.read_record(run_dir), attempt)
    cluster = (replacing.result if replacing and replacing.result is not None else cluster)
    return cluster, attempt, out


def _grow(cluster: Cluster, survivors: list[str], ws: Workspace, job: runs.Job, run_dir: Path, opts: Options,
          lost: list[str]) -> tuple[Cluster, int, None]:
    """Doctor's checks with the replacement in (the survivors stopped), then every node's attempt."""
    cluster = _replace(cluster, ws, run_dir, lost, opts, replaced=(cluster, survivors))
    attempt = launch_recovering(cluster, ws, job, run_dir, opts)
    _await_resume(cluster, ws, job, run_dir, attempt, kind="rejoined")   # not a recovery: nothing was lost
    return cluster, attempt, None


def _raise_preempted(cluster: Cluster, ws: Workspace, run_dir: Path, err: TrainkitError) -> None:
    """Close the run as preempted, then raise `err` as the run's (exit code and fix kept)."""
    finish(cluster, ws, run_dir, "preempted")
    raise TrainkitError(f"run {run_dir.name} preempted: {err.message}", fix=err.fix,
                        exit_code=err.exit_code) from None


def _resumed_unless_recorded(cluster: Cluster, ws: Workspace, job: runs.Job, run_dir: Path, attempt: int) -> None:
    """A resumed attempt (an earlier one ran) whose `resumed` event nobody wrote yet (started by
    `--resume`, or by a controller killed before it saw the first step): write it now."""
    record = runs.read_record(run_dir)
    ran = [a for a in record.get("attempts") or [] if a.get("attempt", 0) < attempt
           and a.get("outcome") != "launch_failed"]
    done = any(e["event"] in ("resumed", "rejoined") and e.get("attempt") == attempt for e in runs.read_events(run_dir))
    if ran and not done:
        _await_resume(cluster, ws, job, run_dir, attempt)


def _await_resume(cluster: Cluster, ws: Workspace, job: runs.Job, run_dir: Path, attempt: int,
                  timeout_s: float = 300, node=None, kind: str = "resumed") -> bool:
    """resume_wait.record (`resumed`, or `kind`, once the attempt logs its first step; False
    when it ended first); `node`: the attempt's rank 0 when it is not the cluster's first node."""
    nodes, group = _nodes(cluster, ws)
    return resume_wait.record(node or nodes[0], remote.layout_for(group, run_dir.name), job, run_dir, attempt,
                              timeout_s, kind)


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
    summary = runs.read_summary(run_dir)
    for a in record.get("attempts") or []:
        a["ended_at"] = a.get("ended_at") or time.time()
    summary = runs.kept_summary(summary, lay.run_dir, run_dir, status)  # paths and status as runs/<id>/ has them
    summary["cost"] = cost.run_ledger(cluster, record)
    summary["recoveries"] = sum(1 for e in runs.read_events(run_dir) if e["event"] == "resumed")
    write_atomic(summary_path, records.dump(summary, indent=2, sort_keys=True))
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
