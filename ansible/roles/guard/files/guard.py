#!/usr/bin/env python3
"""trainkit guard: shut this node down at its TTL, or once it has been idle long enough.

Usage: guard.py [--daemon] CONFIG.json. CONFIG (written by the Ansible role) holds ttl_minutes,
idle_minutes (0 = off), shutdown_command (argv), training_pattern (regex over process command
lines), idle_cpu_percent, idle_gpu_percent, check_interval_s and state_dir. The TTL counts from
the time the guard first started on this node (`started` in STATE_DIR/state.json), so a restart or
a re-run of the role does not extend it, while a new ttl_minutes in CONFIG (a ttl edit applied to
the cluster) moves the deadline to started + the new ttl: CONFIG is read again at every check. Idle = no process matches training_pattern, CPU below idle_cpu_percent and every GPU
(nvidia-smi, when present) below idle_gpu_percent. Standard library only; runs on the node.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import time


def cpu_times():
    with open("/proc/stat") as fh:
        values = [int(v) for v in fh.readline().split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return sum(values), idle


def cpu_percent(before, after):
    total, idle = after[0] - before[0], after[1] - before[1]
    return 0.0 if total <= 0 else 100.0 * (total - idle) / total


def gpu_percent():
    """Highest GPU utilisation, or 0.0 when the node has no NVIDIA GPU tools."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return 0.0
    try:
        out = subprocess.run([smi, "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30).stdout
        return max((float(v) for v in out.split()), default=0.0)
    except (OSError, ValueError, subprocess.SubprocessError):
        return 0.0


def training_running(pattern):
    regex, me = re.compile(pattern), os.getpid()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        if int(pid) == me:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if regex.search(cmd):
            return True
    return False


def write_state(path, state):
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(state, fh, indent=1)
    os.replace(tmp, path)


def started_at(state, cfg, now):
    """When the guard first started here; a state written before `started` existed holds only its
    deadline (then fixed at first start + ttl): counted back with the current ttl, so it never moves
    later than it was."""
    if state.get("started"):
        return state["started"]
    if state.get("deadline"):
        return state["deadline"] - cfg["ttl_minutes"] * 60
    return now


def reread(path, cfg):
    """CONFIG as it is now (the role rewrites it on a ttl/idle edit); the last good one if unreadable."""
    try:
        with open(path) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return cfg


def run(cfg, path=None):
    state_path = os.path.join(cfg["state_dir"], "state.json")
    state = read_state(cfg["state_dir"])
    now = time.time()
    state.update(started=started_at(state, cfg, now), pid=os.getpid(), idle_since=None, state="watching")
    state["deadline"] = state["started"] + cfg["ttl_minutes"] * 60 if cfg["ttl_minutes"] > 0 else None
    write_state(state_path, state)
    before = cpu_times()
    while True:
        time.sleep(cfg["check_interval_s"])
        cfg = reread(path, cfg) if path else cfg
        state["deadline"] = state["started"] + cfg["ttl_minutes"] * 60 if cfg["ttl_minutes"] > 0 else None
        now, after = time.time(), cpu_times()
        busy = (training_running(cfg["training_pattern"])
                or cpu_percent(before, after) >= cfg["idle_cpu_percent"]
                or gpu_percent() >= cfg["idle_gpu_percent"])
        before = after
        state["idle_since"] = None if busy else (state.get("idle_since") or now)
        state.update(checked_at=now, state="busy" if busy else "idle")
        reason = None
        if state.get("deadline") and now >= state["deadline"]:
            reason = "ttl"
        elif cfg["idle_minutes"] > 0 and state["idle_since"] and now - state["idle_since"] >= cfg["idle_minutes"] * 60:
            reason = "idle"
        if reason:
            state.update(state=f"shutting down ({reason})", acted_at=now)
            write_state(state_path, state)
            subprocess.run(cfg["shutdown_command"], check=False)
            return 0
        write_state(state_path, state)


def read_state(state_dir):
    try:
        with open(os.path.join(state_dir, "state.json")) as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return {}


def daemonize(cfg, path=None):
    """Start the guard detached unless one is already running; prints started or running."""
    state = read_state(cfg["state_dir"])
    pid = state.get("pid")
    if pid and os.path.exists(f"/proc/{pid}") and not str(state.get("state", "")).startswith("shutting"):
        print("running")
        return 0
    if os.fork():
        print("started")
        return 0
    os.setsid()
    if os.fork():
        os._exit(0)
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os._exit(run(cfg, path) or 0)


def main(argv):
    daemon = "--daemon" in argv
    paths = [a for a in argv if a != "--daemon"]
    if len(paths) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    with open(paths[0]) as fh:
        cfg = json.load(fh)
    return daemonize(cfg, paths[0]) if daemon else run(cfg, paths[0])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
