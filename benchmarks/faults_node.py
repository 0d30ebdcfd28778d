"""bench_faults' node-side rows (issue 39), on their own four namespace machines whose shared
folder is a tmpfs of SHARED_SIZE mounted before they start (one storage every machine sees, that
can fill up). Not a benchmark module of its own: bench_faults.main() runs `rows()`.

    hung (SIGSTOP)      the worker's torchrun and rank stopped at step KILL_AT: the watchdog
                        (recover.hang_after_s HANG_AFTER_S) dumps the stacks, stops the jobs
                        (SIGTERM, SIGKILL 30 s later) and relaunches: kill -> first step, lost steps
    shared disk full    the shared storage filled once checkpoint KILL_AT is complete: the run
                        ends exit 14 (no node replaced); the space freed, `--resume --recover`:
                        fault -> first step of the resumed run (the resume started at once), lost

Both with --no-doctor: doctor's 5 GiB floor fails a small shared tmpfs (its own test row says so).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import yaml

from benchmarks.bench_faults import ARGS, KILL_AT, REPO, TRAINKIT, _active, _wait_step, four_hosts

SHARED_SIZE = "256m"
HANG_AFTER_S = 10
NO_DOCTOR = ["--no-doctor"]


def rows() -> list[dict]:
    with four_hosts("bench_faults (node rows)", "tkbn", shared_size=SHARED_SIZE) as bench:
        if bench is None:
            return []
        return [hung(*bench), shared_full(*bench)]


def _new_run(base: Path, before: set) -> Path:
    return max(set((base / "ws" / "runs").glob("*")) - before, key=lambda p: p.stat().st_mtime)


def _runs(base: Path) -> set:
    return set((base / "ws" / "runs").glob("*")) if (base / "ws" / "runs").is_dir() else set()


def _train(common: list[str], env: dict, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([str(TRAINKIT), "train", *common, *ARGS, *NO_DOCTOR, *extra], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def _row(name: str, rc: int, run_dir: Path, fault_at: float) -> dict:
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    resumed = next((e for e in events if e["event"] == "resumed"), {})
    return {"fault": name, "rc": rc, "lost": resumed.get("lost_steps"),
            "to_step": (resumed["first_step_at"] - fault_at) if resumed.get("first_step_at") else None}


def hung(four, base: Path, common: list[str], env: dict) -> dict:
    cfg = {**yaml.safe_load((REPO / "examples/train/digits.yaml").read_text()),
           "recover": {"hang_after_s": HANG_AFTER_S}}
    (base / "digits-hang.yaml").write_text(yaml.safe_dump(cfg))
    before = _runs(base)
    worker = next(h for h in four.hosts if h.name == _active(base, four)[1])
    proc = _train(common, env, "--config", str(base / "digits-hang.yaml"), "--max-restarts-on-errors", "1")
    stopped = []
    try:
        _wait_step(base / "shared" / "bench-faults" / "runs", before, proc)
        for pid in worker.pids():
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes() if Path(f"/proc/{pid}").exists() else b""
            if b"torch.distributed.run" in cmd or (b"trainkit" in cmd and b"supervise" not in cmd
                                                   and b"launch.sh" not in cmd and b"sshd" not in cmd):
                stopped.append(pid)
        fault_at = time.time()
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        proc.wait(timeout=900)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    return _row("hung (SIGSTOP)", proc.returncode, _new_run(base, before), fault_at)


def shared_full(four, base: Path, common: list[str], env: dict) -> dict:
    before = _runs(base)
    proc = _train(common, env)
    filler = base / "shared" / "filler"
    try:
        _wait_step(base / "shared" / "bench-faults" / "runs", before, proc)
        run_dir = _new_run(base, before)
        marker = base / "shared" / "bench-faults" / "checkpoints" / run_dir.name / f"step-{KILL_AT:08d}" / "COMPLETE"
        while not marker.exists() and proc.poll() is None:
            time.sleep(0.05)
        fault_at = time.time()
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            while True:
                os.write(fd, b"\0" * 2**20)
        except OSError:
            pass
        finally:
            os.close(fd)
        rc = proc.wait(timeout=900)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        filler.unlink(missing_ok=True)
    again = subprocess.run([str(TRAINKIT), "train", *common, "--resume", run_dir.name, *ARGS[-5:], *NO_DOCTOR],
                           env=env, capture_output=True, timeout=900)
    return _row(f"shared disk full (exit {rc})", again.returncode, run_dir, fault_at)
