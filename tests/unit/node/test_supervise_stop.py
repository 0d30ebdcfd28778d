"""The node supervisor and the controller's view of it, with real processes on this machine (a
`local` node: bash, no ssh): a hard stop kills every process of a job, also those in sessions of
their own (torchrun starts its workers so); a job that ended while its supervisor was dead is
read from its own end record; no nodes at all is no work, not a ValueError; RANK for one process.
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

from trainkit.provision.node import Node
from trainkit.runs import launch, remote
from trainkit.runs.record import load_job

REPO = Path(__file__).resolve().parents[3]
SUPERVISOR = REPO / "trainkit" / "node" / "supervise.py"
# The job: a child in a new session (like torchrun's workers), and an orphan in another session
# whose parent has exited; each writes its pid, then everything sleeps.
JOB = r"""
setsid bash -c 'echo $$ > "$1/worker.pid"; exec sleep 300' _ "$D" &
( setsid bash -c 'echo $$ > "$1/orphan.pid"; exec sleep 300' _ "$D" & ) 
echo $$ > "$D/main.pid"
sleep 300
"""


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie (a zombie has ended; init reaps it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def _wait(cond, timeout_s: float = 20) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError("timed out")


def _layout(tmp_path: Path) -> tuple[Node, remote.Layout]:
    node = Node("local", 0, local=True, python=sys.executable)
    lay = remote.Layout(work=str(tmp_path / "work"), root=str(tmp_path / "root"), run_id="r1")
    Path(lay.node_dir(0)).mkdir(parents=True)
    for name in ("supervise.py", *launch.NODE_MODULES):   # as a launch copies them
        (Path(lay.node_dir(0)) / name).write_bytes(SUPERVISOR.with_name(name).read_bytes())
    return node, lay


@pytest.mark.parametrize("supervisor_killed_first", [False, True])
def test_a_hard_stop_kills_every_process_of_the_job_also_in_other_sessions(tmp_path, supervisor_killed_first):
    node, lay = _layout(tmp_path)
    state_file = Path(lay.state_file(0, 1))
    sup = subprocess.Popen([sys.executable, str(SUPERVISOR), str(state_file), "--", "bash", "-c", JOB],
                           env={**os.environ, "D": str(tmp_path)}, start_new_session=True)
    names = ("main", "worker", "orphan")
    _wait(lambda: all((tmp_path / f"{n}.pid").is_file() and (tmp_path / f"{n}.pid").read_text().strip()
                      for n in names))
    pids = {n: int((tmp_path / f"{n}.pid").read_text()) for n in names}
    # the supervisor records "starting" with pid null, then the job's pid: on a busy machine the
    # job's children can write their files before that second record
    _wait(lambda: json.loads(state_file.read_text())["pid"] is not None)
    job = json.loads(state_file.read_text())["pid"]
    assert os.getsid(pids["worker"]) != os.getsid(job) != os.getsid(pids["orphan"])  # sessions of their own
    _wait(lambda: {p for p, _ in json.loads(state_file.read_text())["tree"]} >= set(pids.values()))
    if supervisor_killed_first:   # the OOM killer took the supervisor; the job runs on without it
        os.kill(sup.pid, signal.SIGKILL)
        sup.wait()
    remote.signal_nodes([node], lay, 1, "KILL")
    sup.wait(timeout=10)
    _wait(lambda: not any(_alive(p) for p in [*pids.values(), job]), timeout_s=5)


def test_a_job_that_ends_when_its_supervisor_is_gone_is_read_from_its_own_end_record(tmp_path):
    """launch.sh records the job's exit status; a dead supervisor is no longer 'lost' then."""
    node, lay = _layout(tmp_path)
    (tmp_path / "job.yaml").write_text('command: |\n  sleep "$SLEEP"\nenv: {SLEEP: "2"}\n')
    job = load_job(tmp_path / "job.yaml")
    nd = Path(lay.node_dir(0))
    for name, data in launch.node_files(job, node, [node], lay, 1).items():
        (nd / name).write_bytes(data)
    Path(lay.run_dir, "logs").mkdir(parents=True)
    state_file = Path(lay.state_file(0, 1))
    sup = subprocess.Popen([sys.executable, str(SUPERVISOR), str(state_file), "--status-file",
                            str(nd / "status"), "--", "bash", str(nd / "launch.sh")], start_new_session=True)
    _wait(lambda: state_file.is_file() and json.loads(state_file.read_text())["status"] == "running")
    os.kill(sup.pid, signal.SIGKILL)   # after this the job completes, unsupervised
    sup.wait()
    [state] = remote.node_states([node], lay, 1)
    assert state.status == "running" and not state.alive
    _wait(lambda: Path(lay.exit_file(0, 1)).is_file())
    [state] = remote.node_states([node], lay, 1)
    assert state.status == "completed", (state, Path(lay.exit_file(0, 1)).read_text())


@pytest.mark.parametrize("record, status", [
    ("exit=0 status=", "completed"), ("exit=75 status=", "preempted"), ("exit=1 status=preempted", "preempted"),
    ("exit=1 status=", "failed"), ('{"status": "completed", "steps": 3}', "completed"), (None, "lost"),
    ("garbage", "lost")])
def test_the_end_record_of_a_job_means_its_status(record, status):
    assert remote.ended_status(record) == status


def test_no_nodes_is_no_work_not_a_pool_of_zero_workers(tmp_path):
    _, lay = _layout(tmp_path)
    assert remote.node_states([], lay, 1) == []
    assert remote.signal_nodes([], lay, 1, "TERM") is None
    assert remote.signal_nodes([], lay, 1, "KILL") is None


def test_a_single_process_command_job_gets_rank_with_world_size(tmp_path):
    (tmp_path / "job.yaml").write_text("command: echo hi\n")
    job = load_job(tmp_path / "job.yaml")
    lay = remote.Layout(work="/w", root="/r", run_id="r1")
    one = Node("n0", 0, nproc=1)
    env = launch.job_env(job, one, [one], lay, 1)
    assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"]) == ("0", "1", "0")
    two = [Node("n0", 0), Node("n1", 1)]
    assert launch.job_env(job, two[1], two, lay, 1)["RANK"] == "1"   # one process per node
    many = Node("n0", 0, nproc=4)
    assert "RANK" not in launch.job_env(job, many, [many], lay, 1)   # torchrun sets it per worker


def test_the_supervisor_is_started_with_the_rooms_token_endpoint_beside_the_notice_url():
    from trainkit import clouds

    aws = clouds.get("aws")
    node = Node("n0", 0, python="/usr/bin/python3")
    lay = remote.Layout(work="/w", root="/r", run_id="r1")
    script = launch.start_script(node, lay, 1, aws.spot_notice_url, 5.0, True, aws.spot_notice_token)
    for arg in ("--notice-url", aws.spot_notice_url, "--notice-token-url", aws.spot_notice_token.url,
                "--notice-ttl-header", aws.spot_notice_token.ttl_header, "--notice-token-header"):
        assert arg in script
    assert "--notice-token-url" not in launch.start_script(node, lay, 1, "http://x/n", 5.0, True)


@pytest.mark.parametrize("printed, status", [
    ("torch.distributed.elastic.rendezvous.api.RendezvousTimeoutError: no peers", "preempted"),
    ("RendezvousConnectionError: The connection to the C10d store has failed", "preempted"),
    ("ValueError: the user's own bug", "failed")])
def test_a_rendezvous_that_failed_is_a_preemption_not_the_users_code_failing(tmp_path, printed, status):
    """torchrun's agent exits 1 when its rendezvous fails (the head or a peer is gone): launch.sh
    records `status=rendezvous` and the supervisor and the controller read it as preempted."""
    node, lay = _layout(tmp_path)
    (tmp_path / "job.yaml").write_text(f"command: |\n  echo {printed!r}\n  exit 1\n")
    job = load_job(tmp_path / "job.yaml")
    nd = Path(lay.node_dir(0))
    for name, data in launch.node_files(job, node, [node], lay, 1).items():
        (nd / name).write_bytes(data)
    Path(lay.run_dir, "logs").mkdir(parents=True)
    # an earlier attempt's rendezvous error in the same log does not count for this one
    Path(lay.run_dir, "logs", "node-0.log").write_text("RendezvousTimeoutError: attempt 0\n")
    state_file = Path(lay.state_file(0, 1))
    rc = subprocess.run([sys.executable, str(SUPERVISOR), str(state_file), "--status-file", str(nd / "status"),
                         "--exit-file", lay.exit_file(0, 1), "--", "bash", str(nd / "launch.sh")],
                        timeout=60).returncode
    assert rc == 1
    assert json.loads(state_file.read_text())["status"] == status
    assert remote.ended_status(Path(lay.exit_file(0, 1)).read_text()) == status


@pytest.mark.parametrize("by_trainkit, status", [(False, "preempted"), (True, "cancelled")])
def test_a_sigterm_to_the_supervisor_is_a_preemption_unless_trainkit_sent_it(tmp_path, by_trainkit, status):
    """A machine that goes down (a reclaim without notice) SIGTERMs every process, the supervisor
    too: the job (a script with no handler: it dies of the signal) is then preempted, to be
    resumed, not "cancelled" (which ends a --recover loop). trainkit's own stop
    (remote.signal_nodes: cancel, stopping survivors) is still a cancel."""
    node, lay = _layout(tmp_path)
    (tmp_path / "job.yaml").write_text("command: exec sleep 300\n")
    job = load_job(tmp_path / "job.yaml")
    nd = Path(lay.node_dir(0))
    for name, data in launch.node_files(job, node, [node], lay, 1).items():
        (nd / name).write_bytes(data)
    Path(lay.run_dir, "logs").mkdir(parents=True)
    state_file = Path(lay.state_file(0, 1))
    sup = subprocess.Popen([sys.executable, str(SUPERVISOR), str(state_file), "--status-file", str(nd / "status"),
                            "--exit-file", lay.exit_file(0, 1), "--", "bash", str(nd / "launch.sh")],
                           start_new_session=True)
    _wait(lambda: state_file.is_file() and json.loads(state_file.read_text())["status"] == "running")
    if by_trainkit:
        remote.signal_nodes([node], lay, 1, "TERM")
    else:
        os.kill(sup.pid, signal.SIGTERM)
    assert sup.wait(timeout=30) != 0
    assert json.loads(state_file.read_text())["status"] == status
    [state] = remote.node_states([node], lay, 1)
    assert state.status == status
