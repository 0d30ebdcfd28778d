"""Waiting for a relaunched attempt's first step (trainkit/runs/resume_wait.py) against a real node
layout on this machine (a `local` node: the same shell script ssh would run). Issue 39, defect 7:
a survivor that died at start-up blinded the controller for the whole 300 s timeout, then read as
`grown` with null figures."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from trainkit.provision.node import Node
from trainkit.runs import remote, resume_wait

pytestmark = pytest.mark.unit

TIMEOUT_S = 120  # far above what any case below may take: ending at once is what is asserted


def _dead_pid() -> int:
    """The pid of a process that has ended (a supervisor or job that is gone)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


GONE = _dead_pid()


def head_with(tmp_path, state: dict | None, exit_record: str | None = None, metrics: str = ""):
    lay = remote.Layout(work=str(tmp_path / "work"), root=str(tmp_path / "root"), run_id="r-1")
    node_dir = tmp_path / "work" / "runs" / "r-1" / "nodes" / "node-0"
    node_dir.mkdir(parents=True)
    (tmp_path / "work" / "runs" / "r-1" / "metrics.jsonl").write_text(metrics)
    if state is not None:
        (node_dir / "attempt-2.json").write_text(json.dumps(state))
    if exit_record is not None:
        (node_dir / "attempt-2.exit").write_text(exit_record)
    return Node("head", 0, local=True), lay


@pytest.mark.parametrize("state, exit_record, ended", [
    ({"status": "failed", "supervisor_pid": GONE}, None, "failed"),          # the supervisor said so
    ({"status": "running", "supervisor_pid": GONE, "pid": GONE}, "exit=1 status=", "failed"),  # launch.sh did
    ({"status": "running", "supervisor_pid": GONE, "pid": GONE}, None, "lost"),   # killed with its supervisor
])
def test_an_attempt_whose_head_ends_before_its_first_step_ends_the_wait_at_once(
        tmp_path, state, exit_record, ended):
    head, lay = head_with(tmp_path, state, exit_record)
    t0 = time.monotonic()
    seen = resume_wait.first_step(head, lay, attempt=2, timeout_s=TIMEOUT_S)
    assert seen.ended == ended and seen.first_step_at is None
    assert time.monotonic() - t0 < TIMEOUT_S / 4 and seen.waited_s < TIMEOUT_S / 4


def test_a_head_with_no_state_yet_is_waited_for_not_ended(tmp_path):
    """Not started is not ended: the wait runs to its timeout (short here) and ends with nothing."""
    head, lay = head_with(tmp_path, None)
    seen = resume_wait.first_step(head, lay, attempt=2, timeout_s=2.5)
    assert seen.ended is None and seen.first_step_at is None and seen.waited_s >= 2.5


def test_the_head_s_first_step_is_placed_on_the_controller_s_clock(tmp_path):
    """The head reports its first step on its own CLOCK_BOOTTIME (`progress.first_at`); the same
    read gives its uptime, so the step's time here is now minus its age there, never before the
    launch and never in the future, whatever the two machines' wall clocks say."""
    uptime = float(open("/proc/uptime").read().split()[0])
    state = {"status": "running", "supervisor_pid": GONE, "pid": GONE,
             "progress": {"first_at": uptime - 5.0, "at": uptime - 1.0, "step": 3}}
    head, lay = head_with(tmp_path, state, exit_record=None)
    launched = time.time() - 60
    before = time.time()
    seen = resume_wait.first_step(head, lay, attempt=2, timeout_s=TIMEOUT_S, not_before=launched)
    assert seen.ended is None and seen.first_step_at is not None
    assert launched <= seen.first_step_at <= time.time()
    assert before - 5.0 - 2.0 <= seen.first_step_at <= before - 5.0 + 2.0   # its age on the head's clock


def _closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_head_that_stops_answering_ends_the_wait_after_the_lost_window(tmp_path):
    """A survivor whose machine is gone (ssh refused) before its first step: the wait ends as
    `unreachable` once it failed UNREACHABLE_POLLS polls over UNREACHABLE_S (watch's lost window),
    not at the timeout."""
    lay = remote.Layout(work=str(tmp_path / "work"), root=str(tmp_path / "root"), run_id="r-1")
    gone = Node("head", 0, {"ansible_host": "127.0.0.1", "ansible_port": _closed_port(),
                            "ansible_ssh_common_args": "-F /dev/null -o UserKnownHostsFile=/dev/null"})
    seen = resume_wait.first_step(gone, lay, attempt=2, timeout_s=TIMEOUT_S)
    assert seen.ended == "unreachable" and seen.first_step_at is None
    assert resume_wait.UNREACHABLE_S <= seen.waited_s < TIMEOUT_S / 4
