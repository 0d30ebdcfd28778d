"""recover.elastic: the survivors train on while a lost node is replaced (issue 22, item 8).

Without it, a reclaim stops the run until the replacement is up and provisioned (minutes on a
cloud). With `recover: {elastic: true}` in the train config, trainkit/runs/recover.py instead:

1. starts the replacement in the background (`Replacing`: replace_lost, a spare or a new instance);
2. relaunches the run at once on the survivors, ranked 0.. in their order: the engine resumes from
   the newest checkpoint at the smaller world size (its sharded checkpoints reshard) and keeps the
   global batch, each rank taking a larger share (schedule.plan_batch: more samples or more
   accumulation steps per rank), so the optimisation is the same run's;
3. once the replacement is provisioned, stops the survivors with SIGTERM (the engine writes a
   checkpoint and exits), runs doctor's checks on the whole cluster, and relaunches on every node:
   the run grows back from that checkpoint, losing no step.

`why_not` says when the survivors cannot carry the run (the global batch does not split over their
ranks): recovery then waits for the replacement as without elastic. Off by default.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from trainkit.errors import InputError, TrainkitError
from trainkit.runs import record as runs
from trainkit.train.config import config_from_dict, load_config  # the engine's own rules
from trainkit.train.schedule import plan_batch


def why_not(job: runs.Job, ranks: int) -> str | None:
    """Why the run cannot go on at `ranks` ranks (None: it can): no survivor, or the global batch
    does not divide over them (the engine would refuse to start)."""
    if ranks < 1:
        return "no node survived"
    try:
        cfg = load_config(job.source, job.overrides) if job.source.is_file() else config_from_dict(job.engine_config)
        plan_batch(cfg.batch, ranks, cfg.micro_batch, cfg.grad_accum)
    except InputError as err:
        return f"the survivors' {ranks} rank(s) cannot carry the run ({err.message})"
    return None


def last_step_before(record: dict, attempt: int) -> int | None:
    """The newest last step run.json's `attempts` hold before `attempt` (None: none logged one):
    the run's progress when the survivors' attempt ends before a step of its own."""
    steps = [a.get("last_step") for a in record.get("attempts") or [] if a.get("attempt", 0) < attempt]
    return next((s for s in reversed(steps) if s is not None), None)


class Replacing:
    """`work()` (the replacement) in a thread; `done` once it returned or raised a TrainkitError."""

    def __init__(self, work: Callable[[], Any]) -> None:
        self.result: Any = None
        self.error: TrainkitError | None = None
        self._work = work
        self._thread = threading.Thread(target=self._run, name="trainkit-replacing", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.result = self._work()
        except TrainkitError as err:
            self.error = err

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def join(self) -> None:
        self._thread.join()
