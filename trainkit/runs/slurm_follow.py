"""A run's batch jobs on a Slurm cluster from submission to the run's end (target `slurm`).

    start_attempt(cluster, ws, run_dir, config, overrides)   sbatch one more job for the run
    follow(cluster, ws, run_dir, say, echo, spec, opts)      poll the job to its end, then close
    close(ws, run_dir, state)                                fetch the folder, close the record

A run is one or more attempts, each one batch job (run.json `attempts`: attempt, slurm_job,
started_at, ended_at, outcome, slurm_state) in the same folder on the shared storage, so every
attempt's engine resumes from the newest complete checkpoint there (runs/sbatch.py: resume=true).

Slurm restarts a job itself (`--requeue`: a node lost, a preemption, the USR1 path ahead of the
time limit): the job goes back to PENDING (REQUEUED, REQUEUE_HOLD while it does) and its
`scontrol show job` Restarts= count grows. `follow` records each such restart as a `requeued`
event and keeps following the same job. With `--recover` a job that ENDS without the run
completing is submitted again (a new attempt, as `train --resume` does) while the limits allow:
`--max-recoveries` for the ends that are not the job's fault (NODE_FAIL, PREEMPTED, TIMEOUT,
BOOT_FAIL: the scheduler took the allocation), `--max-restarts-on-errors` for the others (FAILED,
OUT_OF_MEMORY, DEADLINE) (runs/ending.py give_up, the rule every target uses). Slurm's own
requeues count against neither: the scheduler's policy bounds them. With `--recover` on a cluster
trainkit provisions (`scheduler: slurm`), a node Slurm lost is replaced meanwhile (slurm_nodes.py).
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import Any, Callable

import yaml

from trainkit.cluster.scheduler import LIVE, job_view, login, remote_root, settings
from trainkit.errors import TRAIN, TrainkitError
from trainkit.runs import record as runs
from trainkit.runs import slurm_jobs
from trainkit.runs.ending import Outcome, failure, give_up
from trainkit.runs.launch import workdir_tar
from trainkit.runs.sbatch import BatchJob
from trainkit.runs.slurm_nodes import NodeWatch, replaces_nodes
from trainkit.spec.resolve import Cluster
from trainkit.workspace import Workspace

# Seconds between looks at the scheduler while a job is followed: squeue is cheap, and a
# slurmctld answers many such clients (Slurm's "High Throughput Computing" guide asks for no
# tighter loops than a few seconds).
POLL_S = 3.0
# Slurm job state -> the run's status when the job left no summary.json (squeue(1) and sacct(1)
# JOB STATE CODES). "preempted": the allocation was taken from the job (a node failed, a
# preemption, the time limit), its checkpoints are on the shared storage: it can resume.
ENDED_AS = {"COMPLETED": "completed", "CANCELLED": "cancelled", "PREEMPTED": "preempted",
            "TIMEOUT": "preempted", "NODE_FAIL": "preempted", "BOOT_FAIL": "preempted"}
# States a job passes through when Slurm starts it again (squeue(1) JOB STATE CODES: REQUEUED,
# REQUEUE_HOLD, REQUEUE_FED; then PENDING until it runs)
REQUEUE_STATES = ("REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED")
# Seconds after a requeue during which an ended state is not believed: the requeued job's end
# and its return to PENDING are processed apart (ended()); slurmctld finishes the requeue once its
# nodes' epilogs are done, seconds here, and 30 s is ten looks (POLL_S).
REQUEUE_SETTLE_S = 30.0


def end_of_attempt(state: str | None, summary_status: str | None, limits: tuple[int, int] | None = None,
                   recoveries: int = 0, restarts: int = 0) -> tuple[str, str] | None:
    """How a job that ended in `state` (its summary.json saying `summary_status`, if any) ends the
    run: (status, why), or None to submit the run again. `limits`: (max recoveries, max restarts
    on errors) with --recover, None without; `recoveries` / `restarts`: the attempts before this
    one that ended reclaimed / failed. Pure."""
    status = summary_status or ENDED_AS.get(state or "", "failed")
    if state == "CANCELLED" and status != "completed":
        status = "cancelled"
    if status == "completed":
        return "completed", ""
    reclaim = status == "preempted"
    max_recoveries, max_restarts = limits or (0, 0)
    return give_up(Outcome(status), reclaim, limits is not None, max_recoveries, max_restarts,
                   recoveries + reclaim, restarts + (not reclaim))


def requeued(seen: tuple[str | None, int | None], now: tuple[str | None, int | None]) -> bool:
    """Whether the job was started again between two looks (state, Restarts=): its restart count
    grew, or (no count known) it went from running back to waiting. Pure."""
    (was, before), (state, after) = seen, now
    if before is not None and after is not None:
        return after > before
    return was in ("RUNNING", "COMPLETING") and state in (*REQUEUE_STATES, "PENDING")


def ended(last: tuple[str | None, int | None] | None, now: tuple[str | None, int | None],
          since_requeue_s: float | None = None) -> bool:
    """Whether the job has ended: two looks in a row (`last`, `now`: state, Restarts=) show the
    same state outside LIVE with the same restart count, and the last requeue seen (if any) is at
    least REQUEUE_SETTLE_S old. One look is not enough: a job that requeues itself (`scontrol
    requeue`) shows FAILED with its Restarts= already grown for a moment before it is PENDING
    again (Slurm 22.05: _job_requeue_op counts the restart before the job's own end is
    processed; seen in test_slurm_job.py's USR1 path). Pure."""
    settled = since_requeue_s is None or since_requeue_s >= REQUEUE_SETTLE_S
    return now[0] not in LIVE and last == now and settled


def start_attempt(cluster: Cluster, ws: Workspace, run_dir: Path, config: Path, overrides: list[str]) -> str:
    """sbatch one more job for the run in `run_dir` (its folder on the shared storage, the same
    for every attempt) and record it as the record's next attempt. Returns the job id; on a
    refused sbatch the record is closed `failed` and the TrainkitError raised."""
    spec, record, job = cluster.spec, runs.read_record(run_dir), runs.load_job(config, overrides)
    slurm = settings(cluster, ws)   # the spec's slurm: block, or what the role made (scheduler: slurm)
    batch = BatchJob(run_id=run_dir.name, run_dir=record["remote_dir"], nodes=cluster.nodes,
                     nproc_per_node=spec.launch.nproc_per_node or slurm.gpus_per_node or 1,
                     rdzv_port=spec.launch.rdzv_port, slurm=slurm,
                     engine_config=yaml.safe_load(config.read_text()) or {}, overrides=tuple(overrides),
                     command=job.command, setup=job.setup, env=dict(job.env), code=bool(job.workdir))
    code = workdir_tar(job.workdir, job.excludes) if job.workdir else None
    try:
        job_id = slurm_jobs.submit(login(ws), batch, code)
    except TrainkitError as err:
        runs.write_record(run_dir, {**record, "status": "failed", "error": err.message})
        raise
    attempts = [*(record.get("attempts") or [])]
    attempts.append({"attempt": len(attempts) + 1, "slurm_job": job_id, "started_at": time.time()})
    record = {k: v for k, v in record.items() if k not in ("slurm_state", "ended_at")}
    runs.write_record(run_dir, {**record, "status": "running", "slurm_job": job_id, "attempts": attempts})
    runs.event(run_dir, "submitted", slurm_job=job_id, remote_dir=record["remote_dir"], attempt=len(attempts))
    return job_id


def remote_dir(cluster: Cluster, run_id: str) -> str:
    """The run's folder on the shared storage (under remote_root)."""
    return f"{remote_root(cluster)}/runs/{run_id}"


def follow(cluster: Cluster, ws: Workspace, run_dir: Path, say: Callable[[str], None],
           echo: Callable[[str], None], spec: str, opts: Any) -> dict[str, Any]:
    """Follow the run's job to its end (module doc), with `opts.recover` submitting it again while
    the limits allow; then close the run. `opts`: runs/recover.py's Options (recover,
    max_recoveries, max_restarts_on_errors; not imported: that module imports this one).
    Returns the result of a completed (or cancelled) run; TrainkitError TRAIN (failed) or
    PREEMPTED (75: resume it) otherwise. Ctrl-C leaves the job queued or running (exit 130,
    naming attach and cancel)."""
    limits = (opts.max_recoveries, opts.max_restarts_on_errors) if opts.recover else None
    # with --recover on a cluster trainkit provisions: the nodes Slurm loses are replaced (slurm_nodes.py)
    watch = NodeWatch(cluster, ws, run_dir, say) if limits and replaces_nodes(cluster) else None
    log = _LogTail(login(ws), f"{runs.read_record(run_dir)['remote_dir']}/logs/node-0.log", echo)
    while True:
        record = runs.read_record(run_dir)
        state = _until_ended(ws, run_dir, record, say, log, spec, watch)
        status = _fetched_status(ws, run_dir, record, state)
        done = [a.get("outcome") for a in record.get("attempts") or []][:-1]
        verdict = end_of_attempt(state, status, limits, done.count("preempted"), done.count("failed"))
        if verdict is not None:
            return _close_as(run_dir, state, *verdict, spec)
        say(f"run {run_dir.name}: Slurm job {record['slurm_job']} ended {state}; submitting it again "
            "(--recover): it resumes from the newest checkpoint")
        runs.event(run_dir, "resubmitted", slurm_job=record["slurm_job"], state=state)
        start_attempt(cluster, ws, run_dir, Path(record["config"]), record.get("overrides") or [])


def _until_ended(ws: Workspace, run_dir: Path, record: dict[str, Any], say: Callable[[str], None],
                 log: "_LogTail", spec: str, watch: NodeWatch | None = None) -> str | None:
    """Poll the record's job until it has ended (ended()); its state then. Each state change is a
    `slurm_state` event, each restart by Slurm a `requeued` one; `watch` (--recover on a cluster
    trainkit provisions) replaces the nodes Slurm lost meanwhile."""
    job_id, node = record["slurm_job"], login(ws)
    seen: tuple[str | None, int | None] = ("", None)
    last: tuple[str | None, int | None] | None = None   # the previous look as it came
    requeued_at: float | None = None                    # time.monotonic() of the last requeue seen
    try:
        while True:
            now = job_view(node, job_id)
            log.poll()
            if watch is not None:
                watch.check(now[0])
            if requeued(seen, now):
                requeued_at = time.monotonic()
                runs.event(run_dir, "requeued", slurm_job=job_id, restarts=now[1], state=now[0])
                say(f"run {run_dir.name}: Slurm requeued job {job_id} (restart {now[1] if now[1] is not None else '?'}); "
                    "it resumes from the newest checkpoint when it starts again")
            if now[0] != seen[0]:
                runs.event(run_dir, "slurm_state", slurm_job=job_id, state=now[0])
                say(f"run {run_dir.name}: Slurm job {job_id} {now[0] or 'unknown to the scheduler'}")
            seen = (now[0], now[1] if now[1] is not None else seen[1])
            if ended(last, now, None if requeued_at is None else time.monotonic() - requeued_at):
                return now[0]
            last = now
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        raise TrainkitError(f"interrupted: run {run_dir.name} (Slurm job {job_id}) stays in the scheduler's "
                            "hands; its results are fetched when you attach again", exit_code=130,
                            fix=f"attach: trainkit train {spec} --attach {run_dir.name}; stop it: "
                                f"trainkit cancel {spec} {run_dir.name}") from None


def _fetched_status(ws: Workspace, run_dir: Path, record: dict[str, Any], state: str | None) -> str | None:
    """The run folder fetched; the engine's summary.json status (None without one), recorded as
    the outcome of the record's newest attempt with the job's state."""
    # an earlier attempt's summary.json or status files must not speak for this one (the job
    # removes its own on the shared storage when it starts)
    for stale in [run_dir / "summary.json", *(run_dir / "status").glob("node-*")]:
        stale.unlink(missing_ok=True)
    slurm_jobs.fetch(login(ws), record["remote_dir"], run_dir)
    summary = runs.read_summary(run_dir).get("status")
    if summary is None and any("preempted" in p.read_text(errors="replace")
                               for p in (run_dir / "status").glob("node-*")):   # a `command:` job's (node.sh)
        summary = "preempted"
    outcome = end_of_attempt(state, summary)
    record = runs.read_record(run_dir)
    for a in (record.get("attempts") or [])[-1:]:
        a.update(ended_at=time.time(), outcome=outcome[0] if outcome else "failed", slurm_state=state)
    runs.write_record(run_dir, record)
    return summary


def close(ws: Workspace, run_dir: Path, state: str | None) -> dict[str, Any]:
    """Fetch the job's folder into `run_dir`, set the record's final status (summary.json's, else
    the job state's) and return the result; raises TrainkitError(TRAIN) for a failed run."""
    record = runs.read_record(run_dir)
    status = _fetched_status(ws, run_dir, record, state)
    verdict = end_of_attempt(state, status) or ("failed", "")
    return _close_as(run_dir, state, verdict[0], "", None)


def _close_as(run_dir: Path, state: str | None, status: str, why: str, spec: str | None) -> dict[str, Any]:
    """The record closed as `status`. With `spec` (train followed it), a preempted run raises
    failure() (exit 75, naming --resume); a failed one always raises TRAIN with its logs' ends."""
    record = runs.read_record(run_dir)
    runs.write_record(run_dir, {**record, "status": status, "slurm_state": state, "ended_at": time.time()})
    runs.event(run_dir, "ended", slurm_job=record["slurm_job"], state=state, status=status)
    if status == "failed":
        raise TrainkitError(f"run {run_dir.name} failed (Slurm job {record['slurm_job']}: {state})"
                            f"{': ' + why if why else ''}:\n" + _log_tails(run_dir),
                            fix=f"its logs are in {run_dir / 'logs'}", exit_code=TRAIN)
    if status == "preempted" and spec is not None:
        raise failure(spec, run_dir, status, why or f"Slurm job {record['slurm_job']} ended {state}")
    summary = runs.read_summary(run_dir)
    return {**summary, "run_id": run_dir.name, "run_dir": str(run_dir), "status": status,
            "slurm_job": record["slurm_job"], "attempts": len(record.get("attempts") or [])}


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
