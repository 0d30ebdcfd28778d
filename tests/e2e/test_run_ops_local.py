"""Run operations in the order an engineer or a CI pipeline really uses them, on the `local`
target with real supervisors (bash + trainkit/node/supervise.py): detach, a second train while one
runs, resume, cancel twice, Ctrl-C while attached, destroy while a run goes, a run.json broken by
hand. The job is a `command:` that writes a weights file and sleeps, so each test takes seconds.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

TRAINKIT = Path(sys.executable).parent / "trainkit"
REPO = Path(__file__).resolve().parents[2]
SPEC = "name: ops-local\ncloud: local\nstorage: {data_disk: {enabled: false}, nas: {enabled: false}}\n"
# Writes its weights at once, then sleeps $SLEEP seconds; SIGTERM = checkpoint saved (exit 75).
JOB = """name: job
command: |
  mkdir -p "$TRAINKIT_RUN_DIR/weights" && echo w > "$TRAINKIT_RUN_DIR/weights/best.pt"
  trap 'exit 75' TERM
  sleep "$SLEEP" & wait
env: {SLEEP: %s}
"""


@pytest.fixture
def cluster(tmp_path):
    """(run trainkit with these args, workspace): a local cluster applied without Ansible."""
    (tmp_path / "spec.yaml").write_text(SPEC)
    (tmp_path / "quick.yaml").write_text(JOB % 0)
    (tmp_path / "slow.yaml").write_text(JOB % 300)
    ws = tmp_path / "ws"

    def tk(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run([str(TRAINKIT), args[0], "spec.yaml", "--workdir", str(ws), *args[1:]],
                              cwd=tmp_path, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PYTHONPATH": str(REPO)})

    assert tk("apply", "--yes", "--no-provision").returncode == 0
    yield tk, ws
    _kill_jobs_under(tmp_path)  # never leave a job behind, also when a test failed


def _kill_jobs_under(folder: Path) -> None:
    """SIGKILL the process groups of every process whose command line names `folder`."""
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if str(folder) in (proc / "cmdline").read_bytes().decode(errors="replace"):
                os.killpg(os.getpgid(int(proc.name)), signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass


def started(tk, config: str) -> str:
    """Start a detached run; its id once its supervisor reports it running."""
    proc = tk("train", "--config", config, "--detach")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def wait_status(tk, run_id: str, want: str) -> None:
    for _ in range(120):
        rows = {r["run_id"]: r["status"] for r in json.loads(tk("runs", "--json").stdout)}
        if rows.get(run_id) == want:
            return
        time.sleep(0.5)
    raise AssertionError(f"{run_id} never {want}: {rows}")


def no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr


def test_a_run_json_broken_by_hand_is_named_and_nothing_acts_on_the_run(cluster):
    tk, ws = cluster
    done = started(tk, "quick.yaml")
    wait_status(tk, done, "completed")
    record = ws / "runs" / done / "run.json"
    record.write_text('{"run_id": ')
    listed = tk("runs", "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout)[0]["status"] == "unreadable"
    for args in (("cancel", done), ("train", "--attach", done), ("train", "--resume", done, "--config",
                                                                    "quick.yaml")):
        proc = tk(*args)
        no_traceback(proc)
        assert proc.returncode == 2 and str(record) in proc.stderr, (args, proc.stderr)
    assert record.read_text() == '{"run_id": '  # left as it was, for the user to restore
