"""Storage faults are storage faults: a disk that is full (ENOSPC, EDQUOT) or read-only (EROFS)
on a node or on the shared mount ends the run as such, never as a lost node.

Where they show: the supervisor's state (`storage_error`: it could not write its own state or
events there, trainkit/node/supervise.py) and the job's own logs (the engine names the folder and
the MiB free when a checkpoint write fails; Python names the errno). `find` reads both for the
attempt that just ended; `close_run` closes the run `failed` with the fault in its record
(`fault`, shown by `trainkit runs`), an event `storage_fault`, and a TrainkitError with exit
code STORAGE and the fix. No node is replaced: a spare mounts the same shared storage, and a
full disk needs room, not a new machine.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any, Callable

from trainkit.errors import STORAGE, TrainkitError
from trainkit.runs import record as runs
from trainkit.runs import remote

LOG_TAIL_BYTES = 65536   # the end of each log: the lines that ended the attempt
# What the job's logs say on a storage fault: Python's strerror for each errno (glibc's
# strerror texts), and the engine's own checkpoint message (trainkit/train/sharded.py), which it
# writes for ANY failed save (a lost peer's "Connection reset" too) with the room left there.
PATTERNS = (("ENOSPC", "No space left on device"), ("EDQUOT", "Disk quota exceeded"),
            ("EROFS", "Read-only file system"))
ENGINE_FREE = re.compile(r"([0-9.]+) MiB free there")
# The engine's message is a full disk only with less room than this left: a failed save removes
# its partial folder before the engine measures, so a disk it filled shows about the free space
# it had before that save began; a digits save is 0.4 MB, and real shards are far larger.
LOW_FREE_MIB = 64.0
_GREP = "|".join([*(text for _, text in PATTERNS), ENGINE_FREE.pattern])   # letters, spaces, '-': ERE as written


def classify(line: str) -> str | None:
    """The errno name a log line reports, or None: an errno's text, or the engine's failed save
    with under LOW_FREE_MIB left (any other failed save, as a peer lost mid-save, is not one)."""
    for name, text in PATTERNS:
        if text in line:
            return name
    m = ENGINE_FREE.search(line)
    if not m or "not for want of room" in line:   # the engine's own word that room was not the cause
        return None
    return "ENOSPC" if float(m.group(1)) < LOW_FREE_MIB else None


def from_states(states: list) -> dict[str, Any] | None:
    """The first supervisor that reported a storage fault: {"node", "errno", "path", "message"}."""
    for s in states:
        err = s.state.get("storage_error") if s.reachable else None
        if isinstance(err, dict):
            return {"node": s.name, "errno": err.get("errno"), "path": err.get("path"),
                    "message": err.get("message"), "source": "supervisor"}
    return None


def from_logs(node_logs: dict[str, str]) -> dict[str, Any] | None:
    """The last line of any node's log that reports a storage fault (the engine's message first)."""
    found = None
    for node, text in node_logs.items():
        for line in text.splitlines():
            kind = classify(line)
            if kind and (found is None or ENGINE_FREE.search(line) or not ENGINE_FREE.search(found["message"])):
                found = {"node": node, "errno": kind, "path": _path_in(line), "message": line.strip()[-500:],
                         "source": "log"}
    return found


def _path_in(line: str) -> str | None:
    m = re.search(r"(/[^\s:;'\",)]+)", line)
    return m.group(1) if m else None


def find(nodes: list, lay: remote.Layout, attempt: int) -> dict[str, Any] | None:
    """The storage fault that ended `attempt`, from the nodes that answer; None when there is none.
    The engine's message is preferred, then the supervisor's report; each with the node."""
    states = remote.node_states(nodes, lay, attempt)
    up = [s for s in states if s.reachable]
    logs = {n.name: _log_tail(n, lay) for n in nodes if any(s.name == n.name for s in up)}
    hit = from_logs(logs)
    sup = from_states(states)
    if hit and sup and not hit.get("path"):
        hit["path"] = sup.get("path")
    return hit or sup


def _log_tail(node, lay: remote.Layout) -> str:
    logs = shlex.quote(f"{lay.run_dir}/logs")
    script = (f"cd {logs} 2>/dev/null && for f in *.log; do [ -f \"$f\" ] && tail -c {LOG_TAIL_BYTES} \"$f\" "
              f"| grep -E {shlex.quote(_GREP)} | tail -n 5; done; true")
    res = node.sh(script, timeout=30)
    return res.stdout.decode(errors="replace") if res.returncode == 0 else ""


def message(run_id: str, fault: dict[str, Any], spec: str = "SPEC") -> tuple[str, str]:
    """(what happened, the fix), by the kind of fault."""
    where = fault.get("path") or "a disk of the run"
    said = f" ({fault['message']})" if fault.get("message") else ""
    if fault.get("errno") == "EROFS":
        return (f"run {run_id} failed: {where} on {fault['node']} is read-only{said}; no node was replaced",
                "the disk was mounted read-only, or the kernel remounted it after I/O errors (see `dmesg` on "
                f"that node): fix or remount it read-write, then resume: trainkit train {spec} --resume {run_id}")
    return (f"run {run_id} failed: no space left on {where} on {fault['node']}{said}; no node was replaced "
            "(a spare mounts the same storage)",
            f"free space there (old checkpoints, other runs' folders; checkpoint.keep keeps fewer) or grow the "
            f"disk, then resume: trainkit train {spec} --resume {run_id} (add --recover to keep it going)")


def close_run(run_dir: Path, attempt: int, fault: dict[str, Any], finish: Callable[[], Any], spec: str) -> None:
    """Record the fault (event, run.json `fault`), close the run through `finish`, and raise the
    TrainkitError (exit STORAGE) that says what and how to fix it."""
    runs.event(run_dir, "storage_fault", attempt=attempt, **{k: v for k, v in fault.items() if k != "attempt"})
    finish()
    record = runs.read_record(run_dir)
    record["fault"] = f"{fault.get('errno')} on {fault.get('path') or '?'} ({fault['node']})"
    runs.write_record(run_dir, record)
    text, fix = message(run_dir.name, fault, spec)
    raise TrainkitError(text, fix=fix, exit_code=STORAGE)
