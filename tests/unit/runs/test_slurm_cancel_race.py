"""`cancel` on a Slurm run whose job finished its last step as the signal came
(trainkit/runs/slurm_runs.py cancel): the job's state says CANCELLED or COMPLETED, its summary.json
says completed, and the run is what the engine did: recorded and reported completed, never called
cancelled (a CI run of tests/e2e/test_slurm_job.py saw `cancel` print cancelled while run.json said
completed). The login node is a stand-in that answers scancel and serves the job's folder; the
record, the fetch rule and the verdict are trainkit's own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainkit.runs import record as runs
from trainkit.runs import slurm_follow, slurm_runs
from trainkit.workspace import Workspace


class _Login:
    """The login node: records each command; scancel is all `cancel` asks of it here."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def sh(self, command: str, timeout: float):
        self.said.append(command)
        return type("Res", (), {"returncode": 0, "stdout": b"", "stderr": b""})()


@pytest.mark.parametrize("ended_as, summary, expected", [
    ("COMPLETED", "completed", ("completed", True)),   # the last step beat the signal
    ("CANCELLED", "completed", ("completed", True)),   # scancel after the engine wrote its summary
    ("CANCELLED", "preempted", ("cancelled", False)),  # the engine checkpointed on SIGTERM: cancelled
    ("CANCELLED", None, ("cancelled", False)),          # killed before it wrote anything
])
def test_cancel_says_what_the_job_did(tmp_path, monkeypatch, ended_as, summary, expected):
    ws = Workspace.for_cluster("lab", tmp_path / "ws")
    run_dir = ws.runs_dir / "digits-1"
    runs.write_record(run_dir, {"run_id": "digits-1", "status": "running", "slurm_job": "17",
                                "remote_dir": "/shared/.trainkit/lab/runs/digits-1", "attempts": [{}]})
    node = _Login()
    states = iter(["RUNNING", "RUNNING", ended_as])
    monkeypatch.setattr(slurm_runs, "login", lambda ws: node)
    monkeypatch.setattr(slurm_follow, "login", lambda ws: node)
    monkeypatch.setattr(slurm_runs, "job_state", lambda node, job: next(states, ended_as))
    monkeypatch.setattr(slurm_runs, "POLL_S", 0)

    def fetch(node, remote: str, into: Path) -> None:
        if summary:
            (into / "summary.json").write_text(json.dumps({"status": summary}))
    monkeypatch.setattr(slurm_follow.slurm_jobs, "fetch", fetch)

    status, ended, where = slurm_runs.cancel(ws, run_dir, wait_s=0)
    assert (status, ended) == expected and where == run_dir
    assert runs.read_record(run_dir)["status"] == expected[0]
    assert node.said[0] == "scancel --signal=TERM 17"
