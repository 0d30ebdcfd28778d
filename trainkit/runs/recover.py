"""Run a job to its end: launch, watch, and (with --recover) replace what was reclaimed and resume.

`watch()` follows one attempt until every node's supervisor has a final state or a node is lost;
`drive()` loops over attempts (a run's start is start.py, its closing ending.py):

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from trainkit.cluster import doctor, lost
from trainkit.cluster.replace import effective_cluster, replace_lost
from trainkit.errors import PREEMPTED, TRAIN, TrainkitError
from trainkit.runs import attempt as attempt_
from trainkit.runs import elastic, fence, hang, launch, remote, resume_wait, storage_faults, watchdog
from trainkit.runs import record as runs
from trainkit.runs import status as run_status
from trainkit.runs.attempt import nodes_of
from trainkit.runs.ending import FINAL, Outcome, end_attempt, finish, give_up, raise_preempted
from trainkit.spec.resolve import Cluster
from trainkit.util import progress
from trainkit.workspace import Workspace

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
            nodes, group = nodes_of(cluster, ws)
            lay = remote.layout_for(group, run_dir.name)
            out, ended = ended or _watch_all(nodes, lay, attempt, run_dir, job, opts, echo), None
            end_attempt(run_dir, attempt, out)
            if out.status == "completed":
                fencer.close()
                runs.event(run_dir, "completed", attempt=attempt, step=out.last_step)
                return finish(cluster, ws, run_dir, "completed")
            reclaim = _assess(cluster, ws, run_dir, nodes, lay, attempt, out, fencer)
            recoveries, restarts = recoveries + reclaim, restarts + (not reclaim)
            closed = give_up(out, reclaim, opts.recover, opts.max_recoveries, opts.max_restarts_on_errors,
                             recoveries, restarts)
            if closed:
                fencer.close()
                return finish(cluster, ws, run_dir, closed[0], raise_=True, why=closed[1])
            stop_survivors(nodes, lay, attempt, out.lost)
            if out.lost and cluster.room.fences_lost_nodes:   # a lost cloud instance is terminated by its replacement
                fencer.add(nodes, lay, attempt, out.lost)
            went_on = _on_survivors(cluster, ws, job, run_dir, opts, nodes, out.lost, echo) \
                if out.lost and job.elastic else None
            if went_on is not None:
                cluster, attempt, ended = went_on
                continue
            cluster, attempt = _relaunch(cluster, ws, job, run_dir, opts, out.lost, backoff)
            backoff = min(backoff * 2, opts.backoff_max_s)
    finally:
        fencer.stop()


def _watch_all(nodes, lay: remote.Layout, attempt: int, run_dir: Path, job: runs.Job, opts: Options,
               echo: Callable[[str], None] | None) -> Outcome:
    """watch() the attempt on every node, rank 0's log streamed to `echo` (opts.follow)."""
    follower = run_status.Follower(nodes[0], lay, job, echo if opts.follow else None)
    return watch(nodes, lay, attempt, run_dir, follower, opts)


def _assess(cluster: Cluster, ws: Workspace, run_dir: Path, nodes, lay: remote.Layout, attempt: int,
            out: Outcome, fencer: fence.Fencer) -> bool:
    """An attempt that did not complete: whether it was reclaimed (a node lost, or preempted) rather
    than failed, recorded as an event. A hung job is stopped (stack dumps first); a full or
    read-only disk when no node was lost (no node is at fault then) closes the run (exit STORAGE)."""
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
    return reclaim


def _relaunch(cluster: Cluster, ws: Workspace, job: runs.Job, run_dir: Path, opts: Options, lost: list[str],
              backoff: float) -> tuple[Cluster, int]:
    """Replace the `lost` nodes (if any), back off `backoff` seconds, launch the next attempt and
    wait for its resume. Returns (the cluster as it is now, the attempt)."""
    if lost:
        cluster = _replace(cluster, ws, run_dir, lost, opts)
    runs.event(run_dir, "backoff", seconds=backoff)
    time.sleep(backoff)
    attempt = launch_recovering(cluster, ws, job, run_dir, opts)
    _await_resume(cluster, ws, job, run_dir, attempt)
    return cluster, attempt


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
        down = (attempt_.unreachable(nodes_of(cluster, ws)[0]) + lost.lost_in(cluster, ws, runs.read_events(run_dir))
                if opts.recover else [])
        if down:
            runs.event(run_dir, "unreachable", nodes=down, by="probe")
            cluster = _replace(cluster, ws, run_dir, down, opts)
        try:
            return attempt_.launch_attempt(cluster, ws, job, run_dir, opts)
        except launch.LaunchError as err:
            down = attempt_.unreachable([n for n in nodes_of(cluster, ws)[0] if n.name in err.failed])
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
    survivors = set(replaced[1]) if replaced else {n.name for n in nodes_of(cluster, ws)[0]} - set(lost)
    try:
        cluster = replaced[0] if replaced else _replace_lost(cluster, ws, run_dir, lost)
        if opts.doctor:
            cluster, _ = doctor.gate(cluster, ws, progress.info, opts.max_recoveries, hint, trusted=survivors,
                                     record=lambda ev: runs.record_events(run_dir, [ev]))
    except TrainkitError as err:  # nothing to replace them with, or a failed node: close the run, then say so
        raise_preempted(cluster, ws, run_dir, err)
    return cluster


def _replace_lost(cluster: Cluster, ws: Workspace, run_dir: Path, lost: list[str]) -> Cluster:
    return replace_lost(cluster, ws, lost, f"trainkit train --resume {run_dir.name}",
                        record=lambda ev: runs.record_events(run_dir, [ev]))


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
    nproc = nodes[0].nproc
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
            raise_preempted(cluster, ws, run_dir, replacing.error)
        return _grow(replacing.result, survivors, ws, job, run_dir, opts, lost)
    return _run_shrunk(cluster, ws, job, run_dir, opts, nodes, survivors, lost, attempt, replacing, echo)


def _run_shrunk(cluster: Cluster, ws: Workspace, job: runs.Job, run_dir: Path, opts: Options, nodes: list,
                survivors: list[str], lost: list[str], attempt: int, replacing: elastic.Replacing | None,
                echo) -> tuple[Cluster, int, Outcome | None]:
    """The survivors' `attempt` (launched) watched until the background replacement is done (then
    grown back) or the attempt ends by itself; the returns of _on_survivors. A failed replacement
    leaves the survivors going on alone."""
    small, group = attempt_.subset(nodes, survivors), nodes_of(cluster, ws)[1]
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
        end_attempt(run_dir, attempt, out)
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
    nodes, group = nodes_of(cluster, ws)
    return resume_wait.record(node or nodes[0], remote.layout_for(group, run_dir.name), job, run_dir, attempt,
                              timeout_s, kind)
