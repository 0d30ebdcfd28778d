"""The guard role on the local target: a short TTL, or idleness, runs the shutdown command.

The shutdown command is the role variable `guard_shutdown_command`; here it kills a stand-in
process, never this machine. The role runs through ansible-runner with a local connection and
starts the guard in the background (guard_service_manager: process; no systemd in test boxes).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import ansible_runner
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 60  # an upper bound for the guard to act; the checks below wait for an event, not a time


@pytest.fixture(autouse=True)
def venv_on_path(monkeypatch):
    """ansible-runner finds ansible-playbook on PATH: the one beside this Python."""
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


def run_guard(tmp: Path, **overrides) -> dict:
    """Apply the guard role to localhost with these variables; returns the state file's path info."""
    (tmp / "project").mkdir(parents=True, exist_ok=True)
    (tmp / "project" / "guard.yml").write_text(yaml.safe_dump(
        [{"name": "Guard", "hosts": "all", "gather_facts": False, "roles": ["guard"]}]))
    variables = {"guard_service_manager": "process", "guard_python": sys.executable,
                 "guard_install_dir": str(tmp / "lib"), "guard_state_dir": str(tmp / "state"),
                 "guard_check_interval_s": 0.5, **overrides}
    inventory = {"all": {"hosts": {"localhost": {"ansible_connection": "local",
                                                 "ansible_python_interpreter": sys.executable}}}}
    result = ansible_runner.run(private_data_dir=str(tmp), playbook="guard.yml", inventory=inventory,
                                extravars=variables, quiet=True,
                                envvars={"ANSIBLE_ROLES_PATH": str(REPO / "ansible" / "roles")})
    assert result.rc == 0, result.stdout.read()[-3000:]
    return {"state": tmp / "state" / "state.json"}


def stand_in(tag: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", f"import time  # {tag}\ntime.sleep(600)"])


def kill_cmd(proc: subprocess.Popen) -> list[str]:
    return [sys.executable, "-c", f"import os, signal; os.kill({proc.pid}, signal.SIGTERM)"]


def wait_state(path: Path, predicate) -> dict:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        try:
            state = json.loads(path.read_text())
            if predicate(state):
                return state
        except (OSError, ValueError):
            pass
        time.sleep(0.2)
    raise AssertionError(f"guard state never matched: {path.read_text() if path.exists() else 'no file'}")


def test_a_short_ttl_shuts_down_the_stand_in(tmp_path):
    proc = stand_in("ttl")
    try:
        paths = run_guard(tmp_path, guard_ttl_minutes=0.02, guard_shutdown_command=kill_cmd(proc))
        assert proc.wait(timeout=WAIT_S) == -signal.SIGTERM
        state = wait_state(paths["state"], lambda s: s.get("state", "").startswith("shutting"))
        assert state["state"] == "shutting down (ttl)" and state["acted_at"] >= state["deadline"]
    finally:
        proc.kill()


def test_idle_node_shuts_down_but_a_training_process_keeps_it_up(tmp_path):
    idle = stand_in("idle")
    try:
        # CPU/GPU thresholds above 100%: only the training-process check can say "busy"
        common = {"guard_idle_minutes": 0.02, "guard_idle_cpu_percent": 101, "guard_idle_gpu_percent": 101}
        paths = run_guard(tmp_path / "a", guard_shutdown_command=kill_cmd(idle),
                          guard_training_pattern="no-such-training-xyz", **common)
        assert idle.wait(timeout=WAIT_S) == -signal.SIGTERM
        assert json.loads(paths["state"].read_text())["state"] == "shutting down (idle)"
    finally:
        idle.kill()
    trainer = stand_in("fake-torchrun-job")
    try:
        paths = run_guard(tmp_path / "b", guard_shutdown_command=kill_cmd(trainer),
                          guard_training_pattern="fake-torchrun-job", **common)
        state = wait_state(paths["state"], lambda s: s.get("state") == "busy")
        assert trainer.poll() is None and state["idle_since"] is None
        os.kill(state["pid"], signal.SIGTERM)
    finally:
        trainer.kill()


def test_a_second_run_does_not_start_a_second_guard(tmp_path):
    proc = stand_in("twice")
    try:
        first = run_guard(tmp_path, guard_idle_minutes=60, guard_shutdown_command=kill_cmd(proc))
        pid = wait_state(first["state"], lambda s: "pid" in s)["pid"]
        run_guard(tmp_path, guard_idle_minutes=60, guard_shutdown_command=kill_cmd(proc))
        assert json.loads(first["state"].read_text())["pid"] == pid
        os.kill(pid, signal.SIGTERM)
    finally:
        proc.kill()


def test_a_ttl_edit_moves_the_deadline_from_the_first_start_and_a_rerun_does_not(tmp_path):
    """Issue 37 (ttl is one truth, AWS and Tencent): the role run again with a new ttl (apply after a
    ttl edit) moves the running guard's deadline to its first start + the new ttl; run again with
    the same ttl (an unrelated apply) it stays where it was."""
    proc = stand_in("ttl-edit")
    try:
        first = run_guard(tmp_path, guard_ttl_minutes=600, guard_shutdown_command=kill_cmd(proc))
        state = wait_state(first["state"], lambda s: s.get("deadline") and s.get("checked_at"))
        started, pid = state["started"], state["pid"]
        assert state["deadline"] == started + 600 * 60
        run_guard(tmp_path, guard_ttl_minutes=300, guard_shutdown_command=kill_cmd(proc))
        moved = wait_state(first["state"], lambda s: s["deadline"] == started + 300 * 60)
        assert moved["started"] == started and moved["pid"] == pid
        run_guard(tmp_path, guard_ttl_minutes=300, guard_shutdown_command=kill_cmd(proc))
        checked = moved["checked_at"]
        again = wait_state(first["state"], lambda s: s["checked_at"] > checked)
        assert again["deadline"] == started + 300 * 60 and proc.poll() is None
        os.kill(pid, signal.SIGTERM)
    finally:
        proc.kill()
