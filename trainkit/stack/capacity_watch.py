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
"""

from __future__ import annotations

import os
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


class CapacityWatch:
    """`with CapacityWatch(fifo, reader) as w: env = w.env(env); ...; w.attach(proc)`; `w.problem`."""

    def __init__(self, fifo: Path, reader: Callable[[str], CapacityProblem | None], log_path: Path):
        self.fifo, self.reader, self.log_path = Path(fifo), reader, Path(log_path)
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
                    self.problem = found
                    if self._proc is not None and self._proc.poll() is None:
                        self._proc.send_signal(signal.SIGINT)
