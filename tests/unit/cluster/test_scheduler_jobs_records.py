"""`status` on a Slurm cluster reads the open runs' records (cluster/scheduler.py jobs): a record
that is unreadable, or whose slurm_job was edited into something that is not a job id, is passed
over (no traceback, and no text of it reaches the login node's shell)."""

from __future__ import annotations

import json

from trainkit.cluster.scheduler import jobs
from trainkit.workspace import Workspace


def test_unreadable_or_edited_records_are_passed_over(tmp_path):
    ws = Workspace.for_cluster("lab", tmp_path)
    for name, text in [("a-1", "{not json"), ("b-2", json.dumps({"status": "running", "slurm_job": "1; rm -rf /"})),
                       ("c-3", json.dumps(["a list"])), ("d-4", json.dumps({"status": "completed", "slurm_job": "7"}))]:
        (ws.runs_dir / name).mkdir(parents=True)
        (ws.runs_dir / name / "run.json").write_text(text)
    assert jobs(ws) == {}   # no open run with a job id: the login node (no inventory here) is not asked
