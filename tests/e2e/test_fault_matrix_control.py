"""The fault matrix of `train --recover` on the `hosts` target, the controller's faults (the bench,
and what every row must end with: faultbench.py):

- bad_spare: the worker is killed and the spare put in its place has a shared folder of its own (its
  NAS mount failed): doctor, run after every replacement, fails it, and the next spare takes over;
- partition: the worker is cut off the network (not killed) past the detection window; a spare
  takes its place, the network heals, and the worker's old job is fenced (hard-stopped) there;
- controller: the controller (`trainkit train --recover`) is SIGKILLed, then the worker; a new
  `train --resume RUN --recover` finds the dead node by probing, stops the survivor's stuck job,
  replaces the node and resumes (and records `resumed`);
- controller_provision: the worker is killed, and the controller is SIGKILLed while it provisions
  the spare it put in; `train --resume RUN --recover` provisions that spare, then resumes;
- controller_stop, controller_backoff: the worker is killed, and the controller is SIGKILLed once
  the attempt has ended (while it stops the survivor's job), or in the backoff before the
  relaunch (the spare already in and provisioned); `train --resume RUN --recover` finishes;
- blip: the worker is cut off for less than the detection window and healed: nothing is
  replaced, the run goes on in its first attempt and ends as the uninterrupted run does;
- a launch that fails on one node is rolled back on the others (no supervisor or torchrun of it
  left, the rendezvous port free) and recorded;
- a second workspace on the same machines is locked out while a run is live, and its destroy
  stops and fetches that run.

The node faults: test_fault_matrix.py.
"""

from __future__ import annotations

import json
import re
import subprocess
import time

import pytest
import yaml
from faultbench import CLUSTER, DIGITS, FAST, KILL_AT, RDZV_PORT, REPO, Row, build_bench, check_row, newest_run
from test_hosts_multinode import SITE_VARS, _kill_group
from test_recover_hosts import _assert_same_weights, _runs, _wait_step

# Shorter than the detection window: a node is lost after two failed polls at least 5 s apart
# (trainkit/runs/recover.py Options.lost_after/lost_after_s), and a poll over the persistent SSH
# connection stalls rather than fails while the link is down (ServerAliveInterval=5 x
# ServerAliveCountMax=2, trainkit/runs/remote.py).
BLIP_S = 3


@pytest.fixture(scope="module")
def bench(request, tmp_path_factory):
    return build_bench(request, tmp_path_factory)


def test_fault_matrix_bad_spare_row_doctor_fails_the_replacement_and_the_next_spare_takes_over(bench):
    check_row(bench, Row("bad_spare", ("worker",), bad_spare=True))


def test_fault_matrix_partition_row_the_healed_worker_is_fenced(bench):
    check_row(bench, Row("partition", ("worker",), partition=True))


def test_a_partition_shorter_than_the_detection_window_replaces_nothing_and_loses_no_step(bench):
    b = bench
    b.revive_all()
    head, worker = b.active()
    before = set(_runs(b.ws))
    proc = b.start("train", *b.common, *DIGITS, *FAST, "--recover")
    try:
        run = newest_run(b, before, proc)
        _wait_step(b.shared / CLUSTER / "runs" / run.name / "metrics.jsonl", KILL_AT, proc)
        b.cluster.partition(b.host(worker))
        time.sleep(BLIP_S)
        b.cluster.partition(b.host(worker), cut=False)
        out, _ = proc.communicate(timeout=600)
    finally:
        _kill_group(proc)
    assert proc.returncode == 0, out
    record = json.loads((run / "run.json").read_text())
    kinds = [json.loads(x)["event"] for x in (run / "events.jsonl").read_text().splitlines()]
    assert record["status"] == "completed" and len(record["attempts"]) == 1, record["attempts"]
    assert not {"unreachable", "replaced", "resumed", "fenced"} & set(kinds), kinds
    assert b.active() == [head, worker]
    _assert_same_weights(b.shared / CLUSTER / "checkpoints", b.ref.name, run.name)
    b.no_leftovers(run.name)


def test_fault_matrix_controller_row_ends_complete_with_one_interval_lost_and_nothing_left(bench):
    check_row(bench, Row("controller", ("worker",), controller=True))


CUSTOM = ["--config", str(REPO / "examples/custom/train.yaml")]


def test_fault_matrix_controller_killed_while_it_provisions_the_spare_row(bench):
    """The new controller finds the spare put in but never provisioned (no `provisioned` event
    after its `replaced`) and provisions it before the relaunch."""
    check_row(bench, Row("controller_provision", ("worker",), controller=True, controller_at="provision"))
    run = _runs(bench.ws)[-1]
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    assert [e.get("by") for e in events if e["event"] == "provisioned"][-1:] == ["resume"], events


@pytest.mark.parametrize("phase", ["stop", "backoff"])
def test_fault_matrix_controller_killed_at_a_later_recovery_phase_row(bench, phase):
    check_row(bench, Row(f"controller_{phase}", ("worker",), controller=True, controller_at=phase))


def test_a_launch_that_fails_on_one_node_is_rolled_back_on_the_others_and_recorded(bench):
    """The worker's node-local launch root is unusable (a file where the code folder goes): the
    launch fails there after the head's supervisor and torchrun started. Nothing of the attempt
    may be left on the head (the rendezvous port free), and run.json/events.jsonl record it."""
    b = bench
    b.revive_all()
    head, worker = b.active()
    blocker = b.host(worker).dir / "local" / "trainkit" / "code"
    blocker.parent.mkdir(parents=True, exist_ok=True)
    saved = blocker.with_name("code.saved")
    if blocker.is_dir():
        blocker.rename(saved)
    blocker.write_text("not a folder\n")
    try:
        failed = b.tk("train", *b.common, *CUSTOM, *FAST)
    finally:
        blocker.unlink()
        if saved.exists():
            saved.rename(blocker)
    assert failed.returncode == 6 and "launch failed on" in failed.stdout and worker in failed.stdout, failed.stdout
    run = _runs(b.ws)[-1]
    record = json.loads((run / "run.json").read_text())
    assert record["status"] == "failed", record
    assert [(a["outcome"], a["failed"]) for a in record["attempts"]] == [("launch_failed", [worker])]
    [ev] = [e for e in map(json.loads, (run / "events.jsonl").read_text().splitlines())
            if e["event"] == "launch_failed"]
    assert ev["failed"] == [worker] and ev["stopped"][head] >= 1, ev
    b.no_leftovers(run.name, timeout_s=5)
    listening = subprocess.run(["ip", "netns", "exec", head, "ss", "-Hltn", f"sport = :{RDZV_PORT}"],
                               capture_output=True, text=True, check=True).stdout
    assert not listening.strip(), listening


def test_a_second_workspace_on_the_same_hosts_is_locked_out_and_its_destroy_stops_and_fetches_the_run(bench):
    """The run lock lives on the nodes (launch.root/run.lock): a second workspace on the same
    machines gets exit 8 while a run of the first is live, and its destroy stops that run and
    fetches it before removing launch.root. Last in the module: the cluster is gone after it."""
    b = bench
    b.revive_all()
    ws2 = b.base / "ws2"
    (ws2 / "group_vars").mkdir(parents=True)
    (ws2 / "group_vars" / "all.yml").write_text(yaml.safe_dump(SITE_VARS))
    spec = yaml.safe_load(b.spec.read_text())            # the same machines, the first's active ones first
    active = b.active()
    spec["hosts"] = sorted(({**h, "spare": h["name"] not in active} for h in spec["hosts"]),
                           key=lambda h: active.index(h["name"]) if h["name"] in active else 9)
    (b.base / "cluster2.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
    other = [str(b.base / "cluster2.yaml"), "--workdir", str(ws2)]
    assert b.tk("apply", *other, "--yes").returncode == 0
    # a run that is still live when the second workspace asks, on any machine: 40 epochs took 12 s on
    # a quiet one and ended before the second train started (exit 0 instead of 8); ws2's destroy stops it
    started = b.tk("train", *b.common, *DIGITS, "epochs=100000", "--detach")
    assert started.returncode == 0, started.stdout
    run_id = re.search(r"^(digits-\d{8}-\d{6}(?:-\d+)?)$", started.stdout, re.MULTILINE).group(1)  # --detach's stdout line
    metrics = b.shared / CLUSTER / "runs" / run_id / "metrics.jsonl"
    deadline = time.monotonic() + 180
    while not (metrics.is_file() and '"kind": "step"' in metrics.read_text()) and time.monotonic() < deadline:
        time.sleep(0.5)

    second = b.tk("train", *other, *DIGITS, *FAST, timeout=180)
    assert second.returncode == 8 and run_id in second.stdout, second.stdout
    assert not (ws2 / "runs").is_dir() or not list((ws2 / "runs").iterdir())   # no run was started

    gone = b.tk("destroy", *other, "--yes")
    assert gone.returncode == 0, gone.stdout
    fetched = ws2 / "runs" / run_id
    assert json.loads((fetched / "run.json").read_text())["status"] == "cancelled"
    assert (fetched / "metrics.jsonl").is_file() and (fetched / "logs").is_dir()
    b.no_leftovers(run_id, timeout_s=30)
