"""The library side of `trainkit logs`, `runs` and `cancel` (trainkit.runs.status / recover),
without click: which log a rank or node names, logs of a closed run read from what was fetched,
ranks and nodes the cluster does not have, an open run's log read from its (local) node, and a
cancel of a run that already ended keeping its true status."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from trainkit.errors import InputError
from trainkit.provision.inventory import HEAD_GROUP, WORKER_GROUP
from trainkit.runs import closing
from trainkit.runs import record as runs
from trainkit.runs import status as run_status
from trainkit.workspace import Workspace


def workspace(tmp_path, nodes: int = 2, per: int = 2) -> Workspace:
    ws = Workspace.for_cluster("demo", tmp_path / "ws")
    ws.runs_dir.mkdir(parents=True)
    hosts = {f"n{i}": {"ansible_connection": "local", "trainkit_node_rank": i} for i in range(nodes)}
    head, workers = dict(list(hosts.items())[:1]), dict(list(hosts.items())[1:])
    inv = {"all": {"children": {HEAD_GROUP: {"hosts": head}, WORKER_GROUP: {"hosts": workers}},
                   "vars": {"trainkit_work_dir": str(tmp_path / "node"), "trainkit_root": str(tmp_path / "root"),
                            "trainkit_nproc_per_node": per}}}
    ws.inventory_yml.write_text(yaml.safe_dump(inv))
    return ws


def a_run(ws: Workspace, status: str, run_id: str = "job-1", **more) -> Path:
    run_dir = ws.runs_dir / run_id
    runs.write_record(run_dir, {"run_id": run_id, "status": status, "attempts": [{}], **more})
    return run_dir


@pytest.mark.parametrize("record,rank,node,name", [
    ({}, None, None, "rank-0.log"), ({}, 3, None, "rank-3.log"), ({}, None, 1, "node-1.log"),
    ({"mode": "command"}, None, None, "node-0.log"), ({"mode": "command"}, 1, None, "node-1.log"),
    ({"mode": "command", "nproc_per_node": 2}, 3, None, "rank-3.log")])
def test_the_log_a_rank_or_node_names(record, rank, node, name):
    assert run_status.log_name(record, rank, node) == name


def test_a_closed_runs_logs_come_from_what_was_fetched_and_a_missing_one_names_those_there(tmp_path):
    ws = workspace(tmp_path)
    run_dir = a_run(ws, "completed")
    (run_dir / "logs").mkdir()
    (run_dir / "logs" / "rank-0.log").write_bytes(b"step 1\n")
    assert b"".join(run_status.read_log(ws, run_dir)) == b"step 1\n"
    with pytest.raises(InputError, match="no rank-1.log") as err:
        list(run_status.read_log(ws, run_dir, rank=1))
    assert "rank-0.log" in err.value.fix


@pytest.mark.parametrize("rank,node,what", [(4, None, "--rank 4: the cluster runs 4 rank"),
                                            (None, 2, "--node 2: the cluster has 2 node")])
def test_an_open_run_refuses_ranks_and_nodes_the_cluster_does_not_have(tmp_path, rank, node, what):
    ws = workspace(tmp_path)
    run_dir = a_run(ws, "running")
    with pytest.raises(InputError, match=what):
        list(run_status.read_log(ws, run_dir, rank=rank, node_index=node))


def test_an_open_runs_log_is_read_from_the_node_that_writes_it(tmp_path):
    ws = workspace(tmp_path, nodes=2, per=1)
    run_dir = a_run(ws, "running")
    logs = tmp_path / "node" / "runs" / "job-1" / "logs"
    logs.mkdir(parents=True)
    (logs / "rank-1.log").write_bytes(b"rank one\n")
    assert b"".join(run_status.read_log(ws, run_dir, rank=1)) == b"rank one\n"


def test_a_run_row_of_a_closed_run_is_its_summary(tmp_path):
    ws = workspace(tmp_path)
    run_dir = a_run(ws, "failed")
    row = run_status.run_row(ws, run_dir)
    assert (row["run_id"], row["status"]) == ("job-1", "failed")


def test_cancel_of_a_run_that_ended_keeps_its_status_and_touches_nothing(tmp_path):
    ws = workspace(tmp_path)
    run_dir = a_run(ws, "completed")
    before = (run_dir / "run.json").read_text()
    assert closing.cancel(None, ws, run_dir, wait_s=1) == ("completed", True, run_dir)
    cancelled = a_run(ws, "cancelled", "job-2")  # cancelled twice: the second says it had ended already
    assert closing.cancel(None, ws, cancelled, wait_s=1) == ("cancelled", True, cancelled)
    assert (run_dir / "run.json").read_text() == before


def test_a_command_runs_rank_is_torchruns_per_rank_file_or_its_nodes_log_and_a_missing_one_is_said(tmp_path):
    """`logs --rank N` of a `command:` run: with torchrun inside, its per-rank file (node N // per,
    local rank N % per, the newest attempt); with one process per node, node-N.log; neither:
    exit 2 naming what is there (it printed nothing and exited 0)."""
    ws = workspace(tmp_path, nodes=2, per=2)
    run_dir = a_run(ws, "running", mode="command", nproc_per_node=2, shared=True)
    logs = tmp_path / "node" / "runs" / "job-1" / "logs"
    old = logs / "torchrun" / "node-1" / "job-1-1_ab" / "attempt_0" / "1"
    new = logs / "torchrun" / "node-1" / "job-1-2_cd" / "attempt_0" / "1"
    for folder, text in ((old, b"attempt 1\n"), (new, b"rank three\n")):
        folder.mkdir(parents=True)
        (folder / "stdout.log").write_bytes(text)
    (logs / "node-0.log").write_bytes(b"node zero\n")
    os.utime(old / "stdout.log", (1, 1))
    assert b"".join(run_status.read_log(ws, run_dir, rank=3)) == b"rank three\n"
    with pytest.raises(InputError, match="no log for rank 2") as err:
        list(run_status.read_log(ws, run_dir, rank=2))
    assert "node-0.log" in err.value.fix

    single = workspace(tmp_path / "one", nodes=2, per=1)
    run_dir = a_run(single, "running", mode="command", nproc_per_node=1, shared=True)
    logs = tmp_path / "one" / "node" / "runs" / "job-1" / "logs"
    logs.mkdir(parents=True)
    (logs / "node-1.log").write_bytes(b"node one\n")
    assert b"".join(run_status.read_log(single, run_dir, rank=1)) == b"node one\n"
    runs.write_record(run_dir, {**runs.read_record(run_dir), "status": "completed"})
    (run_dir / "logs" / "torchrun" / "node-1" / "x_1" / "attempt_0" / "0").mkdir(parents=True)
    (run_dir / "logs" / "torchrun" / "node-1" / "x_1" / "attempt_0" / "0" / "stdout.log").write_bytes(b"fetched\n")
    assert b"".join(run_status.read_log(single, run_dir, rank=1)) == b"fetched\n"


def test_follow_of_a_starting_run_says_which_log_on_which_node_it_waits_for(tmp_path):
    ws = workspace(tmp_path, nodes=1, per=1)
    run_dir = a_run(ws, "running")  # nothing written on the node yet: the run is starting
    said: list[str] = []
    log = run_status.read_log(ws, run_dir, follow=True, poll_s=0, on_wait=said.append)
    assert next(log) == b""
    next(log, None)
    log.close()
    assert len(said) == 1 and "waiting for rank-0.log on node n0" in said[0] and "starting" in said[0]


def test_a_kept_summary_points_at_runs_id_or_says_the_path_is_on_the_nodes(tmp_path):
    run_dir = tmp_path / "runs" / "job-1"
    (run_dir / "weights").mkdir(parents=True)
    (run_dir / "model.onnx").write_text("onnx")
    node = "/srv/trainkit/runs/job-1"
    engine = {"status": "preempted", "onnx": f"{node}/model.onnx", "checkpoint": f"{node}/gone/step-3",
              "checkpoint_dir": "/mnt/nas/checkpoints/job-1", "weights": {"last": "weights/last.pt"}}
    kept = runs.kept_summary(engine, node, run_dir, "cancelled")
    assert kept["status"] == "cancelled" and kept["job_status"] == "preempted"
    assert kept["onnx"] == str(run_dir / "model.onnx")
    assert kept["checkpoint"] is None and kept["checkpoint_dir"] is None  # not fetched: not named as kept
    assert kept["on_nodes"] == {"checkpoint": f"{node}/gone/step-3", "checkpoint_dir": "/mnt/nas/checkpoints/job-1"}
    assert engine["status"] == "preempted"  # the input is left as it was
