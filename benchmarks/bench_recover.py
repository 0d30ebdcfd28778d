"""Reclaim to resume on the `hosts` target, split into its parts (not a test; `make bench`).

Three SSH machines in network namespaces (tests/e2e/netns.py; needs root, sshd and iproute2):
two active, one spare. The digits job checkpoints every 5 steps on the shared folder; at step 30
every process of host 2 is killed (a reclaim). `trainkit train --recover` (poll 1 s, backoff 1 s)
brings in the spare. From the run's events.jsonl and rank 0's log:

    detection      kill -> `preempted` event (goal: <= 30 s after the node is gone)
    stop           `preempted` -> `replaced` (SIGTERM to the survivors, until they stopped)
    replacement    picking the spare
    provisioning   site.yml --limit <spare>
    relaunch       backoff + launch -> the new attempt's first log line (torchrun + rendezvous)
    checkpoint     first log line -> "resumed from" (load and restore)
    first step     "resumed from" -> first step record after resume
    lost work      steps redone (last step seen - resumed step) vs the checkpoint interval (5)

Set TRAINKIT_E2E_NETNS_SUBNET / _PREFIX to run it next to other namespace users.
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

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "e2e"))
TRAINKIT = Path(sys.executable).parent / "trainkit"
KILL_AT = 30
SITE_VARS = {"base_packages": [], "base_manage_kernel": False, "base_manage_time_sync": False,
             "nvidia_accelerator_override": "none", "trainkit_venv_mode": "reuse",
             "trainkit_node_python": sys.executable}
ARGS = ["--config", str(REPO / "examples/train/digits.yaml"), "epochs=8", "export.onnx=false", "plot=false",
        "tensorboard=false", "checkpoint.interval=null", "checkpoint.every_n_steps=5", "log_every=1",
        "workers=0", "--poll", "1", "--backoff", "1", "--recover"]


def main() -> None:
    from netns import NetnsCluster, missing_tools

    missing = missing_tools()
    if missing:
        print(f"bench_recover: skipped, namespace hosts need {', '.join(missing)}")
        return
    with tempfile.TemporaryDirectory(prefix="tkbr") as tmp:
        base = Path(tmp)
        trio = NetnsCluster(base, count=3, prefix=os.environ.get("TRAINKIT_E2E_NETNS_PREFIX", "tkbench"),
                            local_root=base / "node-local",
                            subnet=os.environ.get("TRAINKIT_E2E_NETNS_SUBNET", "198.51.100"))
        try:
            trio.start()
            report(run(trio, base))
        finally:
            trio.stop()


def run(trio, base: Path) -> dict:
    shared, ws = base / "shared", base / "ws"
    shared.mkdir()
    (ws / "group_vars").mkdir(parents=True)
    (ws / "group_vars" / "all.yml").write_text(yaml.safe_dump(SITE_VARS))
    hosts = [{"name": h.name, "address": h.address, "user": "root"} for h in trio.hosts]
    hosts[-1]["spare"] = True
    spec = base / "cluster.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "bench-spare", "cloud": "hosts", "hosts": hosts,
        "ssh": {"user": "root", "private_key": str(trio.key)},
        "storage": {"data_disk": {"enabled": False}, "nas": {"enabled": True, "mount_point": str(shared)}},
        "launch": {"nproc_per_node": 1, "python": sys.executable, "root": str(trio.local_root / "tk")}}))
    env = {**os.environ, **trio.ansible_env(), **trio.ansible_fact_cache(), "OMP_NUM_THREADS": "1"}
    common = [str(spec), "--workdir", str(ws)]
    subprocess.run([str(TRAINKIT), "apply", *common, "--yes"], env=env, check=True, capture_output=True)
    proc = subprocess.Popen([str(TRAINKIT), "train", *common, *ARGS], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        metrics = _wait_metrics(shared / "bench-spare" / "runs", proc)
        killed = time.time()
        for pid in trio.hosts[1].pids():
            os.kill(pid, signal.SIGKILL)
        proc.wait(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    run_dir = next((ws / "runs").iterdir())
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    return {"killed": killed, "events": events, "log": (run_dir / "logs" / "rank-0.log").read_text(),
            "rc": proc.returncode, "metrics": metrics}


def _wait_metrics(runs: Path, proc) -> Path:
    while proc.poll() is None:
        for m in runs.glob("*/metrics.jsonl"):
            if f'"step": {KILL_AT},' in m.read_text():
                return m
        time.sleep(0.2)
    raise RuntimeError("the run ended before the reclaim")


def _log_time(line: str) -> float:
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def report(r: dict) -> None:
    ev = {e["event"]: e for e in r["events"]}           # one reclaim: each kind once (launched: last)
    relaunch_at = ev["launched"]["time"]
    lines = [ln for ln in r["log"].splitlines() if re.match(r"\d{4}-\d\d-\d\d ", ln) and _log_time(ln) > relaunch_at]
    first_line = _log_time(lines[0])
    resumed_line = _log_time(next(ln for ln in lines if "resumed from" in ln))
    parts = [("detection", ev["preempted"]["time"] - r["killed"]),
             ("stop survivors", ev["replaced"]["time"] - ev["preempted"]["time"] - ev["replaced"]["took_s"]),
             ("replacement", ev["replaced"]["took_s"]),
             ("provisioning", ev["provisioned"]["took_s"]),
             ("relaunch", first_line - ev["provisioned"]["time"]),
             ("checkpoint load", resumed_line - first_line),
             ("first step", ev["resumed"]["first_step_at"] - resumed_line)]
    total = ev["resumed"]["first_step_at"] - r["killed"]
    print(f"bench_recover: reclaim at step {KILL_AT} -> first step after resume "
          f"(exit {r['rc']}, {total:.1f} s in all)")
    for name, secs in parts:
        print(f"  {name:<16} {secs:7.2f} s  {secs / total:6.1%}")
    lost = ev["resumed"]["lost_steps"]
    print(f"  lost work: {lost} steps ({ev['resumed']['lost_s']} s) of a 5-step checkpoint interval "
          f"(ratio {lost / 5:.2f}); detection goal <= 30 s: {'met' if parts[0][1] <= 30 else 'missed'}")


if __name__ == "__main__":
    main()
