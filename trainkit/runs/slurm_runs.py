"""The run commands on a Slurm cluster (Cluster.batch_jobs: target `slurm`, or `scheduler: slurm`).

The workspace's inventory holds the login node first (provision/inventory.py's `scheduler` row;
with `scheduler: slurm`, the head node);
a run is one batch job (runs/sbatch.py) whose folder lives on the cluster's shared storage under
`slurm.workdir`/.trainkit/<cluster>/runs/<run id> and comes back into the workspace's
runs/<run id>/ when the job ends, as on every other target.

    run(cluster, ws, req, ...)  train: the record, sbatch, then the job followed to its end
    live_status(ws, run_dir)    runs/status: squeue, then sacct (long-standing flags only)
    read_log(ws, run_dir, ...)  logs: a rank's or a node's log, from the shared folder while open
    cancel(ws, run_dir, wait_s) cancel: scancel --signal=TERM (the ranks checkpoint), then scancel

Not built yet (issue 41): `--recover`, `top`, `doctor` on the scheduler; `--resume` of a run.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import yaml

from trainkit.cluster.scheduler import LIVE, job_state, login, remote_root, settings
from trainkit.errors import TRAIN, InputError, TrainkitError
from trainkit.runs import record as runs
from trainkit.runs import slurm_jobs
from trainkit.runs.sbatch import BatchJob
from trainkit.spec.resolve import Cluster
from trainkit.workspace import Workspace

# Seconds between looks at the scheduler while a job is followed: squeue is cheap, and a
# slurmctld answers many such clients (Slurm's "High Throughput Computing" guide asks for no
# tighter loops than a few seconds).
POLL_S = 3.0
# Slurm job state -> the run's status when the job left no summary.json (squeue(1) JOB STATE CODES).
_ENDED_AS = {"COMPLETED": "completed", "CANCELLED": "cancelled", "PREEMPTED": "preempted",
             "TIMEOUT": "preempted"}


def run(cluster: Cluster, ws: Workspace, req, say: Callable[[str], None],
        echo: Callable[[str], None]) -> dict[str, Any]:
    """train: submit the run's batch job (or follow `req.attach`'s) and follow it to its end unless
    detached. InputError for what the scheduler path does not do yet (a `command:` job, --resume,
    --recover)."""
    if req.attach:
        run_dir = runs.resolve_run(ws.runs_dir, req.attach)
        record = runs.read_record(run_dir)
        if record.get("status") not in runs.OPEN or not record.get("slurm_job"):
            raise InputError(f"run {run_dir.name} is {record.get('status') or 'unknown'}: nothing to attach to",
                             fix=f"its results are in {run_dir}; see `trainkit runs {req.spec}`")
        return follow(cluster, ws, run_dir, say, echo, req.spec)
    if req.resume or req.opts.recover:
        raise InputError(f"--resume/--recover on {cluster.room.title}: not built yet; Slurm requeues a "
                         "job itself (--requeue) and it resumes from its newest checkpoint",
                         fix="drop --resume/--recover")
    job = runs.load_job(req.config_path, list(req.overrides))
    if job.command is not None or job.workdir:
        raise InputError(f"{job.source}: a `command:`/`workdir:` job on {cluster.room.title} is not built yet",
                         fix="train an engine config (model/data) on it")
    with ws.lock("train"):
        run_dir = _submit(cluster, ws, req, job)
    if req.opts.detach:
        say(f"submitted run {run_dir.name}; follow it with: trainkit train {req.spec} --attach {run_dir.name}")
        return {"run_id": run_dir.name, "run_dir": str(run_dir), "status": "running"}
    return follow(cluster, ws, run_dir, say, echo, req.spec)


def _submit(cluster: Cluster, ws: Workspace, req, job: runs.Job) -> Path:
    spec = cluster.spec
    run_id = runs.new_run_id(job.name, ws.runs_dir)
    run_dir, remote = ws.runs_dir / run_id, f"{remote_root(cluster)}/runs/{run_id}"
    record = {"run_id": run_id, "name": job.name, "config": str(req.config_path.resolve()),
              "overrides": list(req.overrides), "config_hash": job.fingerprint(), "mode": job.mode,
              "created_at": time.time(), "status": "starting", "attempts": [], "remote_dir": remote}
    runs.write_record(run_dir, record)
    slurm = settings(cluster, ws)
    batch = BatchJob(run_id=run_id, run_dir=remote, nodes=cluster.nodes,
                     nproc_per_node=spec.launch.nproc_per_node or slurm.gpus_per_node or 1,
                     rdzv_port=spec.launch.rdzv_port, slurm=slurm,
                     engine_config=yaml.safe_load(req.config_path.read_text()) or {},
                     overrides=tuple(req.overrides))
    try:
        job_id = slurm_jobs.submit(login(ws), batch)
    except TrainkitError as err:
        runs.write_record(run_dir, {**record, "status": "failed", "error": err.message})
        raise
    runs.write_record(run_dir, {**record, "status": "running", "slurm_job": job_id})
    runs.event(run_dir, "submitted", slurm_job=job_id, remote_dir=remote)
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
    return "unknown" if state is None else _ENDED_AS.get(state, "failed")


def follow(cluster: Cluster, ws: Workspace, run_dir: Path, say: Callable[[str], None],
           echo: Callable[[str], None], spec: str) -> dict[str, Any]:
    """Poll the job until it ends, then fetch its folder and close the record. TrainkitError(TRAIN)
    with the end of the job's logs when it failed; Ctrl-C leaves the job queued or running (exit
    130, naming attach and cancel)."""
    record = runs.read_record(run_dir)
    job_id, node = record["slurm_job"], login(ws)
    seen, log = None, _LogTail(node, f"{record['remote_dir']}/logs/node-0.log", echo)
    try:
        while True:
            state = job_state(node, job_id)
            log.poll()
            if state != seen:
                runs.event(run_dir, "slurm_state", slurm_job=job_id, state=state)
                say(f"run {run_dir.name}: Slurm job {job_id} {state or 'unknown to the scheduler'}")
                seen = state
            if state not in LIVE:
                return close(ws, run_dir, state)
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        raise TrainkitError(f"interrupted: run {run_dir.name} (Slurm job {job_id}) stays in the scheduler's "
                            "hands; its results are fetched when you attach again", exit_code=130,
                            fix=f"attach: trainkit train {spec} --attach {run_dir.name}; stop it: "
                                f"trainkit cancel {spec} {run_dir.name}") from None


class _LogTail:
    """Node 0's log (torchrun and its ranks), its new lines to `echo` at each poll."""

    def __init__(self, node, path: str, echo: Callable[[str], None]):
        self.node, self.path, self.echo, self.offset, self.partial = node, path, echo, 0, b""

    def poll(self) -> None:
        res = self.node.sh(f"tail -c +{self.offset + 1} {shlex.quote(self.path)} 2>/dev/null", timeout=60)
        if res.returncode != 0 or not res.stdout:
            return
        self.offset += len(res.stdout)
        *lines, self.partial = (self.partial + res.stdout).split(b"\n")
        for line in lines:
            self.echo(line.decode(errors="replace"))


def close(ws: Workspace, run_dir: Path, state: str | None) -> dict[str, Any]:
    """Fetch the job's folder into `run_dir`, set the record's final status (summary.json's, else
    the job state's) and return the result; raises TrainkitError(TRAIN) for a failed run."""
    record = runs.read_record(run_dir)
    slurm_jobs.fetch(login(ws), record["remote_dir"], run_dir)
    summary = runs.read_summary(run_dir)
    status = summary.get("status") or _ENDED_AS.get(state or "", "failed")
    if state == "CANCELLED" and status != "completed":
        status = "cancelled"
    runs.write_record(run_dir, {**runs.read_record(run_dir), "status": status, "slurm_state": state})
    runs.event(run_dir, "ended", slurm_job=record["slurm_job"], state=state, status=status)
    if status == "failed":
        raise TrainkitError(f"run {run_dir.name} failed (Slurm job {record['slurm_job']}: {state}):\n"
                            + _log_tails(run_dir), fix=f"its logs are in {run_dir / 'logs'}", exit_code=TRAIN)
    return {**summary, "run_id": run_dir.name, "run_dir": str(run_dir), "status": status,
            "slurm_job": record["slurm_job"]}


def _log_tails(run_dir: Path, lines: int = 10) -> str:
    """What a failed job said: the engine's `error:`/`fix:` lines from the node logs (once each),
    then the batch shell's last lines."""
    said: dict[str, None] = {}
    for p in sorted((run_dir / "logs").glob("node-*.log")):
        for line in p.read_text(errors="replace").splitlines():
            if line.startswith(("error:", "  fix:", "fix:")):
                said.setdefault(f"{p.name}: {line}")
    batch = sorted((run_dir / "logs").glob("slurm-*.out"))
    tail = batch[-1].read_text(errors="replace").splitlines()[-lines:] if batch else ["(the job wrote no log)"]
    return "\n".join([*said, *(f"{batch[-1].name if batch else 'batch'}: {ln}" for ln in tail)])


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
    Returns (status, whether it had ended already, the run folder)."""
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
    return "cancelled", False, run_dir


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
