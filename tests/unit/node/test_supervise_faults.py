"""The supervisor under the faults of issue 39, with real processes on this machine (a `local`
node: bash, no ssh) and, as root, real filesystems:

- a job that stops (SIGSTOP, as a stopped torchrun or a wedged rank) is read as stalled by the
  watchdog from the progress the supervisor reported on its own clock, its stacks are dumped
  (the /proc states: stopped) and the escalated stop leaves nothing;
- a full disk (a tmpfs filled up) does not silence the supervisor: its state is rewritten in
  place and names ENOSPC; a disk that went read-only (the tmpfs remounted ro) moves the state to
  memory, which the controller reads in its place.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_supervise_stop import SUPERVISOR, _alive, _layout, _wait

from trainkit.runs import hang, recover, remote, watchdog

# The job: the engine's progress writer marks steps 1..3, then the job stops itself (SIGSTOP).
STOPPING_JOB = ("from trainkit.train.progress import Progress; import os, signal, time\n"
                "p = Progress.from_env(True)\n"
                "for step in (1, 2, 3):\n    p.mark(step); time.sleep(1.2)\n"
                "open(os.environ['D'] + '/job.pid', 'w').write(str(os.getpid()))\n"
                "os.kill(os.getpid(), signal.SIGSTOP)\n")
HANG_AFTER_S = 5   # recover.hang_after_s's least (watchdog.HANG_FIXED_MIN_S)


def _start(tmp_path: Path, lay: remote.Layout, *job: str) -> subprocess.Popen:
    env = {**os.environ, "D": str(tmp_path), "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    return subprocess.Popen([sys.executable, str(SUPERVISOR), lay.state_file(0, 1), "--", *job], env=env,
                            start_new_session=True)


def test_a_stopped_job_is_hung_on_the_node_s_own_clock_dumped_and_stopped_whole(tmp_path):
    node, lay = _layout(tmp_path)
    sup = _start(tmp_path, lay, sys.executable, "-c", STOPPING_JOB)
    _wait(lambda: (tmp_path / "job.pid").is_file() and (tmp_path / "job.pid").read_text())
    job = int((tmp_path / "job.pid").read_text())
    _wait(lambda: (remote.node_states([node], lay, 1)[0].state.get("progress") or {}).get("step") == 3)
    [state] = remote.node_states([node], lay, 1)
    p = state.state["progress"]
    assert p["phase"] == "train" and p["step_s"] > 0 and p["first_at"] < p["at"]
    assert watchdog.stalls([state], fixed=HANG_AFTER_S) == []          # just logged its step
    _wait(lambda: watchdog.stalls(remote.node_states([node], lay, 1), fixed=HANG_AFTER_S))
    [stall] = watchdog.stalls(remote.node_states([node], lay, 1), fixed=HANG_AFTER_S)
    assert stall.step == 3 and stall.age_s >= HANG_AFTER_S

    run_dir = tmp_path / "controller-run"
    [dump] = hang.dump_stacks([node], lay, 1, run_dir)
    text = dump.read_text()
    assert f"=== pid {job}:" in text and "State:\tT (stopped)" in text and "py-spy:" in text
    recover.stop_survivors([node], lay, 1, [], wait_s=2)   # SIGTERM waits on a stopped job: then SIGKILL
    assert sup.wait(timeout=30) == -signal.SIGKILL   # escalated: the hard stop took the supervisor too
    _wait(lambda: not _alive(job), timeout_s=10)


@pytest.fixture
def small_disk(tmp_path):
    """A 256 KiB tmpfs (root: mount(8)); the test fills it up or remounts it read-only."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root (the e2e tiers run as root too)")
    path = tmp_path / "disk"
    path.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(path)], check=True)
    yield path
    subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(path: Path) -> None:
    """Write zeros until the disk refuses (raw writes: a buffered close would raise ENOSPC again)."""
    fd = os.open(path / "filler", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)


def test_a_full_disk_does_not_silence_the_supervisor_and_names_enospc(tmp_path, small_disk):
    lay = remote.Layout(work=str(small_disk / "work"), root=str(tmp_path / "root"), run_id="r1")
    node, _ = _layout(tmp_path)
    Path(lay.node_dir(0)).mkdir(parents=True)
    go = tmp_path / "go"
    sup = _start(tmp_path, lay, "bash", "-c", f"while [ ! -e {go} ]; do sleep 0.1; done; exit 3")
    try:
        _wait(lambda: remote.node_states([node], lay, 1)[0].status == "running")
        _fill(small_disk)
        go.touch()
        assert sup.wait(timeout=30) == 3
    finally:
        if sup.poll() is None:
            os.killpg(sup.pid, signal.SIGKILL)
    [state] = remote.node_states([node], lay, 1)
    assert state.status == "failed" and state.state["exit_code"] == 3   # in place: not `lost`
    assert state.state["storage_error"]["errno"] == "ENOSPC"
    assert not Path(remote.memory_state_path(lay.state_file(0, 1))).exists()


def test_a_read_only_disk_moves_the_state_to_memory_which_the_controller_reads(tmp_path, small_disk):
    lay = remote.Layout(work=str(small_disk / "work"), root=str(tmp_path / "root"), run_id="r2")
    node, _ = _layout(tmp_path)
    Path(lay.node_dir(0)).mkdir(parents=True)
    go = tmp_path / "go"
    memory = Path(remote.memory_state_path(lay.state_file(0, 1)))
    sup = _start(tmp_path, lay, "bash", "-c", f"while [ ! -e {go} ]; do sleep 0.1; done; exit 0")
    try:
        _wait(lambda: remote.node_states([node], lay, 1)[0].status == "running")
        subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
        go.touch()
        assert sup.wait(timeout=30) == 0
        [state] = remote.node_states([node], lay, 1)
        assert state.status == "completed" and state.state["storage_error"]["errno"] == "EROFS"
        assert json.loads(memory.read_text())["status"] == "completed"
    finally:
        memory.unlink(missing_ok=True)
        if sup.poll() is None:
            os.killpg(sup.pid, signal.SIGKILL)
