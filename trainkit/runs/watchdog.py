"""The progress watchdog: a node whose job logs no step for too long is `hung`.

What the major managed platforms do with a job that stops making progress, and what trainkit
takes from each:

- Alibaba PAI-DLC (fault tolerance, "hang detection"): a job whose output stops for 1800 s by
  default is restarted. HANG_MAX_S is that: no window is longer.
- Huawei ModelArts (training job fault tolerance, "suspension detection"): unchanged I/O and flat
  GPU utilisation for a set time mean the job is suspended, and it is restarted.
- AWS SageMaker HyperPod (auto-resume, health monitoring): watches the job's throughput.

trainkit watches the job's own progress: every node's supervisor records, on that node's
monotonic clock, when the job's step (or phase: a checkpoint write, an evaluation) last changed
(trainkit/node/supervise.py), and the controller reads that age with the node's clock in the same
read (remote.NodeState.progress_age): no wall clock of one machine is compared with another's.
The window follows the measured step time, bounded:

    window = min(HANG_MAX_S, max(HANG_MIN_S, STEPS_WINDOW x seconds per step))

`recover.hang_after_s` in the train config sets a fixed window instead (0 turns the watchdog
off). While a checkpoint is written or an evaluation runs (the phase is not `train`), the window
is LONG_PHASE_FACTOR times longer, at most HANG_MAX_S (with the derived window: HANG_MAX_S). A node is judged only after its job logged a step (start-up, imports and data staging have
no step time to judge by). Pure functions; the actions on a hung node are trainkit/runs/hang.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The shortest window: under the 10 minutes that torch.distributed gives an NCCL collective by
# default (init_process_group's `timeout`, torch.distributed docs), so that a hang is caught by
# trainkit before it becomes a collective timeout that reads as the user's code failing.
HANG_MIN_S = 300.0
HANG_MAX_S = 1800.0          # Alibaba PAI-DLC's default hang detection: no output for 1800 s
STEPS_WINDOW = 50            # a step 50 times slower than measured is no slowdown: it is stuck
HANG_FIXED_MIN_S = 5.0       # the least recover.hang_after_s (two polls of the supervisor and the controller)
# A save or an evaluation may take several steps' windows (a full checkpoint of a big model, the
# test set at the end): 6 x HANG_MIN_S is HANG_MAX_S, PAI-DLC's bound.
LONG_PHASE_FACTOR = 6


def window_s(step_s: float | None, phase: str | None, fixed: float | None = None) -> float | None:
    """Seconds without a change of step or phase after which a node is hung; None: not judged
    (fixed == 0: the watchdog is off)."""
    if fixed == 0:
        return None
    if fixed is not None:
        train = float(fixed)
    else:
        derived = STEPS_WINDOW * step_s if step_s and step_s > 0 else HANG_MIN_S
        train = min(HANG_MAX_S, max(HANG_MIN_S, derived))
    return train if phase in (None, "train") else max(train, min(HANG_MAX_S, LONG_PHASE_FACTOR * train))


@dataclass(frozen=True)
class Stall:
    node: str
    step: int | None
    phase: str | None
    age_s: float
    window_s: float

    def as_dict(self) -> dict[str, Any]:
        return {"node": self.node, "step": self.step, "phase": self.phase, "age_s": round(self.age_s, 1),
                "window_s": round(self.window_s, 1)}


def stalls(states: list, fixed: float | None = None) -> list[Stall]:
    """The nodes (remote.NodeState, running) whose job's progress is older than its window."""
    out = []
    for s in states:
        if s.status != "running":
            continue
        age, p = s.progress_age(), s.state.get("progress") or {}
        win = window_s(p.get("step_s"), p.get("phase"), fixed)
        if age is not None and win is not None and age >= win:
            out.append(Stall(s.name, p.get("step"), p.get("phase"), age, win))
    return out


def last_step(states: list) -> int | None:
    """The highest step any node's supervisor reported (the head's follower may be gone)."""
    steps = [(s.state.get("progress") or {}).get("step") for s in states if s.reachable]
    steps = [x for x in steps if isinstance(x, int)]
    return max(steps) if steps else None


def ended_as(finals: dict[str, str], noticed: bool) -> str:
    """An attempt's status from its nodes' final ones. `finals` holds only the nodes that ended by
    themselves when the controller stopped the others (their `cancelled` is its own stop, never
    the user's `trainkit cancel`)."""
    ends = set(finals.values())
    return ("completed" if ends == {"completed"} else "cancelled" if "cancelled" in ends
            else "preempted" if "preempted" in ends or noticed else "failed")
