"""How a run ends: the end states, an attempt's outcome, whether the recovery loop gives up, and the
closing of the run (its files fetched, summary.json with the cost ledger, run.json closed).

`finish()` is the one way a run is closed (the loop, a failed launch, `cancel`, `destroy`); its
result is what `trainkit train` prints from. `give_up()` is the loop's decision, a pure function of
the attempt's outcome and the counts so far; `failure()` the error a closed run that did not
complete ends the command with.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainkit import records
from trainkit.errors import PREEMPTED, TRAIN, TrainkitError
from trainkit.money import cost
from trainkit.runs import record as runs
from trainkit.runs import remote
from trainkit.runs.attempt import nodes_of
from trainkit.spec.resolve import Cluster
from trainkit.workspace import Workspace, write_atomic

FINAL = ("completed", "failed", "preempted", "cancelled")


@dataclass
class Outcome:
    status: str                         # completed | failed | preempted | cancelled | reclaimed
    lost: list[str] = field(default_factory=list)
    last_step: int | None = None
    detected_at: float | None = None
    step_time_s: float | None = None    # the job's last logged mean step time (lost-work estimate)
    detail: dict[str, Any] = field(default_factory=dict)   # hung: the stalls; a storage fault: what, where


def give_up(out: Outcome, reclaim: bool, recover: bool, max_recoveries: int, max_restarts: int,
            recoveries: int, restarts: int) -> tuple[str, str] | None:
    """(status, why) to close the run with after an attempt that did not complete, or None to go
    on (replace what was lost, relaunch). `reclaim`: the attempt lost a node or was preempted (not
    the job's own failure); `recoveries` / `restarts`: the counts with this attempt's included.
    Without `recover`, or for a cancelled run, the attempt's own status ends it (a hung one: failed)."""
    hung = out.status == "hung"
    if out.status == "cancelled" or not recover:
        return ("failed" if hung else out.status), ("hung (no step for the watchdog's window)" if hung else "")
    if reclaim:
        return ("preempted", f"gave up after {max_recoveries} recoveries") if recoveries > max_recoveries else None
    if restarts > max_restarts:
        return "failed", ("hung, and --max-restarts-on-errors is spent" if hung else "")
    return None


def end_attempt(run_dir: Path, attempt: int, out: Outcome) -> None:
    """Record how `attempt` ended (ended_at, outcome, last step) in run.json."""
    record = runs.read_record(run_dir)
    for a in record.get("attempts") or []:
        if a["attempt"] == attempt:
            a.update(ended_at=out.detected_at, outcome=out.status, last_step=out.last_step)
    runs.write_record(run_dir, record)


def finish(cluster: Cluster, ws: Workspace, run_dir: Path, status: str, *, raise_: bool = False,
           why: str = "") -> dict[str, Any]:
    """Fetch the run's files, add the cost ledger to summary.json, close the record. Returns the
    run's result ({run_id, run_dir, status, and summary.json's entries}); with `raise_`, a status
    other than completed raises `failure()` instead."""
    nodes, group = nodes_of(cluster, ws)
    record = runs.read_record(run_dir)
    lay = remote.layout_for(group, run_dir.name)
    reachable = [n for n in nodes if n.sh("true", timeout=15).returncode == 0]
    if reachable and reachable[0].rank == 0:
        remote.fetch_run(reachable, lay, run_dir, shared=bool(record.get("shared")))
    summary = _summary(cluster, record, run_dir, lay, status)
    now = time.time()
    for a in record.get("attempts") or []:
        a["ended_at"] = a.get("ended_at") or now
    record.update(status=status, ended_at=now)
    runs.write_record(run_dir, record)
    if raise_ and status != "completed":
        raise failure(str(cluster.source), run_dir, status, why)
    return {"run_id": run_dir.name, "run_dir": str(run_dir), "status": status, **summary}


def _summary(cluster: Cluster, record: dict[str, Any], run_dir: Path, lay: remote.Layout,
             status: str) -> dict[str, Any]:
    """summary.json as the workspace keeps it (paths and status as runs/<id>/ has them), with the
    cost ledger and the number of recoveries; written, and returned."""
    summary = runs.read_summary(run_dir)
    for a in record.get("attempts") or []:
        a["ended_at"] = a.get("ended_at") or time.time()
    summary = runs.kept_summary(summary, lay.run_dir, run_dir, status)
    summary["cost"] = cost.run_ledger(cluster, record)
    summary["recoveries"] = sum(1 for e in runs.read_events(run_dir) if e["event"] == "resumed")
    write_atomic(run_dir / "summary.json", records.dump(summary, indent=2, sort_keys=True))
    return summary


def failure(spec: str, run_dir: Path, status: str, why: str = "") -> TrainkitError:
    """The error a run closed as `status` (not completed) ends the command with: exit 75 for a
    preempted run, 6 otherwise; the fix resumes a preempted or cancelled run, else points at its logs."""
    code = PREEMPTED if status == "preempted" else TRAIN
    fix = (f"resume it: trainkit train {spec} --resume {run_dir.name} (add --recover "
           "to keep it going)") if status in ("preempted", "cancelled") else \
        f"see `trainkit logs {spec} {run_dir.name}` and {run_dir}/logs/"
    return TrainkitError(f"run {run_dir.name} {status}{': ' + why if why else ''}", fix=fix, exit_code=code)


def raise_preempted(cluster: Cluster, ws: Workspace, run_dir: Path, err: TrainkitError) -> None:
    """Close the run as preempted, then raise `err` as the run's (exit code and fix kept)."""
    finish(cluster, ws, run_dir, "preempted")
    raise TrainkitError(f"run {run_dir.name} preempted: {err.message}", fix=err.fix,
                        exit_code=err.exit_code) from None
