"""Stop a terraform apply that the cloud refuses for capacity or quota, instead of waiting it out.

hashicorp/aws retries `InsufficientInstanceCapacity` inside its SDK (HTTP 500 is retryable) for as
long as its retry budget lasts, tens of minutes, and prints nothing but "Still creating..." until
then (terraform-provider-aws issues #15183 and #43193). The refusal is only in the provider's
debug log. While terraform applies, this reads that log through a named pipe (never written to
disk: a debug log carries request details) and asks the cloud room whether a line is a capacity or
quota refusal. After `REPEATS` such lines it interrupts terraform once (SIGINT: terraform stops
its operations and saves the state, so everything created so far stays destroyable) and keeps the
refusal for the caller. The first matching line is appended to terraform.log (the provider's own
words stay there, not in the message).

The interrupt waits until the only operations still running are instance creations (`InFlight`,
read from terraform's own output; at most QUIET_WAIT_S): SIGINT cancels every operation in
flight, and a create the cloud already carried out but whose wait was cancelled is in the cloud
and not in the state. A security group rule cut off that way made the next zone's apply fail
with InvalidPermission.Duplicate; an EFS mount target, with MountTargetConflict. An operation
that failed prints no end line (terraform shows its error only when the whole apply ends), but
it stops printing "Still creating...": one silent for STILL_S is over.
"""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path
from typing import Callable

from trainkit.clouds.base import CapacityProblem

# Lines naming a refusal before terraform is stopped: the SDK logs each response body once or twice,
# so 3 lines are at least two refused attempts (one refusal may be a blip the next retry gets past).
REPEATS = 3
# At most this long for the other operations in flight to end before the interrupt: a NAT gateway
# takes minutes to become available (Amazon VPC user guide, "NAT gateways": "pending" while it is
# created); past it, terraform is interrupted anyway (an operation that failed prints no end line).
QUIET_WAIT_S = 300

# terraform's human-readable apply lines: "ADDR: Creating...", "ADDR: Still creating... [10s
# elapsed]", "ADDR: Creation complete after 2s [id=...]", the same for Modifying/Destroying/Reading
# (terraform's internal/command/views/hook_ui.go; it prints "Still ..." every periodicUiTimer, 10 s).
_START = re.compile(r"^(\S+): (Creating|Modifying|Destroying|Reading|Still [a-z]+)\.\.\.")
_END = re.compile(r"^(\S+): (Creation|Modifications|Destruction|Read) complete")
# An operation that has printed nothing for this long has ended (failed: its error comes at the
# very end): terraform's 10 s progress interval, with room for a loaded machine.
STILL_S = 30.0
# After an operation ends, this long with nothing in flight before the interrupt: terraform starts an
# operation the moment the last one it depends on ends (it walks the graph concurrently), and its
# "Creating..." line reaches this reader a moment later; a SIGINT in between cancels a create the
# cloud may already have carried out, leaving it out of the state (an untracked route table then
# blocked DeleteVpc). Nothing new can start while nothing ends, so a quiet spell is enough.
SETTLE_S = 3.0
# An instance in the module interface: a `*_instance` resource named `node` (count-indexed).
_INSTANCE = re.compile(r"(?:^|\.)[a-z0-9]+_(?:compute_)?instance\.node(?:\[\d+\])?$")


class InFlight:
    """The operations terraform has started and not finished, from its output lines and the
    times they were read (pure: the caller gives the clock)."""

    def __init__(self, still_s: float = STILL_S, settle_s: float = SETTLE_S) -> None:
        self._open: dict[str, float] = {}   # address -> when it last printed a line
        self._lock = threading.Lock()
        self.still_s, self.settle_s = still_s, settle_s
        self._last_end = float("-inf")      # when the last end line was read

    def feed(self, line: str, now: float | None = None) -> None:
        line = line.strip()
        now = time.monotonic() if now is None else now
        with self._lock:
            if found := _START.match(line):
                self._open[found.group(1)] = now
            elif found := _END.match(line):
                self._open.pop(found.group(1), None)
                self._last_end = now

    def others(self, now: float | None = None) -> list[str]:
        """In-flight operations that are not instance creations (those are what the cloud
        refuses), leaving out those silent for `still_s` (failed)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            return sorted(a for a, seen in self._open.items()
                          if not _INSTANCE.search(a) and now - seen < self.still_s)

    def settled(self, now: float | None = None) -> bool:
        """Nothing but instance creations in flight, and no operation ended in the last
        `settle_s` (one that ended may have let a dependent start: SETTLE_S)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            last_end = self._last_end
        return not self.others(now) and now - last_end >= self.settle_s


class CapacityWatch:
    """`with CapacityWatch(fifo, reader) as w: env = w.env(env); ...; w.attach(proc)`; `w.problem`."""

    def __init__(self, fifo: Path, reader: Callable[[str], CapacityProblem | None], log_path: Path,
                 inflight: InFlight | None = None, quiet_wait_s: float = QUIET_WAIT_S):
        self.fifo, self.reader, self.log_path = Path(fifo), reader, Path(log_path)
        self.inflight = inflight or InFlight()   # the caller feeds it terraform's output lines
        self.quiet_wait_s = quiet_wait_s
        self.problem: CapacityProblem | None = None
        self._seen = 0
        self._proc: subprocess.Popen | None = None
        self._thread = threading.Thread(target=self._read, daemon=True)

    def __enter__(self) -> "CapacityWatch":
        self.fifo.unlink(missing_ok=True)
        os.mkfifo(self.fifo, 0o600)
        self._thread.start()
        return self

    def env(self, env: dict[str, str]) -> dict[str, str]:
        """`env` with the provider's debug log sent to the pipe (the user's own TF_LOG_PATH wins)."""
        if env.get("TF_LOG_PATH"):
            return env
        return {**env, "TF_LOG_PATH": str(self.fifo), "TF_LOG_PROVIDER": "DEBUG", "TF_LOG_CORE": "OFF"}

    def attach(self, proc: subprocess.Popen) -> None:
        self._proc = proc

    def __exit__(self, *exc) -> None:
        deadline = time.monotonic() + 10
        while self._thread.is_alive() and time.monotonic() < deadline:
            try:  # a reader still waiting for terraform to open the pipe: open it ourselves, it sees EOF
                os.close(os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:  # no reader on the pipe yet (ENXIO), or it is draining: look again
                pass
            self._thread.join(timeout=0.05)
        if self.fifo.exists() and stat.S_ISFIFO(self.fifo.stat().st_mode):
            self.fifo.unlink()

    def _read(self) -> None:
        """Drain the pipe to its end (terraform blocks on a full pipe), reading each line."""
        with open(self.fifo, errors="replace") as pipe:
            for line in pipe:
                if self._seen >= REPEATS:
                    continue
                found = self.reader(line)
                if found is None:
                    continue
                self._seen += 1
                if self._seen == 1:
                    with open(self.log_path, "a") as log:
                        log.write(f"[trainkit] the provider's debug log: {line.strip()[:2000]}\n")
                if self._seen == REPEATS:
                    self.problem = found   # this thread goes on draining the pipe meanwhile
                    threading.Thread(target=self._interrupt_when_quiet, daemon=True).start()

    def _interrupt_when_quiet(self) -> None:
        """SIGINT terraform once no operation but instance creations is in flight and none has
        just ended (`InFlight.settled`; or after quiet_wait_s): the other operations end and are
        saved in the state."""
        deadline = time.monotonic() + self.quiet_wait_s
        while not self.inflight.settled() and time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                return
            time.sleep(0.2)
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGINT)
