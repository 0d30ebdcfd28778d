"""The pure rules of following a run's batch jobs on Slurm (trainkit/runs/slurm_follow.py,
trainkit/cluster/scheduler.py parse_view): how an ended job ends the run or is submitted again
under --recover, what counts as a requeue, and how the scheduler's answer is read. Job states from
squeue(1) / sacct(1) "JOB STATE CODES"."""

from __future__ import annotations

import pytest

from trainkit.cluster.scheduler import parse_view
from trainkit.runs.slurm_follow import REQUEUE_SETTLE_S, end_of_attempt, ended, requeued

LIMITS = (2, 0)   # --max-recoveries 2, --max-restarts-on-errors 0 (the CLI's default for the second)


@pytest.mark.parametrize("state, summary, limits, recoveries, restarts, expected", [
    ("COMPLETED", "completed", None, 0, 0, ("completed", "")),
    ("COMPLETED", "completed", LIMITS, 5, 5, ("completed", "")),
    # the allocation taken (a node failed, preempted, the time limit): resumable; --recover submits again
    ("NODE_FAIL", None, None, 0, 0, ("preempted", "")),
    ("NODE_FAIL", None, LIMITS, 0, 0, None),
    ("PREEMPTED", None, LIMITS, 1, 0, None),
    ("TIMEOUT", None, LIMITS, 0, 0, None),
    ("BOOT_FAIL", None, LIMITS, 0, 0, None),
    ("TIMEOUT", None, LIMITS, 2, 0, ("preempted", "gave up after 2 recoveries")),
    # the engine checkpointed on SIGTERM, the job then ended: a reclaim too
    ("FAILED", "preempted", LIMITS, 0, 0, None),
    # the job's own failure: --max-restarts-on-errors (0) ends it at once
    ("FAILED", None, LIMITS, 0, 0, ("failed", "")),
    ("OUT_OF_MEMORY", None, (2, 1), 0, 0, None),
    ("OUT_OF_MEMORY", None, (2, 1), 0, 1, ("failed", "")),
    ("FAILED", None, None, 0, 0, ("failed", "")),
    # cancelled is the user's word: never submitted again
    ("CANCELLED", "preempted", LIMITS, 0, 0, ("cancelled", "")),
    ("CANCELLED", None, LIMITS, 0, 0, ("cancelled", "")),
    (None, None, None, 0, 0, ("failed", "")),   # the scheduler forgot the job
])
def test_an_ended_job_ends_the_run_or_is_submitted_again(state, summary, limits, recoveries, restarts, expected):
    assert end_of_attempt(state, summary, limits, recoveries, restarts) == expected


@pytest.mark.parametrize("seen, now, expected", [
    (("RUNNING", 0), ("PENDING", 1), True),
    (("PENDING", 0), ("RUNNING", 1), True),        # requeued and started again between two looks
    (("RUNNING", 1), ("RUNNING", 1), False),
    (("", None), ("RUNNING", 3), False),           # the first look: earlier restarts are not new
    (("RUNNING", None), ("REQUEUED", None), True),  # no count known: the state says it
    (("RUNNING", None), ("PENDING", None), True),
    (("PENDING", None), ("RUNNING", None), False),
    (("RUNNING", 2), ("COMPLETED", None), False),
])
def test_a_requeue_is_a_restart_count_that_grew_or_running_back_to_waiting(seen, now, expected):
    assert requeued(seen, now) is expected


@pytest.mark.parametrize("last, now, expected", [
    (None, ("COMPLETED", 0), False),                  # the first look never ends it
    (("RUNNING", 0), ("FAILED", 1), False),           # a self-requeue shows FAILED for a moment
    (("FAILED", 1), ("PENDING", 1), False),           # ... and then waits again
    (("FAILED", 1), ("FAILED", 1), True),             # the same ended state twice: over
    (("FAILED", 0), ("FAILED", 1), False),            # the count grew between them: requeued
    (("CANCELLED", None), ("CANCELLED", None), True),
    ((None, None), (None, None), True),               # the scheduler forgot it, twice
    (("COMPLETING", 0), ("COMPLETING", 0), False),    # live states never end it
])
def test_a_job_has_ended_when_two_looks_in_a_row_show_the_same_ended_state(last, now, expected):
    assert ended(last, now) is expected


def test_an_ended_state_soon_after_a_requeue_is_not_believed_until_it_settles():
    look = ("FAILED", 1)
    assert not ended(look, look, since_requeue_s=REQUEUE_SETTLE_S - 1)
    assert ended(look, look, since_requeue_s=REQUEUE_SETTLE_S)
    assert ended(look, look, since_requeue_s=None)


@pytest.mark.parametrize("text, expected", [
    ("RUNNING\nJobState=RUNNING\nRestarts=0\n", ("RUNNING", 0)),
    ("PENDING\nJobState=PENDING\nRestarts=2\n", ("PENDING", 2)),
    ("COMPLETED\nJobState=COMPLETED\nRestarts=1\n", ("COMPLETED", 1)),   # sacct after squeue forgot it
    ("CANCELLED by 0\n", ("CANCELLED", None)),                           # sacct's words; scontrol forgot it
    ("RUNNING+\n", ("RUNNING", None)),
    ("JobState=NODE_FAIL\nRestarts=1\n", ("NODE_FAIL", 1)),              # no accounting: scontrol alone
    ("", (None, None)),
])
def test_the_scheduler_s_answer_is_read_as_state_and_restarts(text, expected):
    assert parse_view(text) == expected


def test_a_followed_run_that_ends_preempted_exits_75_naming_resume(tmp_path):
    """`train` (a spec given) ends a preempted run with exit 75 and the --resume fix, as on every
    target; `cancel` and `destroy` (no spec) close it quietly. Both close the record."""
    from trainkit.errors import PREEMPTED, TrainkitError
    from trainkit.runs import record as runs
    from trainkit.runs.slurm_follow import _close_as

    run_dir = tmp_path / "digits-1"
    runs.write_record(run_dir, {"run_id": "digits-1", "status": "running", "slurm_job": "9", "created_at": 1.0,
                                "attempts": [{"attempt": 1, "slurm_job": "9"}]})
    with pytest.raises(TrainkitError) as err:
        _close_as(run_dir, "NODE_FAIL", "preempted", "gave up after 2 recoveries", "lab.yaml")
    assert err.value.exit_code == PREEMPTED and "gave up after 2 recoveries" in err.value.message
    assert "trainkit train lab.yaml --resume digits-1" in err.value.fix
    record = runs.read_record(run_dir)
    assert (record["status"], record["slurm_state"]) == ("preempted", "NODE_FAIL")
    assert [e["event"] for e in runs.read_events(run_dir)] == ["ended"]
    assert _close_as(run_dir, "PREEMPTED", "preempted", "", None)["status"] == "preempted"
