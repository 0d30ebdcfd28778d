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
import yaml

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


def test_destroy_fetches_detached_runs_and_stops_a_running_one_keeping_its_weights(cluster):
    tk, ws = cluster
    done = started(tk, "quick.yaml")
    wait_status(tk, done, "completed")
    going = started(tk, "slow.yaml")
    wait_status(tk, going, "running")

    destroy = tk("destroy", "--yes")
    assert destroy.returncode == 0, destroy.stderr
    assert f"run {going} is still running" in destroy.stderr  # warned before anything went
    assert not (ws / "node").exists()  # the cluster's files are gone ...
    for run_id, status in ((done, "completed"), (going, "cancelled")):  # ... the results are not
        assert (ws / "runs" / run_id / "weights" / "best.pt").read_text() == "w\n"
        assert json.loads((ws / "runs" / run_id / "run.json").read_text())["status"] == status
    events = [json.loads(x) for x in (ws / "runs" / going / "events.jsonl").read_text().splitlines()]
    assert {"event": "cancelled", "by": "destroy"}.items() <= events[-1].items()


def test_a_second_train_or_a_resume_of_a_running_run_is_refused_while_one_runs(cluster):
    tk, ws = cluster
    going = started(tk, "slow.yaml")
    for args in (("--config", "quick.yaml"), ("--resume", going)):
        second = tk("train", *args, "--detach")
        no_traceback(second)
        assert second.returncode == 8 and going in second.stderr and "fix:" in second.stderr, second.stderr
    assert [p.name for p in (ws / "runs").iterdir()] == [going]  # no run folder was made

    cancel = tk("cancel", going)
    assert cancel.returncode == 0 and "cancelled" in cancel.stdout, cancel.stderr
    again = tk("cancel", going)  # twice: says so, changes nothing
    assert again.returncode == 0 and "already cancelled" in again.stdout
    events = (ws / "runs" / going / "events.jsonl").read_text().count('"cancelled"')
    assert events == 1

    resumed = tk("train", "--resume", going, "--detach")  # its own config (slow.yaml), no --config
    assert resumed.returncode == 0 and resumed.stdout.strip() == going, resumed.stderr
    wait_status(tk, going, "running")
    assert tk("cancel", going).returncode == 0


def test_cancel_and_resume_of_a_completed_run_keep_it_completed(cluster):
    tk, ws = cluster
    done = started(tk, "quick.yaml")
    wait_status(tk, done, "completed")
    cancel = tk("cancel", done)
    assert cancel.returncode == 0 and f"run {done} already completed" in cancel.stdout, cancel.stdout
    record = json.loads((ws / "runs" / done / "run.json").read_text())
    assert record["status"] == "completed"  # not rewritten as cancelled; the results were fetched
    assert (ws / "runs" / done / "weights" / "best.pt").is_file()
    resume = tk("train", "--resume", done)
    no_traceback(resume)
    assert resume.returncode == 2 and "nothing to resume" in resume.stderr
    attach = tk("train", "--attach", done)
    assert attach.returncode == 2 and "nothing to attach" in attach.stderr


def test_ctrl_c_while_attached_leaves_the_run_going_and_says_how_to_come_back(cluster, tmp_path):
    tk, ws = cluster
    proc = subprocess.Popen([str(TRAINKIT), "train", "spec.yaml", "--workdir", str(ws), "--config", "slow.yaml"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        for _ in range(120):
            run_ids = [p.name for p in (ws / "runs").glob("*")] if (ws / "runs").is_dir() else []
            if run_ids and json.loads(tk("runs", "--json").stdout)[0]["status"] == "running":
                break
            time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the terminal signals the foreground group
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    (run_id,) = run_ids
    assert proc.returncode == 130 and "keeps running" in err and f"--attach {run_id}" in err, err
    assert "Traceback" not in err
    wait_status(tk, run_id, "running")  # still going, detached
    assert tk("cancel", run_id).returncode == 0


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


@pytest.mark.parametrize("text", ["all: [\n", "all: {children: {head: {hosts: {}}}}\n"])
def test_an_inventory_edited_into_something_else_is_named_and_apply_rewrites_it(cluster, text):
    tk, ws = cluster
    going = started(tk, "slow.yaml")
    (ws / "inventory.yml").write_text(text)
    for args in (("runs",), ("logs", going), ("cancel", going), ("train", "--config", "quick.yaml"),
                 ("destroy", "--yes"), ("top", "--once")):
        proc = tk(*args)
        no_traceback(proc)
        assert proc.returncode == 2 and "inventory.yml: not an inventory" in proc.stderr, (args, proc.stderr)
        assert "trainkit apply" in proc.stderr
    assert tk("apply", "--yes", "--no-provision").returncode == 0
    assert tk("cancel", going).returncode == 0  # the run was never lost track of


def test_a_job_whose_supervisor_was_killed_still_counts_as_running_and_cancel_stops_it(cluster):
    tk, ws = cluster
    going = started(tk, "slow.yaml")
    wait_status(tk, going, "running")
    (state_file,) = ws.glob(f"node/work/runs/{going}/nodes/node-0/attempt-1.json")
    state = json.loads(state_file.read_text())
    os.kill(state["supervisor_pid"], signal.SIGKILL)  # the OOM killer, a careless kill
    time.sleep(0.5)
    os.killpg(state["pid"], 0)  # its job goes on, holding the node
    wait_status(tk, going, "running")
    assert tk("train", "--config", "quick.yaml", "--detach").returncode == 8  # not a free cluster
    cancel = tk("cancel", going, "--wait", "20")
    assert cancel.returncode == 0 and "cancelled" in cancel.stdout, cancel.stdout + cancel.stderr
    for _ in range(40):  # the job's group got the SIGTERM
        try:
            os.killpg(state["pid"], 0)
        except ProcessLookupError:
            break
        time.sleep(0.25)
    else:
        raise AssertionError("the job outlived cancel")


def test_ctrl_c_during_ansible_says_interrupted_not_failed(tmp_path):
    (tmp_path / "spec.yaml").write_text(SPEC)
    proc = subprocess.Popen([str(TRAINKIT), "apply", "spec.yaml", "--workdir", str(tmp_path / "ws"), "--yes"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        seen = ""
        while "Gathering Facts" not in seen:  # ansible-playbook is running its first task
            line = proc.stderr.readline()
            assert line, seen
            seen += line
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, seen + err
    assert "site.yml was interrupted" in err and "run the command again" in err and "Traceback" not in err


def test_destroy_twice_says_the_second_time_there_was_nothing_to_destroy(cluster):
    tk, ws = cluster
    first = tk("destroy", "--yes")
    assert first.returncode == 0 and "destroyed" in first.stdout, first.stderr
    again = tk("destroy", "--yes")
    assert again.returncode == 0 and "nothing to destroy" in again.stdout and "destroyed" not in again.stdout


def test_destroy_with_a_run_on_an_unreachable_node_stops_unless_yes_says_go(cluster):
    tk, ws = cluster
    going = started(tk, "slow.yaml")
    inventory = yaml.safe_load((ws / "inventory.yml").read_text())
    (name, host), = inventory["all"]["children"]["head"]["hosts"].items()
    host.update(ansible_connection="ssh", ansible_host="127.0.0.1", ansible_port=1, ansible_user="nobody")
    (ws / "inventory.yml").write_text(yaml.safe_dump(inventory))  # the head node is gone (port 1: refused)

    asked = subprocess.run([str(TRAINKIT), "destroy", "spec.yaml", "--workdir", str(ws)], input="ops-local\n",
                           cwd=ws.parent, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert asked.returncode == 7 and "cannot be reached, so nothing was destroyed" in asked.stderr, asked.stderr
    assert (ws / "node").is_dir() and json.loads((ws / "runs" / going / "run.json").read_text())["status"] == "running"

    ci = tk("destroy", "--yes")  # CI: the cluster must not keep billing; say what is lost
    assert ci.returncode == 0 and f"run {going}: {name} cannot be reached" in ci.stderr, ci.stderr
    assert json.loads((ws / "runs" / going / "run.json").read_text())["status"] == "unreachable"


def test_logs_of_an_ended_run_come_from_its_fetched_folder_and_follow_ends_when_the_nodes_lose_it(cluster):
    tk, ws = cluster
    done = started(tk, "quick.yaml")
    wait_status(tk, done, "completed")
    assert tk("cancel", done).returncode == 0  # fetches it (already completed)
    assert tk("destroy", "--yes").returncode == 0
    fetched = tk("logs", done)  # the cluster is gone; the logs are not
    assert fetched.returncode == 0 and "node 0 attempt 1 starting" in fetched.stdout, fetched.stderr
    missing = tk("logs", done, "--node", "3")
    assert missing.returncode == 2 and "node-0.log" in missing.stderr

    assert tk("apply", "--yes", "--no-provision").returncode == 0
    going = started(tk, "slow.yaml")
    wait_status(tk, going, "running")
    (state_file,) = ws.glob(f"node/work/runs/{going}/nodes/node-0/attempt-1.json")
    state = json.loads(state_file.read_text())
    os.killpg(state["pid"], signal.SIGKILL)  # the node rebooted: supervisor and job gone, no word
    os.kill(state["supervisor_pid"], signal.SIGKILL)
    follow = tk("logs", going, "--follow", timeout=60)  # ends instead of waiting forever
    assert follow.returncode == 0 and "node 0 attempt 1 starting" in follow.stdout


def _state(ws: Path, run_id: str) -> dict:
    (state_file,) = ws.glob(f"node/work/runs/{run_id}/nodes/node-0/attempt-1.json")
    return json.loads(state_file.read_text())


def test_a_command_run_ends_with_a_status_in_its_summary_and_rank_beside_world_size(cluster, tmp_path):
    tk, ws = cluster
    (tmp_path / "rank.yaml").write_text('name: rank\ncommand: |\n  echo "$RANK/$WORLD_SIZE" > "$TRAINKIT_RUN_DIR/rank.txt"\n')
    proc = tk("train", "--config", "rank.yaml")
    assert proc.returncode == 0, proc.stderr
    (run,) = (ws / "runs").glob("rank-*")
    assert json.loads((run / "summary.json").read_text())["status"] == "completed"
    assert (run / "rank.txt").read_text().strip() == "0/1"


def test_a_run_whose_supervisor_was_killed_before_its_job_completed_reads_completed(cluster, tmp_path):
    tk, ws = cluster
    (tmp_path / "short.yaml").write_text(JOB % 4)
    going = started(tk, "short.yaml")
    wait_status(tk, going, "running")
    os.kill(_state(ws, going)["supervisor_pid"], signal.SIGKILL)   # the job completes unsupervised
    attach = tk("train", "--attach", going, "--poll", "1")
    no_traceback(attach)
    assert attach.returncode == 0, attach.stdout + attach.stderr
    assert json.loads((ws / "runs" / going / "run.json").read_text())["status"] == "completed"


def test_recovery_with_every_node_lost_closes_the_run_with_the_documented_exit(cluster):
    """The only node (local: nothing replaces it) loses its supervisor and job: exit 75, a closed
    record, not `internal error: ValueError: max_workers must be greater than 0`."""
    tk, ws = cluster
    proc = subprocess.Popen([str(TRAINKIT), "train", "spec.yaml", "--workdir", str(ws), "--config", "slow.yaml",
                             "--recover", "--poll", "1", "--backoff", "1"], cwd=ws.parent, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        for _ in range(120):
            runs = list((ws / "runs").glob("job-*"))
            if runs and list(ws.glob(f"node/work/runs/{runs[0].name}/nodes/node-0/attempt-1.json")) and \
                    _state(ws, runs[0].name).get("status") == "running":
                break
            time.sleep(0.5)
        state = _state(ws, runs[0].name)
        os.kill(state["supervisor_pid"], signal.SIGKILL)   # the machine's processes are gone
        os.killpg(state["pid"], signal.SIGKILL)
        out, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert "Traceback" not in err and "internal error" not in err, err
    assert proc.returncode == 75 and "nothing to replace it with" in err, err
    assert json.loads((runs[0] / "run.json").read_text())["status"] == "preempted"


# A job that leaves what the engine leaves on SIGTERM: model.onnx in its run folder and a summary.json
# saying "preempted" with node paths (the engine's own summary of a stop by SIGTERM).
ENGINE_LIKE = """name: enginelike
command: |
  stop() {
    echo onnx > "$TRAINKIT_RUN_DIR/model.onnx"
    printf '{"status": "preempted", "onnx": "%s", "checkpoint_dir": "%s"}' \\
      "$TRAINKIT_RUN_DIR/model.onnx" "$TRAINKIT_CHECKPOINT_DIR" > "$TRAINKIT_RUN_DIR/summary.json"
    exit 75
  }
  trap stop TERM
  sleep 300 & wait
"""


def test_a_cancelled_runs_summary_says_cancelled_as_runs_does_and_its_paths_point_into_runs_id(cluster, tmp_path):
    tk, ws = cluster
    (tmp_path / "enginelike.yaml").write_text(ENGINE_LIKE)
    going = started(tk, "enginelike.yaml")
    wait_status(tk, going, "running")
    assert tk("cancel", going).returncode == 0
    summary = json.loads((ws / "runs" / going / "summary.json").read_text())
    rows = {r["run_id"]: r["status"] for r in json.loads(tk("runs", "--json").stdout)}
    assert summary["status"] == rows[going] == "cancelled" and summary["job_status"] == "preempted"
    assert tk("destroy", "--yes").returncode == 0  # the node folders go; what summary.json names stays
    assert Path(summary["onnx"]) == ws / "runs" / going / "model.onnx" and Path(summary["onnx"]).is_file()
    kept = Path(summary["checkpoint_dir"])  # on `local` the checkpoints sit in the run folder: fetched
    assert kept.is_relative_to(ws / "runs" / going) and kept.is_dir()
