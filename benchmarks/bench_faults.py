"""Kill -> first resumed step, per fault, on the `hosts` target (not a test; `make bench`).

Four SSH machines in network namespaces (tests/e2e/netns.py; needs root, sshd and iproute2): two
active, two spares, one cluster for every fault. The digits job checkpoints every CKPT_EVERY steps
on the shared folder; once it logged step KILL_AT the fault strikes, and `trainkit train
--recover` (poll 1 s, backoff 1 s) must bring the run to completion. Killed machines are booted
again before the next fault. Per fault, from the run's events.jsonl:

    kill -> first step    the fault -> the first step the relaunched job logged
    lost steps            the last step logged before the relaunch - the step resumed from,
                          against the checkpoint interval (ratio <= 1: at most one interval)

Faults: one worker; the head (the rendezvous must form around a new head); both active nodes;
the worker, then the spare put in its place while it is provisioned (the next spare takes over);
the node-side rows of benchmarks/faults_node.py: a hung worker (SIGSTOP), a full shared disk;
and the cluster-side rows of benchmarks/faults_cluster.py (issue 39): clock skew, destroy with a
node gone, a fault after destroy+apply (on the same four machines), a lost RunInstances answer and
a replacement refused in every zone (moto behind the fault proxy). A row with no step to resume
prints the seconds of its action instead.

Row groups: `python -m benchmarks.bench_faults --rows cluster moto` (nodes, node-side, cluster:
the namespace rows of faults_cluster.py, moto; all by default: `python -m benchmarks faults`). Set TRAINKIT_E2E_NETNS_SUBNET / _PREFIX to run it next
to other namespace users.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "e2e"))
TRAINKIT = Path(sys.executable).parent / "trainkit"
KILL_AT, CKPT_EVERY = 15, 5
SITE_VARS = {"base_packages": [], "base_manage_kernel": False, "base_manage_time_sync": False,
             "nvidia_enabled": False, "ascend_enabled": False, "trainkit_venv_mode": "reuse",
             "trainkit_node_python": sys.executable}
ARGS = ["--config", str(REPO / "examples/train/digits.yaml"), "epochs=4", "export.onnx=false", "plot=false",
        "tensorboard=false", "checkpoint.interval=null", f"checkpoint.every_n_steps={CKPT_EVERY}",
        "log_every=1", "workers=0", "--poll", "1", "--backoff", "1", "--recover"]
# (name, active machines killed, the spare put in is killed while provisioned)
FAULTS = [("one worker", ("worker",), False), ("the head", ("head",), False),
          ("both nodes", ("head", "worker"), False), ("spare dies in provisioning", ("worker",), True)]


GROUPS = ("nodes", "node-side", "cluster", "moto")


def main(groups: tuple[str, ...] = GROUPS) -> None:
    from benchmarks import faults_cluster, faults_node

    rows = []
    if "nodes" in groups or "cluster" in groups:
        with four_hosts("bench_faults", "tkbf") as bench:
            if bench is None:
                return
            rows += [fault(*bench, *f) for f in FAULTS] if "nodes" in groups else []
            rows += faults_cluster.host_rows(*bench) if "cluster" in groups else []   # destroy last
    if "node-side" in groups:
        rows += faults_node.rows()   # hung, shared disk full (issue 39): their own machines
    if "moto" in groups:
        rows += faults_cluster.moto_rows()
    report(rows)


@contextlib.contextmanager
def four_hosts(name: str, tmp_prefix: str, shared_size: str | None = None) -> Iterator[tuple | None]:
    """(the four namespace machines, base folder, spec arguments, environment) with the cluster
    applied; None (and a line saying why) where namespace hosts cannot run. Stopped at the end.
    `shared_size`: the shared folder is a tmpfs of that size, mounted before the machines start
    (each one's mount namespace then holds the same tmpfs: one storage that can fill up)."""
    from netns import NetnsCluster, missing_tools

    missing = missing_tools()
    if missing:
        print(f"{name}: skipped, namespace hosts need {', '.join(missing)}")
        yield None
        return
    with tempfile.TemporaryDirectory(prefix=tmp_prefix) as tmp:
        base = Path(tmp)
        four = NetnsCluster(base, count=4, prefix=os.environ.get("TRAINKIT_E2E_NETNS_PREFIX", "tkbench"),
                            local_root=base / "node-local",
                            subnet=os.environ.get("TRAINKIT_E2E_NETNS_SUBNET", "198.51.100"))
        if shared_size:
            (base / "shared").mkdir()
            subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={shared_size}", "tmpfs", str(base / "shared")],
                           check=True)
        try:
            four.start()
            common, env = setup(four, base)
            yield four, base, common, env
        finally:
            four.stop()
            if shared_size:
                subprocess.run(["umount", "-l", str(base / "shared")], check=False)


def setup(four, base: Path) -> tuple[list[str], dict]:
    shared, ws = base / "shared", base / "ws"
    shared.mkdir(exist_ok=True)
    (ws / "group_vars").mkdir(parents=True)
    (ws / "group_vars" / "all.yml").write_text(yaml.safe_dump(SITE_VARS))
    hosts = [{"name": h.name, "address": h.address, "user": "root", **({"spare": True} if i >= 2 else {})}
             for i, h in enumerate(four.hosts)]
    spec = base / "cluster.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "bench-faults", "cloud": "hosts", "hosts": hosts,
        "ssh": {"user": "root", "private_key": str(four.key)},
        "storage": {"data_disk": {"enabled": False}, "nas": {"enabled": True, "mount_point": str(shared)}},
        "launch": {"nproc_per_node": 1, "python": sys.executable, "root": str(four.local_root / "tk")}}))
    env = {**os.environ, **four.ansible_env(), **four.ansible_fact_cache(), "OMP_NUM_THREADS": "1"}
    common = [str(spec), "--workdir", str(ws)]
    subprocess.run([str(TRAINKIT), "apply", *common, "--yes"], env=env, check=True, capture_output=True)
    return common, env


def fault(four, base: Path, common: list[str], env: dict, name: str, kill: tuple[str, ...], spare: bool,
          args: list[str] = ARGS) -> dict:
    for h in four.hosts:
        if not h.pids():
            four.revive(h)
    by_name = {h.name: h for h in four.hosts}
    active = _active(base, four)
    before = set((base / "ws" / "runs").glob("*")) if (base / "ws" / "runs").is_dir() else set()
    proc = subprocess.Popen([str(TRAINKIT), "train", *common, *args], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_step(base / "shared" / "bench-faults" / "runs", before, proc)
        killed = time.time()
        for who in kill:
            four.kill(by_name[active[0] if who == "head" else active[1]])
        while spare and proc.poll() is None:
            new = [n for n in _active(base, four) if n not in active]
            if new:
                four.kill(by_name[new[0]])
                break
            time.sleep(0.1)
        proc.wait(timeout=900)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    run_dir = max(set((base / "ws" / "runs").glob("*")) - before, key=lambda p: p.stat().st_mtime)
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    resumed = next((e for e in events if e["event"] == "resumed"), {})
    return {"fault": name, "rc": proc.returncode, "lost": resumed.get("lost_steps"),
            "to_step": (resumed["first_step_at"] - killed) if resumed.get("first_step_at") else None}


def _active(base: Path, four) -> list[str]:
    path = base / "ws" / "hosts.json"
    return json.loads(path.read_text())["active"] if path.is_file() else [h.name for h in four.hosts[:2]]


def _wait_step(runs: Path, before: set, proc) -> None:
    names = {p.name for p in before}
    while proc.poll() is None:
        for m in runs.glob("*/metrics.jsonl"):
            if m.parent.name not in names and f'"step": {KILL_AT},' in m.read_text():
                return
        time.sleep(0.2)
    raise RuntimeError("the run ended before the fault")


def report(rows: list[dict]) -> None:
    print(f"bench_faults: kill at step {KILL_AT} -> first step after resume, per fault "
          f"(checkpoint every {CKPT_EVERY} steps)")
    for r in rows:
        if r.get("action_s") is not None:   # no step to resume: the action's own seconds
            print(f"  {r['fault']:<28} exit {r['rc']}  action {r['action_s']:7.1f} s  {r.get('note', '')}")
            continue
        to_step = f"{r['to_step']:7.1f} s" if r["to_step"] is not None else "      - "
        lost = f"{r['lost']} steps (ratio {r['lost'] / CKPT_EVERY:.2f})" if r["lost"] is not None else "-"
        note = f"  {r['note']}" if r.get("note") else ""
        print(f"  {r['fault']:<28} exit {r['rc']}  kill -> first step {to_step}  lost {lost}{note}")


if __name__ == "__main__":
    import argparse

    cli = argparse.ArgumentParser(prog="python -m benchmarks.bench_faults", description=__doc__.split("\n")[0])
    cli.add_argument("--rows", nargs="+", choices=GROUPS, default=list(GROUPS), help="row groups to run")
    main(tuple(cli.parse_args().rows))

