"""How a run starts: `trainkit train`'s whole start sequence below the CLI.

    checked()   the config resolved (a `--resume` run's own) and checked before any node is touched
    run()       on an applied cluster: attach to a run, or under the workspace lock: the nodes as the
                state backend has them, the cluster free (no other workspace's run), a crippled run
                to resume stopped and its half-provisioned replacement finished, doctor's gate,
                the run's record (open_run), its first attempt launched; then the run followed to
                its end (recover.drive) unless detached

Ctrl-C anywhere in it says whether a run may go on and how to see and stop it (exit 130).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from trainkit.clouds.base import NODES_HOSTS
from trainkit.cluster import doctor, lifecycle
from trainkit.cluster.replace import effective_cluster
from trainkit.errors import InputError, LockedError, TrainkitError
from trainkit.provision.playbook import prepare_inventory, run_site
from trainkit.runs import attempt as attempt_
from trainkit.runs import controller_host, handoff, handoff_cloud, launch, lock, recover, remote, slurm_runs
from trainkit.runs import record as runs
from trainkit.runs import status as run_status
from trainkit.spec.resolve import Cluster
from trainkit.spec.train_config import check_train_config, world_size
from trainkit.util import progress, resources
from trainkit.workspace import Workspace


@dataclass(frozen=True)
class Request:
    """What `trainkit train` was asked for, parsed: SPEC as given (named in messages), the config
    (a file or a built-in name) and its overrides, a run to attach to or resume, and the options."""
    spec: str
    config: str | None = None
    overrides: tuple[str, ...] = ()
    attach: str | None = None
    resume: str | None = None
    force: bool = False
    down: bool = False                  # destroy the cluster when the run ends (a controller's loop: there)
    opts: recover.Options = field(default_factory=recover.Options)
    config_path: Path | None = None     # set by checked(): the config file the run reads


def checked(cluster: Cluster, ws: Workspace, req: Request) -> Request:
    """`req` with its config file found (`--resume` without a config: the run's own, as it was
    started) and checked before anything exists or runs: the engine's config against the cluster's
    world size, a job's workdir against the size limit. InputError for a bad config, or for
    --recover with --detach without a controller host to hand the loop to (handoff.wanted)."""
    config, overrides = req.config, req.overrides
    if req.resume and config is None and not overrides:
        config, overrides = resumed_config(ws, req.resume)
    config_path = None if req.attach else resources.train_config(config)
    job = runs.load_job(config_path, list(overrides)) if config_path is not None else None
    if job is not None and job.command is None:
        check_train_config(config_path, list(overrides), world_size(cluster))  # before any node
    if job is not None and job.workdir:
        launch.workdir_files(job.workdir, job.excludes)  # too big to ship: say so before a run starts
    if handoff.wanted(cluster, req.opts) and controller_host.instance_controller(cluster):   # before anything starts
        controller_host.refuse(cluster, ws.read_outputs() if ws.outputs_json.is_file() else None,
                               req.down)
    if req.opts.detach and req.opts.recover and not handoff.wanted(cluster, req.opts):
        raise InputError("--recover needs a controller that stays: drop --detach, or name the host that runs "
                         "the loop (controller.host in the spec, target hosts; controller.enabled: true on a "
                         "cloud)",
                         fix="run it under nohup or in CI; the nodes' jobs survive its disconnect anyway")
    if job is not None and handoff.wanted(cluster, req.opts):
        handoff.refuse_unsupported(cluster, job)
    return dataclasses.replace(req, config=config, overrides=tuple(overrides), config_path=config_path)


def resumed_config(ws: Workspace, resume: str) -> tuple[str, tuple[str, ...]]:
    """(config path, overrides) the run `resume` was started with (`--resume` without --config)."""
    record = runs.read_record(runs.resolve_run(ws.runs_dir, resume))
    if not record.get("config"):
        raise InputError(f"run {resume}: its run.json names no config", fix="pass --config TRAIN")
    return record["config"], tuple(record.get("overrides") or ())


def run(cluster: Cluster, ws: Workspace, req: Request, say: Callable[[str], None],
        echo: Callable[[str], None]) -> dict[str, Any]:
    """The run itself, on an applied cluster (`req` from checked()): attach to req.attach, or start
    (or resume) one and follow it. Returns the run's result ({run_id, run_dir, status: running}
    when detached). `say`: the controller's own lines (stderr); `echo`: rank 0's log lines."""
    if cluster.batch_jobs:   # one batch job through the login node (the head, with scheduler: slurm)
        return slurm_runs.run(cluster, ws, req, say, echo)
    cluster = effective_cluster(cluster, ws)
    if req.attach:
        run_dir, record = runs.attachable(ws.runs_dir, req.attach, req.spec, "attempts")
        if record.get("controller"):   # handed off: its controller alive refuses, gone is taken over
            handoff.check_attach(cluster, ws, run_dir, say)
        job = runs.load_job(Path(record["config"]), record.get("overrides") or [])
        try:
            return follow(req.spec, cluster, ws, job, run_dir, req.opts, len(record["attempts"]), echo)
        finally:   # the controller's --down: the results go where the destroy leaves them
            if req.down and handoff.is_controller_ws(ws, record):
                handoff.keep_results(ws, run_dir, say)
    started: list[Path] = []   # the run, once its record exists (for what Ctrl-C says)
    try:
        cluster, job, run_dir, attempt = _start_locked(cluster, ws, req, say, started)
    except KeyboardInterrupt:
        raise interrupted_start(req.spec, started) from None
    if req.opts.detach:
        by = handoff_cloud if controller_host.instance_controller(cluster) else handoff
        held = by.hand_off(cluster, ws, run_dir, req.opts, req.down, say) if handoff.wanted(cluster, req.opts) else None
        say(f"started run {run_dir.name}; follow it with: trainkit logs {req.spec} {run_dir.name} --follow")
        return {"run_id": run_dir.name, "run_dir": str(run_dir), "status": "running",
                **({"controller": held["host"]} if held else {})}
    say(f"run {run_dir.name} starting")
    return follow(req.spec, cluster, ws, job, run_dir, req.opts, attempt, echo)


def _start_locked(cluster: Cluster, ws: Workspace, req: Request, say: Callable[[str], None],
                  started: list[Path]) -> tuple[Cluster, runs.Job, Path, int]:
    """Under the workspace lock (one start at a time): the start sequence (module doc) up to the
    first attempt's launch. Returns (cluster, job, run folder, attempt); `started` gets the run
    folder once its record exists."""
    opts = req.opts
    with ws.lock("train"):
        if cluster.room.has_module:  # the nodes and key as the state backend has them
            lifecycle.sync(cluster, ws, need_ssh=True)
        check_free(cluster, ws)  # another workspace's live run: exit 8 before doctor touches the nodes
        if req.resume and opts.recover:
            # Before doctor touches the nodes: stop what is left of a run that lost a node, and finish
            # provisioning a replacement its last controller died setting up.
            stop_if_crippled(cluster, ws, req.resume)
            provision_unfinished(cluster, ws, req.resume)
        replaced: list[dict] = []
        if opts.doctor:  # exit 12 naming a failed node (--recover: replaced first); a warning for a slow one
            cluster, replaced = doctor.gate(cluster, ws, say, opts.max_recoveries if opts.recover else 0,
                                            f"trainkit train {req.spec}")
        job, run_dir = open_run(cluster, ws, req.config_path, list(req.overrides), resume=req.resume,
                                force=req.force, recover=opts.recover)
        started.append(run_dir)
        runs.record_events(run_dir, replaced)
        attempt = recover.launch_recovering(cluster, ws, job, run_dir, opts)
    return cluster, job, run_dir, attempt


def follow(spec: str, cluster: Cluster, ws: Workspace, job: runs.Job, run_dir: Path, opts: recover.Options,
           attempt: int, echo: Callable[[str], None]) -> dict[str, Any]:
    """Follow the run to its end and return its result; Ctrl-C leaves it running on the nodes and
    says how to get back."""
    try:
        return recover.drive(cluster, ws, job, run_dir, opts, echo=echo, attach_attempt=attempt)
    except KeyboardInterrupt:
        raise TrainkitError(f"interrupted: run {run_dir.name} keeps running on the nodes (it is detached); "
                            "its results are fetched when you attach again", exit_code=130,
                            fix=f"attach: trainkit train {spec} --attach {run_dir.name}; stop it: "
                                f"trainkit cancel {spec} {run_dir.name}") from None


def interrupted_start(spec: str, started: list[Path]) -> TrainkitError:
    """Ctrl-C before the run is followed (sync, doctor, start, launch): whether a run may go on, and
    how to see and stop it (exit 130)."""
    if not started:
        return TrainkitError("interrupted before the run started: no job of it was launched on the nodes", exit_code=130,
                             fix=f"start it again: trainkit train {spec} ...")
    run_id = started[0].name
    return TrainkitError(f"interrupted while run {run_id} was starting: it may be running on some or all nodes "
                         "(a launch cut off part-way is not rolled back)", exit_code=130,
                         fix=f"see it: trainkit runs {spec} (or trainkit logs {spec} {run_id}); follow it: trainkit "
                             f"train {spec} --attach {run_id}; stop it: trainkit cancel {spec} {run_id}")


def check_free(cluster: Cluster, ws: Workspace) -> None:
    """LockedError while a run of another workspace holds the cluster's nodes (their run lock).
    Asked before anything else runs on the nodes (doctor's all-reduce, a launch)."""
    nodes, group = attempt_.nodes_of(cluster, ws)
    lock.check_free(nodes, remote.layout_for(group, "-"), ws.runs_dir, str(cluster.source))


def open_run(cluster: Cluster, ws: Workspace, config: Path, overrides: list[str], *,
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
        if recover and run_dir in busy and stop_crippled(cluster, ws, run_dir):
            busy.remove(run_dir)
        _check_resumable(cluster, ws, run_dir, record, job, busy, force)
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


def _check_resumable(cluster: Cluster, ws: Workspace, run_dir: Path, record: dict[str, Any], job: runs.Job,
                     busy: list[Path], force: bool) -> None:
    """LockedError while the run to resume (`record`: its run.json) still runs; InputError when it
    completed, or its config changed (without `force`)."""
    status = run_status.live_status(cluster, ws, run_dir)
    if run_dir in busy:
        raise LockedError(f"run {run_dir.name} is still running: a second attempt would write the same "
                          "checkpoints", fix=f"follow it: trainkit train {cluster.source} --attach {run_dir.name}")
    if status == "completed":
        raise InputError(f"run {run_dir.name} completed: there is nothing to resume",
                         fix="start a new run (drop --resume); its results are in " + str(run_dir))
    runs.check_resume(record, job, force)


def check_job(cluster: Cluster, job: runs.Job) -> None:
    """What a job asks of the cluster it runs on; InputError (exit 2) before any node is touched."""
    if job.stage and job.stage.target == "nas" and not cluster.nas.get("enabled"):
        raise InputError(f"{job.source}: stage.target: nas, but cluster {cluster.name} has no NAS",
                         fix="use stage.target: disk, or enable storage.nas in the cluster spec")


def stop_if_crippled(cluster: Cluster, ws: Workspace, resume: str) -> None:
    """`train --resume RUN --recover` before anything else runs on the nodes (doctor's checks,
    its replacements): the run's jobs on the nodes that answer are stopped when a node of it does
    not (its controller died, then a node); a run that runs whole is left alone (open_run says so)."""
    run_dir = runs.resolve_run(ws.runs_dir, resume)
    runs.refuse_completed(run_dir)
    if run_dir in run_status.active_runs(cluster, ws):
        stop_crippled(cluster, ws, run_dir)


def stop_crippled(cluster: Cluster, ws: Workspace, run_dir: Path) -> bool:
    """Whether a node of the run's newest attempt does not answer; if so, the others' jobs are
    stopped (`unreachable` and `preempted` events: the resume that follows replaces the node)."""
    nodes, group = attempt_.nodes_of(cluster, ws)
    down = attempt_.unreachable(nodes)
    if not down:
        return False
    attempt = len(runs.read_record(run_dir).get("attempts") or [])
    runs.event(run_dir, "unreachable", nodes=down, by="resume", attempt=attempt)
    recover.stop_survivors(nodes, remote.layout_for(group, run_dir.name), attempt, down)
    runs.event(run_dir, "preempted", attempt=attempt, lost=down, last_step=None)
    return True


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
    active = ({h.name for h in cluster.spec.hosts if not h.spare} if cluster.room.node_source == NODES_HOSTS
              else {n.name for n in attempt_.nodes_of(cluster, ws)[0]})
    todo = [n for n in dict.fromkeys(pending) if n in active]
    if not todo:
        return
    progress.info(f"provisioning {', '.join(todo)}: put in by run {run_dir.name}'s last controller, "
                  "which stopped before it finished")
    t0 = time.time()
    prepare_inventory(cluster, ws)
    run_site(cluster, ws, limit=todo)
    runs.event(run_dir, "provisioned", nodes=todo, took_s=round(time.time() - t0, 3), by="resume")
