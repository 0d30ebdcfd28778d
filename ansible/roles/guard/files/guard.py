#!/usr/bin/env python3
"""trainkit guard: shut this node down at its TTL, or once it has been idle long enough.

Usage: guard.py [--daemon] CONFIG.json. CONFIG (written by the Ansible role) holds ttl_minutes,
idle_minutes (0 = off), shutdown_command (argv), training_pattern (regex over process command
lines), idle_cpu_percent, idle_gpu_percent, check_interval_s and state_dir. The TTL deadline is
fixed the first time the guard starts and kept in STATE_DIR/state.json, so a restart does not
extend it. Idle = no process matches training_pattern, CPU below idle_cpu_percent and every GPU
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


def run(cfg):
    state_path = os.path.join(cfg["state_dir"], "state.json")
    state = read_state(cfg["state_dir"])
    now = time.time()
    if cfg["ttl_minutes"] > 0 and not state.get("deadline"):
        state["deadline"] = now + cfg["ttl_minutes"] * 60
    state.update(pid=os.getpid(), idle_since=None, state="watching")
    write_state(state_path, state)
    before = cpu_times()
    while True:
        time.sleep(cfg["check_interval_s"])
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


def daemonize(cfg):
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
    os._exit(run(cfg) or 0)


def main(argv):
    daemon = "--daemon" in argv
    paths = [a for a in argv if a != "--daemon"]
    if len(paths) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    with open(paths[0]) as fh:
        cfg = json.load(fh)
    return daemonize(cfg) if daemon else run(cfg)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
