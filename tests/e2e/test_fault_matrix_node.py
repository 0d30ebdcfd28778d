"""The fault matrix of `train --recover` on the `hosts` target, the node-side faults of issue 39
(the bench: faultbench.py; the shared folder here is a tmpfs of SHARED_SIZE mounted before the
machines start, so that every machine sees one storage that can fill up):

- hung: every process of the worker's job (torchrun and its rank) is stopped (SIGSTOP), as a
  wedged GPU or a D-state NFS wait leaves it; the head then waits in its collective. The
  watchdog finds no step for recover.hang_after_s, stack dumps are collected into the run
  folder, the jobs are stopped (SIGTERM, SIGKILL 30 s later) and the run is relaunched from its
  checkpoint as a restart (--max-restarts-on-errors 1): no node replaced, never `cancelled`;
- shared_full: the shared storage fills up (another writer) once checkpoint KILL_AT is
  complete; the run ends as a storage fault (exit 14, `storage_fault`, `runs` says so), no node
  replaced; with the space freed, `--resume --recover` completes it, losing at most one interval;
- the start gate: shared storage under doctor's 5 GiB fails every node alike, which replacing
  cannot cure: exit 14 and no spare put in;
- `--resume --recover` of a completed run is refused before it writes or replaces anything;
- skewed: the job's wall clock runs SKEW_S behind the controller's on every node (an LD_PRELOAD
  shim built here offsets CLOCK_REALTIME for the job's processes alone: the kernel's clock, the
  supervisor's and the controller's are untouched) and the worker is killed: the relaunch's
  first step is seen at once, after the kill on the controller's clock (it was compared with
  the node's wall time: a 300 s blind wait and a negative kill -> first step).

Each row asserts kill -> first step (controller clock, never negative) and steps lost.
The other faults: test_fault_matrix.py (nodes lost) and test_fault_matrix_control.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from faultbench import CKPT_EVERY, CLUSTER, DIGITS, FAST, KILL_AT, Bench, completed_run, newest_run
from netns import NetnsCluster, missing_tools, names_for
from test_hosts_multinode import _kill_group
from test_recover_hosts import _assert_same_weights, _runs, _wait_step

SHARED_SIZE = "256m"     # the runs' folders and checkpoints (a digits shard ~190 KB, keep 3) fit many times
HANG_AFTER_S = 10        # recover.hang_after_s of the hung row: the default window is 300 s at least
STOP_AT = 12             # the hung row stops the worker here: two steps after a checkpoint (every 5)
NO_DOCTOR = ["--no-doctor"]  # doctor's 5 GiB floor fails a 256 MiB shared tmpfs: the gate row proves it
STORAGE = 14             # trainkit.errors.STORAGE
SKEW_S = -120            # the head 120 s behind
# CLOCK_REALTIME (time.time(), datetime.now()) offset by $TK_CLOCK_OFFSET_S; every other clock
# (CLOCK_MONOTONIC: torch's timeouts, the rendezvous) passes through.
CLOCK_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <time.h>
int clock_gettime(clockid_t id, struct timespec *ts) {
    static int (*real)(clockid_t, struct timespec *);
    if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    int rc = real(id, ts);
    const char *off = getenv("TK_CLOCK_OFFSET_S");
    if (rc == 0 && off && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) ts->tv_sec += atol(off);
    return rc;
}
"""


@pytest.fixture(scope="module")
def bench(request, tmp_path_factory):
    prefix, subnet = names_for(request.module.__name__)
    missing = missing_tools()
    if missing:
        pytest.fail("namespace hosts need: " + ", ".join(missing))
    base = tmp_path_factory.mktemp("fn")
    (base / "shared").mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={SHARED_SIZE}", "tmpfs", str(base / "shared")], check=True)
    request.addfinalizer(lambda: subprocess.run(["umount", "-l", str(base / "shared")], check=False))
    cluster = NetnsCluster(base, count=4, prefix=prefix, local_root=base / "node-local", subnet=subnet)
    request.addfinalizer(cluster.stop)
    cluster.start()   # after the mount: each machine's mount namespace holds the same tmpfs
    b = Bench(cluster, base)
    applied = b.tk("apply", *b.common, "--yes")
    assert applied.returncode == 0, applied.stdout
    ref = b.tk("train", *b.common, *DIGITS, *FAST, *NO_DOCTOR)
    assert ref.returncode == 0, ref.stdout
    b.ref = _runs(b.ws)[-1]
    return b


def _config(b: Bench, name: str, extra: dict) -> list[str]:
    cfg = {**yaml.safe_load(Path(DIGITS[1]).read_text()), **extra}
    (b.base / name).write_text(yaml.safe_dump(cfg))
    return ["--config", str(b.base / name), *DIGITS[2:]]


def _job_pids(b: Bench, host: str, run_id: str) -> list[int]:
    """The worker's job: torchrun and its ranks (not the supervisor, not sshd)."""
    out = []
    for pid in b.host(host).pids():
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "torch.distributed.run" in cmd or ("trainkit" in cmd and f"runs/{run_id}" in cmd and "supervise" not in cmd
                                              and "launch.sh" not in cmd):
            out.append(pid)
    return out


def _events(run: Path) -> list[dict]:
    return [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]


def test_fault_matrix_hung_row_the_watchdog_dumps_stops_and_relaunches_without_replacing(bench):
    b = bench
    b.revive_all()
    head, worker = b.active()
    before = set(_runs(b.ws))
    config = _config(b, "digits-hang.yaml", {"recover": {"hang_after_s": HANG_AFTER_S}})
    proc = b.start("train", *b.common, *config, *FAST, *NO_DOCTOR, "--recover", "--max-restarts-on-errors", "1")
    stopped: list[int] = []
    try:
        run = newest_run(b, before, proc)
        # mid-interval and mid-epoch (digits: 19 steps an epoch), in the `train` phase: a save's or an
        # evaluation's window is 6 times longer
        _wait_step(b.shared / CLUSTER / "runs" / run.name / "metrics.jsonl", STOP_AT, proc)
        stopped = _job_pids(b, worker, run.name)
        assert stopped, "no torchrun on the worker"
        fault_at = time.time()
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)
        out, _ = proc.communicate(timeout=600)
    finally:
        _kill_group(proc)
        for pid in stopped:   # a failed row must not leave stopped processes behind
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    assert proc.returncode == 0, out
    record, summary, events = completed_run(run)
    kinds = [e["event"] for e in events]
    hung = next(e for e in events if e["event"] == "hung")   # the stopped worker, or the head waiting on it
    assert hung["stalls"] and all(s["age_s"] >= s["window_s"] >= HANG_AFTER_S for s in hung["stalls"]), hung
    dumps = next(e for e in events if e["event"] == "hang_dumps")["files"]
    worker_dump = (run / next(f for f in dumps if worker in f)).read_text()
    assert "State:\tT (stopped)" in worker_dump, worker_dump[:2000]
    assert "cancelled" not in kinds and "replaced" not in kinds, kinds
    assert b.active() == [head, worker]
    assert len(record["attempts"]) == 2 and record["attempts"][0]["outcome"] == "hung", record["attempts"]
    [resumed] = [e for e in events if e["event"] == "resumed"]
    assert 0 <= resumed["lost_steps"] <= CKPT_EVERY, resumed
    assert resumed["first_step_at"] - fault_at >= HANG_AFTER_S, (resumed, fault_at)   # kill -> first step
    _assert_same_weights(b.shared / CLUSTER / "checkpoints", b.ref.name, run.name)
    b.no_leftovers(run.name)


def _fill(folder: Path) -> Path:
    """Fill the shared tmpfs from outside the run (another writer), as a full NAS is; raw writes
    (a buffered close would raise ENOSPC again)."""
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            os.write(fd, b"\0" * 2**20)
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


def test_fault_matrix_shared_full_row_is_a_storage_fault_then_resumes_once_freed(bench):
    b = bench
    b.revive_all()
    active = b.active()
    before = set(_runs(b.ws))
    proc = b.start("train", *b.common, *DIGITS, *FAST, *NO_DOCTOR, "--recover")
    filler = None
    try:
        run = newest_run(b, before, proc)
        marker = b.shared / CLUSTER / "checkpoints" / run.name / f"step-{KILL_AT:08d}" / "COMPLETE"
        deadline = time.monotonic() + 240
        while not marker.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read() if proc.poll() else "slow"
            time.sleep(0.05)
        fault_at = time.time()
        filler = _fill(b.shared)
        out, _ = proc.communicate(timeout=600)
    finally:
        _kill_group(proc)
    try:
        assert proc.returncode == STORAGE, out
        assert "no space left" in out and "no node was replaced" in out, out
        events = _events(run)
        kinds = [e["event"] for e in events]
        assert "storage_fault" in kinds and "replaced" not in kinds and "unreachable" not in kinds, kinds
        assert json.loads((run / "run.json").read_text())["status"] == "failed"
        assert b.active() == active
        runs = b.tk("runs", *b.common, "--json")
        row = next(r for r in json.loads(runs.stdout) if r["run_id"] == run.name)
        assert row["status"] == "failed" and "ENOSPC" in (row.get("fault") or ""), row
    finally:
        if filler:
            filler.unlink()
    resumed_at = time.time()
    again = b.tk("train", *b.common, "--resume", run.name, *FAST, *NO_DOCTOR, "--recover")
    assert again.returncode == 0, again.stdout
    record, summary, events = completed_run(run)
    [resumed] = [e for e in events if e["event"] == "resumed"]
    # old checkpoints pruned (checkpoint.keep) give the filled disk room for a save or two more
    assert resumed["step"] >= KILL_AT and 0 <= resumed["lost_steps"] <= CKPT_EVERY, resumed
    assert resumed["first_step_at"] >= resumed_at > fault_at, resumed   # one clock: never before the relaunch
    assert b.active() == active
    _assert_same_weights(b.shared / CLUSTER / "checkpoints", b.ref.name, run.name)
    b.no_leftovers(run.name)


def test_the_start_gate_never_swaps_nodes_for_shared_storage_under_doctor_s_floor(bench):
    b = bench
    b.revive_all()
    active = b.active()
    before = set(_runs(b.ws))
    out = b.tk("train", *b.common, *DIGITS, *FAST, "--recover")   # doctor on: 256 MiB < 5 GiB on every node
    assert out.returncode == STORAGE, out.stdout
    assert "shared_disk" in out.stdout and "none was replaced" in out.stdout, out.stdout
    assert b.active() == active and set(_runs(b.ws)) == before


def test_resume_recover_of_a_completed_run_is_refused_before_it_touches_anything(bench):
    b = bench
    events = (b.ref / "events.jsonl").read_text()
    record = (b.ref / "run.json").read_text()
    active = b.active()
    out = b.tk("train", *b.common, "--resume", b.ref.name, *FAST, "--recover")
    assert out.returncode == 2 and "completed: there is nothing to resume" in out.stdout, out.stdout
    assert (b.ref / "events.jsonl").read_text() == events and (b.ref / "run.json").read_text() == record
    assert b.active() == active


def _clock_shim(base: Path) -> Path:
    """The shim as a shared object, built with the machine's C compiler."""
    src, lib = base / "clockshim.c", base / "clockshim.so"
    src.write_text(CLOCK_SHIM)
    built = subprocess.run(["cc", "-shared", "-fPIC", "-o", str(lib), str(src), "-ldl"], capture_output=True, text=True)
    assert built.returncode == 0, f"the clock shim needs a C compiler (cc): {built.stderr}"
    return lib


def test_fault_matrix_skewed_row_a_job_clock_behind_the_controller_s_never_blinds_the_relaunch(bench):
    b = bench
    b.revive_all()
    head, worker = b.active()
    before = set(_runs(b.ws))
    lib = _clock_shim(b.base)
    config = _config(b, "digits-skew.yaml", {"env": {"LD_PRELOAD": str(lib), "TK_CLOCK_OFFSET_S": str(SKEW_S)}})
    proc = b.start("train", *b.common, *config, *FAST, *NO_DOCTOR, "--recover")
    try:
        run = newest_run(b, before, proc)
        metrics = b.shared / CLUSTER / "runs" / run.name / "metrics.jsonl"
        _wait_step(metrics, KILL_AT, proc)
        fault_at = time.time()
        b.cluster.kill(b.host(worker))
        out, _ = proc.communicate(timeout=600)
    finally:
        _kill_group(proc)
    assert proc.returncode == 0, out
    record, summary, events = completed_run(run)
    step_times = [json.loads(x)["time"] for x in metrics.read_text().splitlines() if '"kind": "step"' in x]
    assert step_times[0] < record["created_at"] + SKEW_S / 2, "the job's clock was not skewed"   # the fault is real
    [resumed] = [e for e in events if e["event"] == "resumed"]
    assert 0 <= resumed["lost_steps"] <= CKPT_EVERY, resumed
    assert resumed["first_step_at"] >= fault_at, (resumed, fault_at)   # kill -> first step: never negative
    relaunched = [e for e in events if e["event"] == "launched"][-1]["time"]
    assert resumed["first_step_at"] >= relaunched and resumed["time"] >= resumed["first_step_at"], resumed
    assert [e["node"] for e in events if e["event"] == "replaced"] == [worker], events
    _assert_same_weights(b.shared / CLUSTER / "checkpoints", b.ref.name, run.name)
    b.no_leftovers(run.name)
