"""Whether nodes are up before there is anything to run on them: waiting for SSH to accept
connections after a create, and one TCP check of a host. Running a script on a node is
trainkit.provision.node's `Node.sh`."""

from __future__ import annotations

import socket
import time

from trainkit import errors
from trainkit.errors import TrainkitError
from trainkit.util import progress

SSH_WAIT_S = 300  # cloud images usually accept SSH within 1-2 minutes of "running"


def wait_for_ssh(targets: list[tuple[str, int]], timeout_s: float = SSH_WAIT_S) -> None:
    """Block until every (host, port) accepts TCP; TrainkitError naming those that never did."""
    pending = list(targets)
    with progress.step(f"waiting for SSH on {len(pending)} node(s)") as s:
        deadline = time.monotonic() + timeout_s
        while pending and time.monotonic() < deadline:
            for target in list(pending):
                try:
                    socket.create_connection(target, timeout=3).close()
                    pending.remove(target)
                    s.line(f"{target[0]}:{target[1]} is up")
                except OSError:
                    pass
            if pending:
                time.sleep(2)
    if pending:
        raise TrainkitError(f"SSH did not come up within {timeout_s:.0f}s on: "
                            + ", ".join(f"{h}:{p}" for h, p in pending),
                            fix="check admin_cidrs includes your address, and the image's SSH user",
                            exit_code=errors.PROVISION)


def reachable(address: str, port: int) -> bool:
    """Whether `address:port` accepts a TCP connection within 3 s."""
    try:
        socket.create_connection((address, port), timeout=3).close()
        return True
    except OSError:
        return False
