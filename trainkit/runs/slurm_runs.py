"""The run commands on a Slurm cluster (Cluster.batch_jobs: target `slurm`, or `scheduler: slurm`).

The workspace's inventory holds the login node first (provision/inventory.py's `scheduler` row;
with `scheduler: slurm`, the head node); a run is one batch job per attempt (runs/sbatch.py, runs/slurm_follow.py) whose folder lives on
the cluster's shared storage under `slurm.workdir`/.trainkit/<cluster>/runs/<run id> and comes
back into the workspace's runs/<run id>/ when the job ends, as on every other target.

    run(cluster, ws, req, ...)  train: the record, sbatch, then the job followed to its end;
                                --resume RUN: a new attempt of RUN; --recover: slurm_follow's rule
    live_status(ws, run_dir)    runs/status: squeue, then sacct (long-standing flags only)
    read_log(ws, run_dir, ...)  logs: a rank's or a node's log, from the shared folder while open
    cancel(ws, run_dir, wait_s) cancel: scancel --signal=TERM (the ranks checkpoint), then scancel
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from trainkit.cluster.scheduler import LIVE, job_state, login
from trainkit.errors import TRAIN, InputError, LockedError, TrainkitError
from trainkit.runs import record as runs
from trainkit.runs.slurm_follow import ENDED_AS, POLL_S, close, follow, remote_dir, start_attempt
from trainkit.spec.resolve import Cluster
from trainkit.workspace import Workspace


def run(cluster: Cluster, ws: Workspace, req, say: Callable[[str], None],
        echo: Callable[[str], None]) -> dict[str, Any]:
    """train: submit the run's batch job (a new run, or `req.resume`'s next attempt), or follow
    `req.attach`'s, and follow it to its end unless detached (with `req.opts.recover`: submitted
    again while the limits allow, runs/slurm_follow.py). InputError for a run that cannot be
    resumed; LockedError for one still queued."""
    if req.attach:
        run_dir, _ = runs.attachable(ws.runs_dir, req.attach, req.spec, "slurm_job")
        return follow(cluster, ws, run_dir, say, echo, req.spec, req.opts)
    job = runs.load_job(req.config_path, list(req.overrides))
    with ws.lock("train"):
        run_dir = _resume(cluster, ws, req, job) if req.resume else _new_run(cluster, ws, req, job)
        start_attempt(cluster, ws, run_dir, req.config_path, list(req.overrides))
    if req.opts.detach:
        say(f"submitted run {run_dir.name}; follow it with: trainkit train {req.spec} --attach {run_dir.name}")
        return {"run_id": run_dir.name, "run_dir": str(run_dir), "status": "running"}
    return follow(cluster, ws, run_dir, say, echo, req.spec, req.opts)


def _new_run(cluster: Cluster, ws: Workspace, req, job: runs.Job) -> Path:
    """A new run's record (no attempt yet): its id, config, and folder on the shared storage."""
    run_id = runs.new_run_id(job.name, ws.runs_dir)
    run_dir = ws.runs_dir / run_id
    runs.write_record(run_dir, {"run_id": run_id, "name": job.name, "config": str(req.config_path.resolve()),
                                "overrides": list(req.overrides), "config_hash": job.fingerprint(),
                                "mode": job.mode, "created_at": time.time(), "status": "starting",
                                "attempts": [], "remote_dir": remote_dir(cluster, run_id)})
    return run_dir


def _resume(cluster: Cluster, ws: Workspace, req, job: runs.Job) -> Path:
    """`--resume RUN`: the run's folder, once it is known to be resumable. A run whose job ended
    while nobody followed it is closed first (its folder fetched); LockedError while its job is
    queued or running; InputError for a completed run, a changed config (without --force), or a
    run folder no longer on the shared storage (a destroy removed it)."""
    run_dir = runs.resolve_run(ws.runs_dir, req.resume)
    record = runs.read_record(run_dir)
    if not record.get("remote_dir"):
        raise InputError(f"run {run_dir.name} did not run on a Slurm cluster: it has no folder there",
                         fix="resume it with the spec it ran on")
    if record.get("status") in runs.OPEN and record.get("slurm_job"):
        state = job_state(login(ws), record["slurm_job"])
        if state in LIVE:
            raise LockedError(f"run {run_dir.name} is still {state} (Slurm job {record['slurm_job']}): a second "
                              "job would write the same checkpoints",
                              fix=f"follow it: trainkit train {req.spec} --attach {run_dir.name}")
        close_quietly(ws, run_dir, state)
        record = runs.read_record(run_dir)
    if record.get("status") == "completed":
        raise InputError(f"run {run_dir.name} completed: there is nothing to resume",
                         fix="start a new run (drop --resume); its results are in " + str(run_dir))
    runs.check_resume(record, job, req.force)
    if login(ws).sh(f"test -d {shlex.quote(record['remote_dir'])}", timeout=60).returncode != 0:
        raise InputError(f"run {run_dir.name}: its folder {record['remote_dir']} is gone from the shared "
                         "storage (removed by `trainkit destroy`?), and its checkpoints with it",
                         fix="start a new run (drop --resume)")
    runs.event(run_dir, "resume", by="train --resume")
    return run_dir


def live_status(ws: Workspace, run_dir: Path) -> str:
    """The run's status: its record's once closed; else the scheduler's state of its job."""
    record = runs.read_record(run_dir)
    status = record.get("status") or "unknown"
    if status not in runs.OPEN or not record.get("slurm_job"):
        return status
    state = job_state(login(ws), record["slurm_job"])
    if state in LIVE:
        return "running"
    return "unknown" if state is None else ENDED_AS.get(state, "failed")


def read_log(ws: Workspace, run_dir: Path, rank: int | None, node_index: int | None,
             follow: bool = False) -> Iterator[bytes]:
    """A run's log: `rank` -> logs/rank-N.log (the engine's, per rank), else logs/node-N.log (torchrun
    on node N; node 0 by default). The fetched copy once the run is closed, else read from the
    shared folder through the login node, with `follow` until the job ends."""
    name = f"rank-{rank}.log" if rank is not None else f"node-{node_index or 0}.log"
    record = runs.read_record(run_dir)
    if record.get("status") not in runs.OPEN:
        local = run_dir / "logs" / name
        if not local.is_file():
            raise InputError(f"run {run_dir.name}: no log {name} was fetched",
                             fix=f"see the logs it has: ls {run_dir / 'logs'}")
        yield local.read_bytes()
        return
    node, offset = login(ws), 0
    path = shlex.quote(f"{record.get('remote_dir')}/logs/{name}")
    while True:
        res = node.sh(f"tail -c +{offset + 1} {path} 2>/dev/null", timeout=60)
        offset += len(res.stdout)
        if res.stdout:
            yield res.stdout
        if not follow or job_state(node, record["slurm_job"]) not in LIVE:
            return
        time.sleep(POLL_S)


def cancel(ws: Workspace, run_dir: Path, wait_s: float) -> tuple[str, bool, Path]:
    """scancel --signal=TERM to the job's steps (the ranks checkpoint and stop), then `scancel`
    after `wait_s` at the latest, until squeue lists the job no more; the folder is fetched.
    Returns (status, whether it had ended already, the run folder). A job that finished its last
    step as the signal came ends COMPLETED with a completed summary: the run is recorded and
    reported completed, with "ended already" true, never called cancelled."""
    record = runs.read_record(run_dir)
    if record.get("status") not in runs.OPEN or not record.get("slurm_job"):
        return record.get("status") or "unknown", True, run_dir
    node, job_id = login(ws), record["slurm_job"]
    state = job_state(node, job_id)
    if state not in LIVE:
        close_quietly(ws, run_dir, state)
        return runs.read_record(run_dir)["status"], True, run_dir
    if state != "PENDING":   # a job with no processes yet has nothing to checkpoint
        node.sh(f"scancel --signal=TERM {job_id}", timeout=60)
        runs.event(run_dir, "cancel", slurm_job=job_id, by="scancel --signal=TERM")
    deadline = time.monotonic() + (wait_s if state != "PENDING" else 0)
    while time.monotonic() < deadline and job_state(node, job_id) in LIVE:
        time.sleep(POLL_S)
    node.sh(f"scancel {job_id}", timeout=60)
    while job_state(node, job_id) in LIVE:   # scancel returns before the job's processes end
        time.sleep(POLL_S)
    close_quietly(ws, run_dir, "CANCELLED")
    status = runs.read_record(run_dir)["status"]
    return status, status != "cancelled", run_dir


def close_quietly(ws: Workspace, run_dir: Path, state: str | None) -> None:
    """close() without raising for a failed run (cancel, destroy)."""
    try:
        close(ws, run_dir, state)
    except TrainkitError as err:
        if err.exit_code != TRAIN:
            raise


def close_all(ws: Workspace, wait_s: float = 120) -> list[tuple[str, str]]:
    """destroy: every open run's job cancelled (as `cancel` does) and its folder fetched, before
    trainkit's folder leaves the shared storage. Returns [(run id, status)]."""
    done = []
    for run_dir in sorted(ws.runs_dir.glob("*/run.json")) if ws.runs_dir.is_dir() else []:
        if runs.read_record(run_dir.parent).get("status") in runs.OPEN:
            status, _, _ = cancel(ws, run_dir.parent, wait_s)
            done.append((run_dir.parent.name, status))
    return done
