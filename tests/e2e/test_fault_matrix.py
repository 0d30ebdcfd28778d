"""The fault matrix of `train --recover` on the `hosts` target, node faults (the bench, and what
every row must end with: faultbench.py):

- worker: every process of the rank-1 machine is killed (sshd too: the machine is gone);
- head: the rank-0 machine is killed; the rendezvous must form around a new head that the
  survivor's /etc/hosts has never heard of (torchrun --local-addr: the head's IP, not its name);
- spare_dies: the worker is killed, and the spare put in its place (hosts.json names it) is
  killed while it is being provisioned: recovery goes on with the next spare;
- two_nodes: both active machines are killed at once; both spares take over;
- during_write: the worker is killed while a checkpoint is in flight (held before its commit by
  the engine's slow-save hook): the run resumes from a complete one, still losing at most one
  interval (the engine commits a save before the next step counts: checkpoint.overlap_steps 1);
- recover.elastic, the head killed (faultbench.check_elastic_row): world 2 -> 1 -> 2;
- recover.elastic with no spare answering, the head killed and then the survivor, once relaunched
  alone and before its first step (issue 39 defect 7): the run ends preempted, exit 75 "no spare".

The controller's faults and the run lock: test_fault_matrix_control.py.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml
from faultbench import CLUSTER, DIGITS, FAST, KILL_AT, Row, build_bench, check_elastic_row, check_row, newest_run
from test_hosts_multinode import _kill_group
from test_recover_hosts import _runs, _wait_step

PREEMPTED = 75   # trainkit.errors.PREEMPTED: no spare to replace a lost node with


@pytest.fixture(scope="module")
def bench(request, tmp_path_factory):
    return build_bench(request, tmp_path_factory)

ROWS = [Row("worker", ("worker",)), Row("head", ("head",)),
        Row("spare_dies", ("worker",), kill_spare=True), Row("two_nodes", ("head", "worker")),
        Row("during_write", ("worker",), during_write=True)]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_fault_matrix_every_row_ends_complete_with_one_interval_lost_and_nothing_left(bench, row):
    check_row(bench, row)


def test_elastic_the_survivor_trains_on_while_the_spare_comes_up_then_the_run_grows_back(bench):
    """recover.elastic (faultbench.check_elastic_row), the head killed: the worker resumes alone at
    world 1 as rank 0 (the rendezvous moves to it), the spare is provisioned meanwhile, the worker
    stops at a checkpoint and both resume. (The worker's loss takes the same path with the ranks
    kept; unit-tested in tests/unit/runs/test_elastic.py.)"""
    check_elastic_row(bench, "head")


def test_elastic_a_survivor_gone_before_its_first_step_with_no_spare_ends_preempted_at_once(bench):
    """Issue 39 defect 7. recover.elastic, both spares down: the head is killed at KILL_AT, its
    replacement fails (no spare answers) while the worker is relaunched alone, and the worker's
    machine is killed once that launch is recorded, before the job's first step. The wait for that
    first step ends on the worker's loss (it waited 300 s blind and then read as `grown`), the
    survivors' attempt is recovered as the loss it is, with both nodes lost and no spare: exit 75
    "no spare", never doctor's exit 12; run.json and events.jsonl say preempted, with no `grown`,
    no `resumed` of a step never made, and no null figure."""
    b = bench
    b.revive_all()
    head, worker = b.active()
    spares = [h.name for h in b.cluster.hosts if h.name not in (head, worker)]
    for name in spares:
        b.cluster.kill(b.host(name))
    before = set(_runs(b.ws))
    config = {**yaml.safe_load(Path(DIGITS[1]).read_text()), "recover": {"elastic": True}}
    (b.base / "digits-elastic-nospare.yaml").write_text(yaml.safe_dump(config))
    proc = b.start("train", *b.common, "--config", str(b.base / "digits-elastic-nospare.yaml"), *DIGITS[2:],
                   *FAST, "--recover")
    try:
        run = newest_run(b, before, proc)
        _wait_step(b.shared / CLUSTER / "runs" / run.name / "metrics.jsonl", KILL_AT, proc)
        b.cluster.kill(b.host(head))
        _wait_launched(run, 2, proc)   # the worker alone; its job still imports torch
        b.cluster.kill(b.host(worker))
        out, _ = proc.communicate(timeout=600)
    finally:
        _kill_group(proc)
    assert proc.returncode == PREEMPTED, out
    assert "no spare host answers on SSH" in out, out
    assert "attempt 2 ended (unreachable) before its first step" in out, out   # not the 300 s timeout
    record = json.loads((run / "run.json").read_text())
    events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    kinds = [e["event"] for e in events]
    metrics = (b.shared / CLUSTER / "runs" / run.name / "metrics.jsonl").read_text().splitlines()
    starts = [i for i, x in enumerate(metrics) if '"kind": "run"' in x]   # the survivor's, if it got that far
    alone = metrics[starts[1]:] if len(starts) > 1 else []
    assert not [x for x in alone if '"kind": "step"' in x], "the survivor made a step"   # the fault is real
    assert record["status"] == "preempted", record
    assert [(a["nodes"], a["outcome"]) for a in record["attempts"]] == [([head, worker], "reclaimed"),
                                                                         ([worker], "reclaimed")], record["attempts"]
    assert all(a["ended_at"] and a["last_step"] > 0 for a in record["attempts"]), record["attempts"]
    assert not {"grown", "resumed", "rejoined", "doctor_failed"} & set(kinds), kinds
    shrunk = [e for e in events if e["event"] == "shrunk"]
    assert [(e["nodes"], e["lost"]) for e in shrunk] == [([worker], [head])], shrunk   # never onto the dead head
    preempted = [e for e in events if e["event"] == "preempted"]
    assert [sorted(e["lost"]) for e in preempted] == [[head], sorted([head, worker])], preempted
    assert [e["nodes"] for e in events if e["event"] == "replacement_failed"] == [[head]], events
    nulls = [e for e in events if None in e.values()]
    assert not nulls, nulls
    b.no_leftovers(run.name)


def _wait_launched(run: Path, attempt: int, proc, timeout_s: float = 300) -> None:
    """Until events.jsonl records attempt `attempt`'s launch (the controller writes it once every
    node's supervisor started)."""
    deadline = time.monotonic() + timeout_s
    path = run / "events.jsonl"
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read()
        for line in path.read_text().splitlines() if path.is_file() else []:
            e = json.loads(line)
            if e["event"] == "launched" and e.get("attempt") == attempt:
                return
        time.sleep(0.05)
    raise AssertionError(f"attempt {attempt} was never launched")
