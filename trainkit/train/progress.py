"""The job's progress for its node's supervisor: `$TRAINKIT_PROGRESS_FILE` (the supervisor sets
it, trainkit/node/supervise.py), one line `<step> <phase>` that local rank 0 of each node rewrites
in place after every optimizer step and when a long phase starts:

    train    a step was just logged (the watchdog's window counts from here)
    save     a checkpoint is being written (a stall here is judged against the longest window)
    eval     validation or test at an epoch's end (same)

The file is opened once and rewritten at offset 0 with a fixed width (WIDTH bytes), so after the
first write it never needs a new block: a full disk (ENOSPC) does not stop it. Any OSError turns
it off for the rest of the run (the supervisor then sees no progress: the watchdog never judges a
node without one); it never stops the training. The supervisor reads the pair and records, on its
node's own monotonic clock, when it last changed (docs/runs.md, "Hung nodes").
"""

from __future__ import annotations

import os

WIDTH = 32   # "<step> <phase>" padded with spaces: 20 digits of step and the longest phase fit


class Progress:
    """Writes `<step> <phase>` to `path` in place; a no-op without a path or after an OSError."""

    def __init__(self, path: str | None) -> None:
        self.fd: int | None = None
        if path:
            try:
                self.fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
            except OSError:
                self.fd = None

    @classmethod
    def from_env(cls, writes: bool) -> "Progress":
        """The node's writer (`writes`: local rank 0) from $TRAINKIT_PROGRESS_FILE; else a no-op."""
        return cls(os.environ.get("TRAINKIT_PROGRESS_FILE") if writes else None)

    def mark(self, step: int, phase: str = "train") -> None:
        if self.fd is None:
            return
        line = f"{step} {phase}".ljust(WIDTH - 1)[:WIDTH - 1] + "\n"
        try:
            os.pwrite(self.fd, line.encode(), 0)
        except OSError:
            self.close()

    def close(self) -> None:
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = None

