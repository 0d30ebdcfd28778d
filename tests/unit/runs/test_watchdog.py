"""The watchdog's window and judgement, the attempt's status from its nodes' ends, one clock for
the first resumed step, and where storage faults are read from (pure functions, issue 39)."""

from __future__ import annotations

import pytest

from trainkit.cluster import doctor_verdict as v
from trainkit.errors import InputError
from trainkit.node import supervise
from trainkit.runs import remote, resume_wait, storage_faults, watchdog
from trainkit.runs.record import load_job


def _state(name: str, step: int | None, at: float, uptime: float, phase: str = "train", step_s: float | None = 0.5,
           status: str = "running") -> remote.NodeState:
    progress = {"step": step, "phase": phase, "at": at, "first_at": at, "step_s": step_s} if step is not None else None
    return remote.NodeState(name, 0, True, {"status": status, **({"progress": progress} if progress else {})},
                            alive=True, job_alive=True, uptime=uptime)


def test_the_window_follows_the_step_time_within_the_anchors_bounds():
    assert watchdog.window_s(0.01, "train") == watchdog.HANG_MIN_S           # fast steps: the floor
    assert watchdog.window_s(10.0, "train") == 50 * 10.0                     # STEPS_WINDOW x the step
    assert watchdog.window_s(600.0, "train") == watchdog.HANG_MAX_S == 1800  # PAI-DLC's 1800 s at most
    assert watchdog.window_s(None, "train") == watchdog.HANG_MIN_S           # no step time measured yet
    assert watchdog.window_s(0.01, "save") == watchdog.window_s(0.01, "eval") == watchdog.HANG_MAX_S
    assert watchdog.window_s(0.01, "train", fixed=20) == 20 and watchdog.window_s(5, "train", fixed=0) is None
    assert watchdog.window_s(0.01, "eval", fixed=20) == 120      # a save or evaluation: 6 x longer
    assert watchdog.window_s(0.01, "save", fixed=600) == 1800 and watchdog.window_s(0.01, "save", fixed=3600) == 3600


def test_a_node_is_hung_only_past_its_window_on_its_own_clock():
    # the ages are node uptime minus the step's time on that node: wall clocks never enter
    fresh, stuck = _state("h1", 40, at=1000.0, uptime=1100.0), _state("h2", 40, at=1000.0, uptime=1000.0 + 301)
    assert [s.node for s in watchdog.stalls([fresh, stuck])] == ["h2"]
    saving = _state("h3", 40, at=1000.0, uptime=1000.0 + 1000, phase="save")       # under 1800 s: still saving
    assert watchdog.stalls([saving]) == []
    assert watchdog.stalls([_state("h4", 40, at=0.0, uptime=25.0)], fixed=20)[0].as_dict()["age_s"] == 25.0


def test_no_step_yet_or_a_job_that_ended_is_never_hung():
    starting = _state("h1", None, at=0, uptime=10_000)
    ended = _state("h2", 7, at=0.0, uptime=10_000.0, status="failed")
    assert watchdog.stalls([starting, ended]) == []
    assert watchdog.last_step([starting, ended, remote.NodeState("h3", 2, False)]) == 7


def test_a_clock_that_ran_backwards_reads_as_no_age_not_a_negative_one():
    assert _state("h1", 3, at=500.0, uptime=400.0).progress_age() == 0.0


def test_the_controller_s_own_stop_never_makes_an_attempt_cancelled():
    # the worker failed by itself; the head, stuck in a collective, was stopped by the controller
    assert watchdog.ended_as({"worker": "failed"}, noticed=False) == "failed"
    assert watchdog.ended_as({"head": "cancelled", "worker": "failed"}, noticed=False) == "cancelled"  # a user's
    assert watchdog.ended_as({"a": "completed", "b": "completed"}, noticed=False) == "completed"
    assert watchdog.ended_as({"a": "failed"}, noticed=True) == "preempted"


def test_the_first_step_is_placed_on_the_controller_s_clock_never_before_the_launch():
    # a head 120 s behind the controller: only differences on each clock are used
    assert resume_wait.placed(controller_now=5000.0, node_uptime=300.0, node_first_at=290.0, began=4900.0) == 4990.0
    assert resume_wait.placed(5000.0, 300.0, 100.0, began=4950.0) == 4950.0   # older than the launch: the launch
    assert resume_wait.placed(5000.0, 100.0, 300.0, began=4000.0) == 5000.0   # a node clock that went back


def test_the_node_state_script_output_is_read_with_the_node_s_uptime():
    text = '{"status": "running", "progress": {"step": 4, "at": 10.5}}\n\nalive\njob\n12.25\n'
    s = remote.parse_node_state("h1", 0, text)
    assert s.status == "running" and s.uptime == 12.25 and s.progress_age() == pytest.approx(1.75)
    assert remote.parse_node_state("h1", 0, "garbage\n\ndead\nnojob\n-\n").state == {}


def test_the_supervisor_and_the_controller_name_the_memory_copy_alike():
    path = "/opt/trainkit/work/runs/r1/nodes/node-0/attempt-2.json"
    assert supervise.memory_state_path(path) == remote.memory_state_path(path)
    assert supervise.memory_state_path(path) != supervise.memory_state_path(path.replace("-2", "-3"))


def test_the_engine_s_own_message_is_the_storage_fault_reported():
    logs = {"h1": "OSError: [Errno 28] No space left on device: '/shared/x'\n",
            "h2": "error: checkpoint.dir: writing /shared/ckpt/step-15 failed (...); 0.0 MiB free there\n"}
    found = storage_faults.from_logs(logs)
    assert found["node"] == "h2" and found["errno"] == "ENOSPC" and found["path"] == "/shared/ckpt/step-15"
    assert storage_faults.from_logs({"h1": "OSError: [Errno 30] Read-only file system: '/data/a'"})["errno"] == "EROFS"
    assert storage_faults.from_logs({"h1": "RuntimeError: NCCL timeout\n"}) is None
    # the engine writes the same line for a save that failed because a peer was lost: room left, no fault
    peer_lost = "checkpoint.dir: writing /s/step-15 failed (RuntimeError: gloo ... Connection reset by peer); " \
                "212.3 MiB free there"
    assert storage_faults.from_logs({"h1": peer_lost}) is None
    torch_s_own = "writing /s/step-15 failed (KeyError); 0.0 MiB free there, so not for want of room"
    assert storage_faults.from_logs({"h1": torch_s_own}) is None


def test_storage_messages_say_read_only_or_full_with_their_own_fix():
    ro, ro_fix = storage_faults.message("r1", {"node": "h1", "errno": "EROFS", "path": "/data"}, "c.yaml")
    full, full_fix = storage_faults.message("r1", {"node": "h1", "errno": "ENOSPC", "path": "/shared"}, "c.yaml")
    assert "read-only" in ro and "remount" in ro_fix and "free space" not in ro_fix
    assert "no space left" in full and "free space" in full_fix and "--resume r1" in full_fix
    assert "no node was replaced" in ro and "no node was replaced" in full


def test_a_supervisor_that_could_not_write_its_state_reports_the_fault():
    s = remote.NodeState("h1", 0, True, {"status": "failed", "storage_error": {"errno": "ENOSPC", "path": "/s/a.json",
                                                                               "message": "No space"}})
    assert storage_faults.from_states([remote.NodeState("h0", 1, False), s])["node"] == "h1"


def _report(*nodes: tuple[str, list[tuple[str, str, str]]]) -> dict:
    return {"nodes": [{"node": n, "checks": [{"name": a, "status": b, "detail": c} for a, b, c in checks]}
                      for n, checks in nodes]}


def test_doctor_names_shared_storage_failures_that_no_replacement_cures():
    low = _report(("h1", [("shared_disk", v.FAILED, "/mnt/shared: 3.0 GiB free < 5 GiB")]),
                  ("h2", [("shared_disk", v.FAILED, "/mnt/shared: 3.0 GiB free < 5 GiB")]))
    assert len(v.storage_failures(low)) == 2
    own_small_mount = _report(("h1", [("shared_disk", v.OK, "/mnt/shared: 90 GiB free")]),
                              ("h3", [("shared_disk", v.FAILED, "/mnt/shared: 0.0 GiB free < 5 GiB")]))
    assert v.storage_failures(own_small_mount) == []   # a spare whose NAS mount failed: another spare cures it
    full = "shared mount /mnt/shared: not writable: No space left on device"
    everywhere = _report(("h1", [("shared", v.FAILED, full)]), ("h2", [("shared", v.FAILED, full)]))
    assert len(v.storage_failures(everywhere)) == 2
    one_bad_mount = _report(("h1", [("shared", v.FAILED, full)]), ("h2", [("shared", v.OK, "ok")]))
    assert v.storage_failures(one_bad_mount) == []   # its own mount: a spare cures it
    unseen = _report(("h1", [("shared", v.FAILED, "files written by h2 are not visible here")]),
                     ("h2", [("shared", v.FAILED, "files written by h1 are not visible here")]))
    assert v.storage_failures(unseen) == []


@pytest.mark.parametrize("value, ok", [(0, True), (30, True), (5, True), (4.9, False), (-1, False), ("10", False),
                                       (True, False), (100_000, False)])
def test_recover_hang_after_s_is_read_or_refused_naming_the_field(tmp_path, value, ok):
    cfg = tmp_path / "t.yaml"
    cfg.write_text(f"recover: {{hang_after_s: {value!r}}}\n" if not isinstance(value, str)
                   else f"recover: {{hang_after_s: '{value}'}}\n")
    if ok:
        assert load_job(cfg).hang_after_s == float(value)
    else:
        with pytest.raises(InputError, match="recover.hang_after_s"):
            load_job(cfg)
    plain = tmp_path / "plain.yaml"
    plain.write_text("epochs: 1\n")
    assert load_job(plain).hang_after_s is None   # the default: derived from the step time


def test_doctor_s_gate_refuses_storage_wide_failures_with_exit_14_and_prints_warnings():
    from trainkit.cluster import doctor
    from trainkit.errors import STORAGE, TrainkitError

    low = _report(("h1", [("shared_disk", v.FAILED, "/mnt/shared: 3.0 GiB free < 5 GiB")]))
    with pytest.raises(TrainkitError) as err:
        doctor._storage_refuses(low)
    assert err.value.exit_code == STORAGE and "none was replaced" in err.value.message
    doctor._storage_refuses(_report(("h1", [("gpu", v.FAILED, "1 of 2 GPUs")])))   # a node's own fault: no error
    lines: list[str] = []
    skewed = {"nodes": [{"node": "h1", "verdict": v.OK,
                         "checks": [{"name": "clock", "status": v.WARN, "detail": "clock behind by at least 120.00s"}]}],
              "failed": []}
    doctor._judge(skewed, lines.append)
    assert lines == ["warning: node h1: clock: clock behind by at least 120.00s"]


def test_a_node_that_does_not_answer_with_no_spare_left_is_the_replacement_s_error_not_doctor_s():
    from trainkit.cluster import doctor

    gone = {"nodes": [{"node": "h2", "verdict": v.FAILED,
                       "checks": [{"name": "reach", "status": v.FAILED, "detail": "probe did not run"}]}]}
    sick = {"nodes": [{"node": "h2", "verdict": v.FAILED,
                       "checks": [{"name": "gpu", "status": v.FAILED, "detail": "1 of 2 GPUs"}]}]}
    assert doctor._all_unreachable(gone) and not doctor._all_unreachable(sick)
