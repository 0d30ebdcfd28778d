"""Fence the hosts a run lost: a host declared lost may come back (a network partition that
healed, a machine that rebooted) with the job of the attempt it was lost in still running: stuck
in a collective with peers that are gone, or writing into the run's shared folder.

`Fencer` (used by recovery's loop, trainkit/runs/recover.py) keeps the hosts lost so far with the
attempt each was lost in. A background thread asks each of them every `poll_s` whether it answers
on SSH; once one does, that attempt's job is hard-stopped there (`supervise.py --hard-stop`
through remote.signal_nodes: the supervisor and every process of its tree; a later attempt's job
on the same host has another state file and is left alone) and the run records `fenced`. When
the run ends, `close()` tries once more and records `unfenced` for each host that never answered,
with what to do if it comes back.

Only the `hosts` target needs this: a lost cloud instance is replaced by `terraform apply
-replace`, which terminates it, partitioned or not (trainkit/cluster/replace.py).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from trainkit.provision.node import Node
from trainkit.runs import record as runs
from trainkit.runs import remote
from trainkit.util import progress

FENCE_POLL_S = 5.0     # one ssh probe per lost host per period (ConnectTimeout=5: a silent host costs 5 s)
PROBE_TIMEOUT_S = 15


@dataclass(frozen=True)
class _Lost:
    node: Node
    lay: remote.Layout
    attempt: int


class Fencer:
    """`f = Fencer(run_dir); f.add(nodes, lay, attempt, lost)` ...; `f.close()` before the run's
    last event; `f.stop()` (idempotent) in a finally."""

    def __init__(self, run_dir: Path, poll_s: float = FENCE_POLL_S):
        self.run_dir, self.poll_s = run_dir, poll_s
        self._lost: list[_Lost] = []
        self._lock = threading.Lock()       # one sweep at a time (the thread's or close()'s)
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, nodes: list[Node], lay: remote.Layout, attempt: int, lost: list[str]) -> None:
        """Keep the `lost` ones of `nodes` (the attempt's nodes, as it ran them) to fence."""
        with self._lock:
            self._lost += [_Lost(n, lay, attempt) for n in nodes if n.name in lost and not n.local]
        if self._lost and self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="trainkit-fence", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while not self._stopped.wait(self.poll_s):
            self.sweep()

    def sweep(self) -> None:
        """Hard-stop the lost attempt's job on every lost host that answers now; `fenced` events."""
        with self._lock:
            for lost in list(self._lost):
                if self._stopped.is_set() or lost.node.sh("true", timeout=PROBE_TIMEOUT_S).returncode != 0:
                    continue
                remote.signal_nodes([lost.node], lost.lay, lost.attempt, "KILL")
                runs.event(self.run_dir, "fenced", node=lost.node.name, attempt=lost.attempt)
                self._lost.remove(lost)

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=PROBE_TIMEOUT_S + 30)

    def close(self) -> list[str]:
        """Stop the thread, try each host once more, record `unfenced` for the others; their names."""
        self.stop()
        self._stopped.clear()
        self.sweep()
        self._stopped.set()
        left = [lost.node.name for lost in self._lost]
        why = ("lost and never answered again: if it comes back, the job of the attempt it was lost in may "
               "still run there; reboot it, or kill the run's processes there (supervise.py and its job)")
        for lost in self._lost:
            runs.event(self.run_dir, "unfenced", node=lost.node.name, attempt=lost.attempt, why=why)
            progress.info(f"warning: host {lost.node.name} was {why}")
        self._lost.clear()
        return left
