"""How a run ends when a node is gone (issue 39, defect 9): a completed detached run closed by
destroy is `completed`, not `preempted`; Ctrl-C while a run starts says whether it goes on and
how to see and stop it."""

from __future__ import annotations

from pathlib import Path

from trainkit.runs.record import combined_status


def test_a_completed_run_stays_completed_when_a_node_is_gone_afterwards():
    assert combined_status(["completed", "unreachable"]) == "completed"
    assert combined_status(["completed", "lost"]) == "completed"
    assert combined_status(["completed", "completed"]) == "completed"
    # a peer that died mid-run fails the others: not completed
    assert combined_status(["failed", "unreachable"]) == "preempted"
    assert combined_status(["completed", "failed"]) == "failed"
    assert combined_status(["unreachable", "unreachable"]) == "preempted"
    assert combined_status(["completed", "running"]) == "running"


def test_ctrl_c_while_a_run_starts_says_whether_it_goes_on_and_how_to_stop_it():
    from trainkit.runs.start import interrupted_start
    before = interrupted_start("c.yaml", [])
    assert before.exit_code == 130 and "no job of it was launched" in before.message
    during = interrupted_start("c.yaml", [Path("/ws/runs/digits-1")])
    assert "may be running" in during.message and during.exit_code == 130
    assert "trainkit cancel c.yaml digits-1" in during.fix and "--attach digits-1" in during.fix
    assert "trainkit runs c.yaml" in during.fix
