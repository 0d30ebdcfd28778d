"""Run identity and the run record on the controller: pure parsing plus small file writes.

A run is one training job under one id: `<name>-<YYYYmmdd-HHMMSS>`, where `name` is the train
config's `name:` (default: the config file's stem). Its controller folder is
`<workspace>/runs/<run-id>/`:

    run.json        what was launched (config hash, mode, nodes, attempts), written by trainkit
    events.jsonl    one JSON object a line: launched, notice, preempted, replaced, resumed, ...
    summary.json    the job's summary (fetched), plus trainkit's cost ledger
    logs/ ...       fetched from the nodes when the run ends

The checkpoint folder on the nodes is keyed by run id, so a new run never resumes an old one;
`trainkit train --resume RUN` reuses the id (and its checkpoints) and refuses a changed config
unless --force.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainkit import records
from trainkit.errors import InputError
from trainkit.runs import launch_keys as keys
from trainkit.train.config import LAUNCH_KEYS
from trainkit.util import yamlload
from trainkit.workspace import write_atomic

# Grammars are whole-string: always fullmatch (re.match(...$) also accepts a final newline).
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,62}")
# A run id as new_run_id makes them: <name>-<YYYYmmdd-HHMMSS>[-N]
RUN_ID = re.compile(rf"{NAME_RE.pattern}-[0-9]{{8}}-[0-9]{{6}}(-[0-9]+)?")
OVERRIDE_RE = re.compile(r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)*=.*", re.DOTALL)  # train overrides: KEY=VALUE, KEY dotted names
# Keys of a train config that belong to the launcher, not to the engine (docs/runs.md).
TERMINAL = ("completed", "failed", "cancelled")


@dataclass(frozen=True)
class Job:
    """A train config split into what trainkit launches and what the engine (if any) reads."""

    name: str
    source: Path
    engine_config: dict[str, Any]          # the config minus LAUNCH_KEYS (engine mode only)
    overrides: tuple[str, ...] = ()
    command: str | None = None             # user mode: the user's shell command (runs as written)
    workdir: Path | None = None            # user mode: local folder synced to every node
    setup: str | None = None               # once per node, before the first command
    env: dict[str, str] = field(default_factory=dict)
    excludes: tuple[str, ...] = ()         # extra rsync-style exclude patterns for workdir
    stage: Any = None                      # the job's own data (trainkit.staging.section.DataSection) or None
    elastic: bool = False                  # recover.elastic: survivors train on while a node is replaced
    hang_after_s: float | None = None      # recover.hang_after_s: the watchdog's fixed window (0: off)

    @property
    def mode(self) -> str:
        return "command" if self.command else "engine"

    def fingerprint(self) -> str:
        """Hash of everything that decides what the run computes (config, overrides, command)."""
        blob = json.dumps({"engine": self.engine_config, "overrides": list(self.overrides),
                           "command": self.command, "setup": self.setup, "env": self.env,
                           "stage": self.stage.model_dump(mode="json") if self.stage else None},
                          sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def load_job(path: Path, overrides: list[str] | tuple[str, ...] = ()) -> Job:
    """Read a train config; InputError (exit 2) naming the file and field for bad launch keys."""
    if not path.is_file():
        raise InputError(f"{path}: training config {yamlload.not_a_file(path)}", fix="check the --config path")
    data = yamlload.load_file(path, "train config") or {}  # bounded aliases, duplicate keys refused
    if not isinstance(data, dict):
        raise InputError(f"{path}: a train config is a mapping of keys to values")
    for item in overrides:  # a key is dotted names: never an option (`--help=x`) on the node's argv
        if not OVERRIDE_RE.fullmatch(item):
            raise InputError(f"override {item!r} is not key=value (the key: names joined by '.')",
                             fix="write it like epochs=3 or checkpoint.keep=2")
        if item.split("=", 1)[0].split(".")[0] in LAUNCH_KEYS:  # not "unknown key": a key read before launch
            raise InputError(f"override {item!r}: {item.split('=', 1)[0]} is a key of the train config that "
                             "trainkit reads to launch the run, so it cannot be overridden on the command line",
                             fix=f"set it in {path}")
    launch = {k: data.pop(k) for k in LAUNCH_KEYS if k in data}
    name = launch.get("name", path.stem)
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise InputError(f"{path}: name: {name!r} is not a run name",
                         fix="letters, digits, '.', '_' and '-', at most 63 characters")
    command, setup = keys.text(path, launch, "command"), keys.text(path, launch, "setup")
    if command is None and any(k in launch for k in ("workdir", "setup", "excludes")):
        raise InputError(f"{path}: workdir/setup need a `command:` (the built-in engine ships with trainkit)")
    if command is not None and overrides:
        raise InputError(f"overrides {list(overrides)} apply to the built-in engine, not to `command:`",
                         fix=f"edit {path} (or pass arguments inside `command:`)")
    return Job(name=name, source=path, engine_config=data, overrides=tuple(overrides), command=command,
               workdir=keys.workdir(path, launch.get("workdir")), setup=setup, env=keys.env(path, launch.get("env")),
               excludes=keys.string_list(path, "excludes", launch.get("excludes")),
               stage=keys.stage(path, launch.get("stage")), elastic=keys.elastic(path, launch.get("recover"), command),
               hang_after_s=keys.hang_after(path, launch.get("recover")))


def new_run_id(name: str, runs_dir: Path, now: float | None = None) -> str:
    """`<name>-<UTC timestamp>`, with -2, -3... when that folder exists already."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now if now is not None else time.time()))
    run_id, n = f"{name}-{stamp}", 1
    while (runs_dir / run_id).exists():
        n += 1
        run_id = f"{name}-{stamp}-{n}"
    return run_id


def read_record(run_dir: Path) -> dict[str, Any]:
    """run.json as written (checked against records.RunRecord); {} when it is missing or damaged
    (listings show such a run as unreadable; check_record says what is wrong)."""
    try:
        return records.load_dict(run_dir / "run.json", records.RunRecord, "") or {}
    except InputError:
        return {}


def check_record(run_dir: Path) -> None:
    """InputError naming run.json and what is wrong with it when a run that is about to be
    attached, resumed, read or cancelled has a record trainkit cannot use (truncated, edited, a
    field of the wrong type, a newer trainkit's): acting on it would start the attempts over and
    overwrite the record."""
    fix = (f"restore run.json from a backup, or start a new run with `trainkit train`; "
           f"this run's logs and results stay in {run_dir}")
    path = run_dir / "run.json"
    try:
        record = records.load(path, records.RunRecord, fix, required=True)
    except InputError as err:
        raise InputError(f"{path}: the run's record is unreadable or incomplete: "
                         f"{err.message.removeprefix(f'{path}: ')}", fix=err.fix) from None
    if record.config is None:
        raise InputError(f"{path}: the run's record is unreadable or incomplete (no config in it: "
                         "truncated or edited by hand)", fix=fix)


def write_record(run_dir: Path, record: dict[str, Any]) -> None:
    run_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(run_dir / "run.json", records.dump(record, indent=2, sort_keys=True))


def event(run_dir: Path, kind: str, **data: Any) -> dict[str, Any]:
    """Append one event to run_dir/events.jsonl; returns it."""
    entry = {"time": round(time.time(), 3), "event": kind, **data, "version": records.VERSION}
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "events.jsonl", "a") as f:
        f.write(json.dumps(entry, sort_keys=True) + "\n")
    return entry


def record_events(run_dir: Path, events: list[dict[str, Any]]) -> None:
    """Events of work done for the run outside its attempts (doctor's replacements) into its events.jsonl."""
    for ev in events:
        event(run_dir, **ev)


def read_events(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "events.jsonl"
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:  # a line cut short (the controller killed mid-append) is skipped, not fatal
            entry = json.loads(line)
        except ValueError:
            continue
        try:  # a line of another shape (edited, a newer trainkit's) is skipped the same way
            records.check(entry, path, records.Event, "")
        except InputError:
            continue
        out.append(entry)
    return out


def created_at(run_dir: Path) -> float:
    """The run's start time for sorting (0 when run.json is unreadable)."""
    value = read_record(run_dir).get("created_at", 0)
    return value if isinstance(value, (int, float)) else 0


class NoRuns(InputError):
    """The cluster has no runs yet (`trainkit logs` and `trainkit runs` say so the same way, exit 0)."""

    def __init__(self, runs_dir: Path):
        super().__init__(no_runs_text(runs_dir))


def no_runs_text(runs_dir: Path) -> str:
    """The one sentence for a cluster without runs (runs_dir: <workspace>/runs)."""
    return f"no runs on this cluster yet ({runs_dir} is empty): start one with `trainkit train`"


def attachable(runs_dir: Path, run: str, spec: str, started: str) -> tuple[Path, dict[str, Any]]:
    """(folder, record) of run `run` for `train --attach`: InputError naming where its results are
    when it is not open, or has no `started` key yet ("attempts", "slurm_job": nothing runs)."""
    run_dir = resolve_run(runs_dir, run)
    record = read_record(run_dir)
    if record.get("status") not in OPEN or not record.get(started):
        raise InputError(f"run {run_dir.name} is {record.get('status') or 'unknown'}: nothing to attach to",
                         fix=f"its results are in {run_dir}; see `trainkit runs {spec}`")
    return run_dir, record


def resolve_run(runs_dir: Path, run: str | None) -> Path:
    """The folder of run `run` (an id, or a unique prefix); None = the newest run (NoRuns when
    there is none)."""
    if run is not None and (not run.strip() or "/" in run or "\0" in run):
        raise InputError(f"run id {run!r} is not a run id (empty, or a path)",
                         fix="give a run id or its prefix as `trainkit runs` lists it, or leave it "
                             "out for the newest run")
    found = sorted((p for p in runs_dir.glob("*") if (p / "run.json").is_file()),
                   key=created_at) if runs_dir.is_dir() else []
    if run is None:
        if not found:
            raise NoRuns(runs_dir)
        check_record(found[-1])
        return found[-1]
    exact = [p for p in found if p.name == run]
    matches = exact or [p for p in found if p.name.startswith(run)]
    if len(matches) != 1:
        known = ", ".join(p.name for p in found[-5:]) or "none"
        raise InputError(f"run {run!r} {'is ambiguous' if matches else 'not found'} in {runs_dir}",
                         fix=f"recent runs: {known} (see `trainkit runs`)")
    check_record(matches[0])
    return matches[0]


OPEN = ("starting", "running")  # a record not closed yet: its results are still on the nodes


def combined_status(statuses: list[str]) -> str:
    """One run status from its nodes' (`remote.NodeState.status`): running while any node runs
    (or its supervisor has not written its state yet), completed when every node that can say
    did (a node gone or unreachable after the job ended does not undo it: a job whose peer died
    mid-run fails on the others, it does not complete), preempted when a node was reclaimed, lost
    or cannot be reached, else cancelled or failed."""
    found = set(statuses)
    if found & {"running", "starting", "missing"}:
        return "running"
    if "completed" in found and found <= {"completed", "unreachable", "lost"}:
        return "completed"
    if found & {"preempted", "unreachable", "lost"}:
        return "preempted"
    return "cancelled" if "cancelled" in found else "failed"


def check_resume(record: dict[str, Any], job: Job, force: bool) -> None:
    """InputError when resuming `record` with a config whose fingerprint changed (unless force)."""
    if record.get("config_hash") not in (None, job.fingerprint()) and not force:
        was = f"{record.get('config')} {' '.join(record.get('overrides') or [])}".strip()
        now = f"{job.source} {' '.join(job.overrides)}".strip()
        raise InputError(f"run {record.get('run_id')} was started with a different config or overrides "
                         f"({was}); resuming it with {now} would mix two jobs",
                         fix="start a new run (drop --resume), or pass --force to resume anyway")


def read_summary(run_dir: Path) -> dict[str, Any]:
    """The run's summary.json as written (checked against records.Summary); {} when it is absent
    or damaged (the job killed mid-write): a run is listed and closed without it."""
    try:
        return records.load_dict(run_dir / "summary.json", records.Summary, "") or {}
    except InputError:
        return {}


def summarize(run_dir: Path, live: dict[str, Any] | None = None) -> dict[str, Any]:
    """One row of `trainkit runs`: id, status, step, best metric, wall time (from the record,
    the fetched summary.json and, while running, the `live` node states)."""
    record = read_record(run_dir)
    summary = read_summary(run_dir)
    live = live or {}
    status = live.get("status") or record.get("status") or (
        "unknown" if record or not (run_dir / "run.json").exists() else "unreadable")
    started, ended = record.get("created_at"), record.get("ended_at") or live.get("ended_at")
    wall = ((ended or time.time()) - started) if started else None
    best = {k: summary[k] for k in ("best_val_acc", "val_acc")  # best_metric is a metric's *name*
            if isinstance(summary.get(k), (int, float)) and not isinstance(summary.get(k), bool)}
    return {"run_id": run_dir.name, "name": record.get("name"), "status": status,
            "step": live.get("step", summary.get("steps")), "best": best,
            "wall_s": round(wall, 1) if wall is not None else None,
            "attempts": len(record.get("attempts") or []), "mode": record.get("mode"),
            "fault": record.get("fault")}   # a storage fault that ended it (runs/storage_faults.py)


PATH_KEYS = ("onnx", "checkpoint", "checkpoint_dir")  # summary.json keys that hold a path (docs/training.md)


def kept_summary(summary: dict[str, Any], node_run_dir: str, run_dir: Path, status: str) -> dict[str, Any]:
    """The engine's `summary` as the controller keeps it in `run_dir` (runs/<id>/):

    - `status` is the run's status as `trainkit runs` shows it (a cancelled run stopped by SIGTERM
      says "preempted" in the engine's own summary); the engine's word, when it differs, stays
      as `job_status`;
    - a path under the node's run folder `node_run_dir` points at the fetched copy in `run_dir`;
      a path to anything not fetched (the checkpoint folder on a node disk, which `trainkit
      destroy` deletes with the disks) becomes null, the node path moving to `on_nodes` {key: path}.
    Returns a new dict; `summary` is left as it was."""
    out = dict(summary)
    if out.get("status") not in (None, status):
        out["job_status"] = out["status"]
    out["status"] = status
    on_nodes = dict(out.get("on_nodes") or {})
    for key in PATH_KEYS:
        value = out.get(key)
        if not isinstance(value, str) or not value:
            continue
        if value == node_run_dir or value.startswith(node_run_dir.rstrip("/") + "/"):
            local = run_dir / value[len(node_run_dir):].lstrip("/")
            if local.exists():
                out[key] = str(local)
                continue
        if not Path(value).is_relative_to(run_dir):
            on_nodes[key], out[key] = value, None
    if on_nodes:
        out["on_nodes"] = on_nodes
    return out


def refuse_completed(run_dir: Path) -> None:
    """InputError when the run's record says it completed: a resume must not touch it (write its
    events, stop or replace a node) before start() would refuse it anyway."""
    if read_record(run_dir).get("status") == "completed":
        raise InputError(f"run {run_dir.name} completed: there is nothing to resume",
                         fix="start a new run (drop --resume); its results are in " + str(run_dir))
