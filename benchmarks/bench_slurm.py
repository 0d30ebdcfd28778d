"""Slurm's requeue vs trainkit's own supervisor on the same machines (not a test; `make bench`).

Three SSH machines in network namespaces (tests/e2e/netns.py; root, sshd, iproute2) that also run
a real Slurm (tests/e2e/slurm_cluster.py: Debian slurm-wlm 22.05 + munge; host 1 is the login
node and controller, each node offers one CPU). The digits job on two of them, one rank each,
checkpoint every CKPT_EVERY steps on a shared folder; once it logged step KILL_AT, every process of
the job's second node is killed (the machine is gone, slurmd with it). Three runs:

    own           `cloud: hosts`, `trainkit train --recover` (poll 1 s, backoff 1 s): the third
                  machine is the spare, provisioned by site.yml and launched by the supervisor
    slurm nudged  `cloud: slurm`, `trainkit train --detach`: sbatch with `--requeue`. The step
                  waits on the lost node until slurmctld marks it DOWN (SlurmdTimeout: 30 s in
                  the fixture's slurm.conf, 300 s by default, slurm.conf(5)) and requeues the
                  job. While the requeued job is PENDING the bench runs `scontrol update
                  JobId=<id> StartTime=now`, as an admin (or the tests) would
    slurm raw     the same without the nudge: Slurm holds a requeued job back before it may
                  start again, AuthInfo=cred_expire (default 120 s: "This also controls how long a
                  requeued job must wait before starting again", slurm.conf(5)), then waits for
                  its next scheduling pass

Each run prints (from metrics.jsonl, the engine's wall-clock record times, one clock here):

    submit -> first step          `trainkit train` started -> the first step record
    kill -> first resumed step    the kill -> the first step record after the second `run` record
    lost steps                    last step logged before the kill - the step resumed from

and the Slurm/own ratio of each. The Slurm rows split the kill path: kill -> slurmctld requeued
the job (its log), -> the next start began (the batch shell's `date -Is`, 1 s resolution: hold
and scheduling), -> the first resumed step (torchrun, rendezvous, checkpoint load).

Run: `python -m benchmarks slurm` (all three) or `python -m benchmarks.bench_slurm --rows own
nudged` (own, nudged, raw). Set TRAINKIT_E2E_NETNS_SUBNET / _PREFIX to run it next to other
namespace users.

Measured 2026-12-05, two runs, on a 2-core VM shared with three other sessions' work (load
average 2 to 3: CPU-bound parts such as site.yml and torchrun start-up are slower than on an idle
machine), Slurm 22.05.8; seconds, Slurm/own ratio in brackets:

    submit -> first step        own 11.7, 22.6   nudged 8.8 (0.8x), 15.7 (0.7x)   raw 17.6 (1.5x), 18.2 (0.8x)
    kill -> first resumed step  own 26.1, 43.3   nudged 42.1 (1.6x), 55.9 (1.3x)  raw 170.2 (6.5x), 173.3 (4.0x)
    Slurm's kill path           requeued 34-41 s after the kill (SlurmdTimeout=30), the next start
                                1-2 s later nudged, 121-125 s raw; first step 7-13 s after that

docs/slurm.md ("Figures") reads them.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import yaml

from benchmarks.bench_faults import REPO, SITE_VARS, TRAINKIT
from trainkit.runs.slurm_jobs import ENDED

sys.path.insert(0, str(REPO / "tests" / "e2e"))
KILL_AT, CKPT_EVERY = 15, 5
JOB = ["--config", str(REPO / "examples/train/digits.yaml"), "epochs=4", "export.onnx=false", "plot=false",
       "tensorboard=false", "checkpoint.interval=null", f"checkpoint.every_n_steps={CKPT_EVERY}",
       "log_every=1", "workers=0"]
ROWS = ("own", "nudged", "raw")
RUN_TIMEOUT_S = 900   # the raw row alone waits out the ~136 s hold, on a loaded 2-core machine


def main(rows: tuple[str, ...] = ROWS) -> None:
    import netns
    import slurm_cluster

    missing = netns.missing_tools() + slurm_cluster.missing_tools()
    if missing:
        print(f"bench_slurm: skipped, it needs {', '.join(missing)}")
        return
    with tempfile.TemporaryDirectory(prefix="tkbs") as tmp:
        base = Path(tmp)
        trio = netns.NetnsCluster(base, count=3, prefix=os.environ.get("TRAINKIT_E2E_NETNS_PREFIX", "tkbench"),
                                  local_root=base / "node-local",
                                  subnet=os.environ.get("TRAINKIT_E2E_NETNS_SUBNET", "198.51.100"))
        try:
            trio.start()
            slurm = slurm_cluster.SlurmCluster(trio, base / "slurm").start()
            results = {}
            for row in ROWS:
                if row in rows:
                    results[row] = own(trio, base) if row == "own" else through_slurm(slurm, base, row)
                    _boot_again(trio, slurm)
            report(results)
        finally:
            trio.stop()


def _boot_again(trio, slurm) -> None:
    for h in trio.hosts:
        if not h.pids():
            trio.revive(h)
            slurm.rejoin(h)


def own(trio, base: Path) -> dict:
    """The `hosts` target on the three machines (the third a spare), `train --recover`."""
    shared, ws = base / "shared", base / "ws-own"
    shared.mkdir()
    (ws / "group_vars").mkdir(parents=True)
    (ws / "group_vars" / "all.yml").write_text(yaml.safe_dump(SITE_VARS))
    hosts = [{"name": h.name, "address": h.address, "user": "root", **({"spare": True} if i == 2 else {})}
             for i, h in enumerate(trio.hosts)]
    spec = _write(base / "own.yaml", {
        "name": "bench-own", "cloud": "hosts", "hosts": hosts, "ssh": {"user": "root", "private_key": str(trio.key)},
        "storage": {"data_disk": {"enabled": False}, "nas": {"enabled": True, "mount_point": str(shared)}},
        "launch": {"nproc_per_node": 1, "python": sys.executable, "root": str(trio.local_root / "tk")}})
    env = {**os.environ, **trio.ansible_env(), **trio.ansible_fact_cache(), "OMP_NUM_THREADS": "1"}
    common = [str(spec), "--workdir", str(ws)]
    subprocess.run([str(TRAINKIT), "apply", *common, "--yes"], env=env, check=True, capture_output=True)
    started = time.time()
    proc = subprocess.Popen([str(TRAINKIT), "train", *common, *JOB, "--recover", "--poll", "1", "--backoff", "1"],
                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        metrics = _wait_step(shared / "bench-own" / "runs", proc.poll)
        killed = time.time()
        trio.kill(trio.hosts[1])   # the worker; the head keeps the rendezvous
        proc.wait(timeout=RUN_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return {**_figures(metrics, started, killed), "rc": proc.returncode}


def through_slurm(slurm, base: Path, row: str) -> dict:
    """`cloud: slurm` through the login node: sbatch, the node killed, Slurm's requeue; with the
    StartTime nudge when `row` is "nudged"."""
    cluster, shared, ws = slurm.cluster, base / f"slurm-shared-{row}", base / f"ws-{row}"
    spec = _write(base / f"slurm-{row}.yaml", {
        "name": f"bench-{row}", "cloud": "slurm", "nodes": 2, "launch": {"nproc_per_node": 1},
        "slurm": {"login": {"address": slurm.login.address, "user": "root", "key": str(cluster.key)},
                  "partition": "debug", "time": "30", "workdir": str(shared), "python": sys.executable}})
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    common = [str(spec), "--workdir", str(ws)]
    subprocess.run([str(TRAINKIT), "apply", *common, "--yes"], env=env, check=True, capture_output=True)
    started = time.time()
    sub = subprocess.run([str(TRAINKIT), "train", *common, *JOB, "--detach"], env=env, check=True,
                         capture_output=True, text=True)
    run_id = sub.stdout.strip().splitlines()[-1]
    job_id = json.loads((ws / "runs" / run_id / "run.json").read_text())["slurm_job"]
    state = lambda: _state(slurm, job_id)   # noqa: E731
    metrics = _wait_step(shared / ".trainkit" / f"bench-{row}" / "runs", lambda: state() in _ENDED[:-1])
    node1 = re.search(r"trainkit: node 1 \((\S+),", (metrics.parent / "logs" / "node-1.log").read_text()).group(1)
    killed = time.time()
    cluster.kill(next(h for h in slurm.hosts if h.name == node1))
    deadline, last = time.monotonic() + RUN_TIMEOUT_S, None
    while time.monotonic() < deadline and (last := state()) not in _ENDED:
        if row == "nudged" and last == "PENDING":
            cluster.ssh(slurm.login, f"scontrol update JobId={job_id} StartTime=now", check=False)
        time.sleep(1)
    batch = (metrics.parent / "logs" / f"slurm-{job_id}.out").read_text()
    ctld = [ln for ln in (slurm.dir / "slurmctld.log").read_text(errors="replace").splitlines()
            if f"JobId={job_id}" in ln and ("equeue" in ln or "ode" in ln)]
    if os.environ.get("BENCH_SLURM_VERBOSE"):
        print(batch, *ctld, sep="\n")
    return {**_figures(metrics, started, killed), "rc": last, "parts": _slurm_parts(batch, ctld, killed)}


_ENDED = (*ENDED, None)   # None: the scheduler knows the job no more


def _state(slurm, job_id: str) -> str | None:
    out = slurm.cluster.ssh(slurm.login, f"squeue -h -j {job_id} -o %T 2>/dev/null; scontrol show job "
                                         f"{job_id} 2>/dev/null | grep -o 'JobState=[A-Z_]*'", check=False).stdout
    return out.split()[0].removeprefix("JobState=") if out.split() else None


def _write(path: Path, spec: dict) -> Path:
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def _wait_step(runs: Path, ended) -> Path:
    """metrics.jsonl of the run under `runs` once it logged step KILL_AT; RuntimeError when
    `ended()` says the run stopped first."""
    while not ended():
        for m in runs.glob("*/metrics.jsonl"):
            if f'"step": {KILL_AT},' in m.read_text():
                return m
        time.sleep(0.5)
    raise RuntimeError(f"the run under {runs} ended before step {KILL_AT}")


def _figures(metrics: Path, started: float, killed: float) -> dict:
    """submit -> first step, kill -> first step after the second start, steps lost (metrics.jsonl)."""
    recs = [json.loads(x) for x in metrics.read_text().splitlines()]
    starts = [i for i, r in enumerate(recs) if r["kind"] == "run"]
    steps = [r for r in recs if r["kind"] == "step"]
    out = {"to_first": steps[0]["time"] - started, "to_resumed": None, "lost": None,
           "completed": json.loads((metrics.parent / "summary.json").read_text()).get("status")
           if (metrics.parent / "summary.json").is_file() else None}
    if len(starts) > 1:
        resumed = next(r for r in recs[starts[-1]:] if r["kind"] == "step")
        before = max(r["step"] for r in steps if r["time"] <= killed)
        out.update(to_resumed=resumed["time"] - killed, lost=before - recs[starts[-1]]["resumed_from_step"],
                   starts=len(starts))
    return out


_BEGIN = re.compile(r"trainkit: job \d+ \(restart \d+\) .*?at (\S+)$", re.M)
_CTLD_TIME = re.compile(r"^\[([0-9T:.-]+)\]")


def _slurm_parts(batch: str, ctld: list[str], killed: float) -> dict:
    """kill -> slurmctld requeued the job (its log, local time), -> the last start began (the
    batch shell's log)."""
    requeued = [_CTLD_TIME.match(ln) for ln in ctld if "requeue" in ln.lower()]
    begins = [datetime.fromisoformat(t).timestamp() for t in _BEGIN.findall(batch)]
    if not requeued or not requeued[0] or len(begins) < 2:
        return {}
    at = datetime.fromisoformat(requeued[0].group(1)).timestamp()
    return {"detect_s": at - killed, "hold_s": begins[-1] - at, "restarts": len(begins) - 1}


def report(results: dict) -> None:
    print(f"bench_slurm: digits, 2 nodes x 1 rank on 3 namespace hosts, the second node killed at step "
          f"{KILL_AT} (checkpoint every {CKPT_EVERY} steps); seconds, and the ratio to `own`")
    own_r = results.get("own")
    for row, r in results.items():
        ratio = {k: f" ({r[k] / own_r[k]:.1f}x own)" if own_r and row != "own" and r[k] and own_r[k] else ""
                 for k in ("to_first", "to_resumed")}
        resumed = f"{r['to_resumed']:7.1f} s{ratio['to_resumed']}" if r["to_resumed"] is not None else "      -"
        print(f"  {row:<7} submit -> first step {r['to_first']:6.1f} s{ratio['to_first']:<13} "
              f"kill -> first resumed step {resumed:<22} lost {r['lost']} steps, end {r['rc']} {r['completed']}")
        parts = r.get("parts") or {}
        if parts:
            rest = r["to_resumed"] - parts["detect_s"] - parts["hold_s"] if r["to_resumed"] is not None else 0
            print(f"          kill -> requeued {parts['detect_s']:.0f} s (node DOWN: SlurmdTimeout), -> start "
                  f"{parts['restarts']} began {parts['hold_s']:.0f} s (hold, scheduling), -> first step {rest:.0f} s")


if __name__ == "__main__":
    import argparse

    cli = argparse.ArgumentParser(prog="python -m benchmarks.bench_slurm", description=__doc__.split("\n")[0])
    cli.add_argument("--rows", nargs="+", choices=ROWS, default=list(ROWS), help="runs to make")
    main(tuple(cli.parse_args().rows))
