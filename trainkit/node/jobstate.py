"""The node supervisor's state on disk and its job's processes (stdlib only; copied into the run
folder beside supervise.py, which imports it; its module docstring has the rules).

State: JSON padded to STATE_BYTES, written to a new file and renamed (`write_state`); on a full
disk rewritten in place (`rewrite_in_place`); on a read-only one kept at `memory_state_path`.
Processes: the subreaper flag, /proc reads of the job's tree, and `hard_stop`.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import signal
import time

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h
# The state file's size: every write is padded to it (spaces before the newline; JSON ignores
# them) so an in-place rewrite on a full disk needs no new block. A state with a job's whole tree
# (8 GPUs: torchrun, 8 ranks and their data workers, ~100 pids at ~20 bytes) fits in 4 KiB.
STATE_BYTES = 8192


# ------------------------------------------------------------------ the state on disk

def boottime() -> float:
    """Seconds since boot on CLOCK_BOOTTIME, the clock /proc/uptime reads (monotonic; a time
    namespace offsets both alike)."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def write_state(path: str, state: dict) -> None:
    """`state` as JSON padded to STATE_BYTES, written to a new file and renamed over `path`."""
    tmp = f"{path}.tmp"
    try:
        with open(tmp, "w") as f:
            f.write(padded(json.dumps(state)))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    memory = memory_state_path(path)
    if path != memory and os.path.exists(memory):
        try:
            os.unlink(memory)   # the disk took the state again: the memory copy is stale
        except OSError:
            pass


def padded(text: str) -> str:
    return text.ljust(STATE_BYTES - 1) + "\n" if len(text) < STATE_BYTES else text + "\n"


def rewrite_in_place(path: str, text: str) -> None:
    """`text` over the first bytes of the existing file `path`, no longer than it (ValueError), so
    no block is allocated: what works on a full disk."""
    data = padded(text).encode()
    fd = os.open(path, os.O_WRONLY)
    try:
        if len(data) > os.fstat(fd).st_size:
            raise ValueError("the state does not fit the file")
        os.pwrite(fd, data, 0)
        os.fsync(fd)
    finally:
        os.close(fd)


def memory_state_path(state_file: str) -> str:
    """Where the state goes when its disk takes no write: /dev/shm (a tmpfs on every Linux with
    glibc's POSIX shared memory), named by the state file's path. trainkit/runs/remote.py computes
    the same name and reads it first."""
    digest = hashlib.sha256(state_file.encode()).hexdigest()[:16]
    return f"/dev/shm/trainkit-state-{digest}.json"


# ------------------------------------------------------------------ the job's processes

def become_subreaper() -> bool:
    """Orphaned descendants are re-parented to this process, not to init (Linux >= 3.4)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return False


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, start time in clock ticks) from /proc/<pid>/stat (proc(5): fields 4 and 22,
    counted after the parenthesised command name, which may hold spaces)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[1]), int(fields[19])
    except (OSError, IndexError, ValueError):
        return None


def start_time(pid: int) -> int | None:
    st = _stat(pid)
    return st[1] if st else None


def tree_of(roots: list[int]) -> list[list[int]]:
    """[[pid, start time]] of `roots` and all their descendants alive now (one /proc scan)."""
    stats = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _stat(int(name))
            if st:
                stats[int(name)] = st
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [p for p in roots if p in stats]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.append(pid)
            todo += children.get(pid, [])
    return sorted([pid, stats[pid][1]] for pid in found)


def _group(pgid: int) -> list[int]:
    """The processes of process group `pgid` (proc(5) stat field 5)."""
    out = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat") as f:
                if name.isdigit() and int(f.read().rsplit(")", 1)[1].split()[2]) == pgid:
                    out.append(int(name))
        except (OSError, IndexError, ValueError):
            continue
    return out


def kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def descendants() -> list[int]:
    """This process's live descendants (zombie children reaped first)."""
    _reap_any()
    return [pid for pid, _ in tree_of([os.getpid()]) if pid != os.getpid()]


def _reap_any() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def hard_stop(state_file: str) -> int:
    """SIGKILL the supervisor of `state_file` and every process of its job: the supervisor, all
    its descendants, and the processes its state recorded that still run (same pid and start
    time). Each round gathers them all first, SIGSTOPs them, then SIGKILLs them; rounds repeat
    until none is found. Returns how many were killed."""
    memory = memory_state_path(state_file)
    try:
        with open(memory if os.path.exists(memory) else state_file) as f:
            state = json.load(f)
    except (OSError, ValueError):
        state = {}
    known = [[state.get("supervisor_pid"), state.get("supervisor_start")]]
    known += [list(x) for x in state.get("tree") or [] if isinstance(x, (list, tuple)) and len(x) == 2]
    if isinstance(state.get("pid"), int) and state.get("status") in ("running", "starting"):
        known += [[pid, start_time(pid)] for pid in _group(state["pid"])]   # its group, as before
    me, killed = os.getpid(), set()
    for _ in range(50):   # each round kills what it found; a job cannot outgrow SIGSTOP for long
        roots = [pid for pid, t in known if isinstance(pid, int) and pid != me and t is not None
                 and start_time(pid) == t]
        victims = [(p, t) for p, t in tree_of(roots) if p != me and (p, t) not in killed]
        if not victims:
            break
        for pid, _ in victims:
            kill(pid, signal.SIGSTOP)
        for pid, _ in tree_of([p for p, _ in victims]):   # forked before it stopped
            if pid != me and all(pid != v for v, _ in victims):
                victims.append((pid, start_time(pid)))
                kill(pid, signal.SIGSTOP)
        for pid, t in victims:
            kill(pid, signal.SIGKILL)
            killed.add((pid, t))
        known = [list(v) for v in victims]
        time.sleep(0.05)
    return len(killed)
