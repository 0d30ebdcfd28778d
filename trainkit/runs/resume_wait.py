"""Waiting for a relaunched attempt's first step, on one clock.

Nodes and the controller have clocks of their own, and they disagree (a head 120 s behind is
common enough that doctor warns past 1 s). So no wall time a node wrote is compared with the
controller's: the first step is seen

- in the head supervisor's `progress` for THIS attempt (its own state file, attempt-N.json):
  `first_at` is on the head's CLOCK_BOOTTIME and the same read gives the head's uptime, so the
  step's age is a difference on one clock, and its time on the controller's clock is the
  controller's now minus that age (never negative, never before the attempt's launch);
- else (a `command:` job writes no progress file) as a `step` record that appears in
  metrics.jsonl after the wait began (by byte offset: no time compared), timed by the controller.

An attempt whose head ends (any final status, or `lost`) before a first step ends the wait at
once, and so does a head that stops answering for the window in which watch() declares a node
lost: a survivor that dies at start-up (its machine gone) does not blind the controller for the
whole timeout.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

from trainkit.runs import record as runs
from trainkit.runs import remote
from trainkit.runs.status import Follower
from trainkit.util import progress

POLL_S = 1.0
ENDED = ("completed", "failed", "preempted", "cancelled", "lost")
# A head unreachable this long (and for at least UNREACHABLE_POLLS polls) is gone: the window in
# which recover.watch() declares a node lost (trainkit/runs/recover.py Options.lost_after_s,
# lost_after), repeated here (recover imports this module).
UNREACHABLE_S, UNREACHABLE_POLLS = 5.0, 2


@dataclass(frozen=True)
class Seen:
    first_step_at: float | None     # controller clock; None: no step before the timeout or the end
    waited_s: float                 # controller's monotonic clock
    ended: str | None = None        # the head's status when the attempt ended before its first step
                                    # ("unreachable": it stopped answering for UNREACHABLE_S)


def placed(controller_now: float, node_uptime: float, node_first_at: float, began: float) -> float:
    """A node's event time on the controller's clock: now minus its age on the node's clock,
    not before `began` (the attempt's launch, controller clock) and never in the future."""
    age = max(0.0, node_uptime - node_first_at)
    return min(controller_now, max(began, controller_now - age))


def first_step(head, lay: remote.Layout, attempt: int, timeout_s: float, not_before: float | None = None) -> Seen:
    """Poll the head until the attempt's first step, its end, or `timeout_s` (controller monotonic).
    `not_before`: when the attempt was launched (controller clock; default: now)."""
    began, t0 = not_before or time.time(), time.monotonic()
    metrics = f"{lay.run_dir}/metrics.jsonl"
    offset = len(remote.read_from(head, metrics, 0)[0])   # steps after this byte are the new attempt's
    misses: list[float] = []   # controller monotonic times of consecutive polls the head did not answer
    while time.monotonic() - t0 < timeout_s:
        s = remote.node_states([head], lay, attempt)[0]
        misses = [] if s.reachable else misses + [time.monotonic()]
        if len(misses) >= UNREACHABLE_POLLS and misses[-1] - misses[0] >= UNREACHABLE_S:
            return Seen(None, time.monotonic() - t0, ended="unreachable")
        p = s.state.get("progress") or {}
        if s.reachable and isinstance(p.get("first_at"), (int, float)) and s.uptime is not None:
            return Seen(placed(time.time(), s.uptime, p["first_at"], began), time.monotonic() - t0)
        if s.reachable and s.state and s.status in ENDED:   # no state yet: not started, not ended
            return Seen(None, time.monotonic() - t0, ended=s.status)
        data, _ = remote.read_from(head, metrics, offset)
        if _has_step(data):
            return Seen(time.time(), time.monotonic() - t0)
        time.sleep(POLL_S)
    return Seen(None, time.monotonic() - t0)


def _has_step(data: bytes) -> bool:
    for line in data.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and rec.get("kind") == "step":
            return True
    return False


def record(head, lay: remote.Layout, job, run_dir, attempt: int, timeout_s: float = 300,
           kind: str = "resumed") -> bool:
    """Record `kind` ("resumed"; "rejoined" after recover.elastic's survivors went on alone) once
    the attempt's job logs its first step: the step it resumed from and the work lost, counted
    from metrics.jsonl itself (the last step logged before this attempt's start record), and the
    first step's time on the controller's clock (`first_step`). An attempt that ends before its
    first step ends the wait at once and records nothing (False)."""
    started = next((a.get("started_at") for a in runs.read_record(run_dir).get("attempts") or []
                    if a.get("attempt") == attempt), None)   # the controller's clock: launch_attempt's
    seen = first_step(head, lay, attempt, timeout_s, started)
    if seen.ended:
        progress.info(f"attempt {attempt} ended ({seen.ended}) before its first step")
        return False
    follower = Follower(head, lay, job, None)
    follower.poll()   # reads the whole metrics.jsonl: the newest `run` record is this attempt's
    resumed, before = follower.resumed_from, follower.before_run
    lost = (before - resumed) if (before is not None and resumed is not None) else None
    step_s = follower.step_time_s
    runs.event(run_dir, kind, attempt=attempt, step=resumed, lost_steps=lost, last_step_before=before,
               lost_s=round(lost * step_s, 3) if lost is not None and step_s else None,
               first_step_at=seen.first_step_at, waited_s=round(seen.waited_s, 3))
    return True
