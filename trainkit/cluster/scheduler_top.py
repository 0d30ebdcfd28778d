"""`trainkit top` on a scheduler's cluster (Cloud.node_source NODES_SCHEDULER: target `slurm`):
one row per open run of the workspace, read through the login node in one ssh each: the job's
state, elapsed time and nodes from `squeue -h -j ID -o '%T|%M|%N'` (squeue(1) format fields that
Slurm 20.11 has: cluster/slurm_version.py), and the engine's progress (step, loss, samples/s,
data wait) from the last `step` record of the run's metrics.jsonl on the shared storage.
trainkit logs in nowhere but the login node, so a node's own counters (GPU, CPU, disk) are not
read: those cells stay `-`. The rows render with cluster/top.py's table (`cells` reads a row
with a `slurm` key as this module writes it).
"""

from __future__ import annotations

import json
import shlex
import time
from typing import Any

from trainkit.cluster.scheduler import login
from trainkit.cluster.slurm_version import SQUEUE_TOP
from trainkit.train.monitor import DATA_BOUND_PCT
from trainkit.workspace import Workspace

_SSH_TIMEOUT_S = 30
_TAIL_LINES = 400   # metrics.jsonl lines read back: an epoch record and a few evals between steps


def rows(ws: Workspace) -> list[dict[str, Any]]:
    """One row per run of the workspace whose record is open and names a Slurm job."""
    out = []
    for path in sorted(ws.runs_dir.glob("*/run.json")) if ws.runs_dir.is_dir() else []:
        record = json.loads(path.read_text())
        job_id = str(record.get("slurm_job") or "")
        if record.get("status") not in ("starting", "running") or not job_id.isdigit():
            continue
        metrics = shlex.quote(f"{record.get('remote_dir')}/metrics.jsonl")
        res = login(ws).sh(f"squeue -h -j {job_id} -o {shlex.quote(SQUEUE_TOP)} 2>/dev/null; echo; "
                           f"tail -n {_TAIL_LINES} {metrics} 2>/dev/null | grep '\"kind\": \"step\"' | tail -n 1",
                           timeout=_SSH_TIMEOUT_S)
        out.append(row(path.parent.name, job_id, res.stdout.decode(errors="replace"), time.time()))
    return out


def row(run_id: str, job_id: str, text: str, now: float) -> dict[str, Any]:
    """The row of run `run_id` from its ssh's output (`text`: squeue's line, an empty line, the
    last step record or nothing) at time `now`. Pure."""
    head, _, tail = text.partition("\n\n") if "\n\n" in text else (text, "", "")
    fields = (head.strip().splitlines() or [""])[0].split("|")
    state, elapsed, nodes = (fields + ["", "", ""])[:3] if fields != [""] else ("gone from squeue", "", "")
    try:
        rec = json.loads(tail.strip().splitlines()[-1]) if tail.strip() else {}
    except ValueError:   # a line cut short while the engine wrote it
        rec = {}
    job = {k: rec.get(k) for k in ("step", "loss", "samples_per_s", "data_wait_pct")}
    job["age_s"] = round(now - rec["time"], 1) if isinstance(rec.get("time"), (int, float)) else None
    wait = job["data_wait_pct"]
    progress = (f"step {job['step']}" + (f", loss {job['loss']:.4g}" if isinstance(job["loss"], (int, float)) else "")
                if job["step"] is not None else "no step logged yet")
    where = f" {elapsed} on {nodes}" if nodes else ""
    flagged = state != "RUNNING" or (isinstance(wait, (int, float)) and wait > DATA_BOUND_PCT)
    return {"node": f"{run_id} (job {job_id})", "slurm": {"job": job_id, "state": state, "elapsed": elapsed,
                                                           "nodes": nodes},
            "job": job, "flagged": flagged, "verdict": f"{state}{where}: {progress}"}
