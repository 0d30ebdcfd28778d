"""Multi-node for real on the `hosts` target: two SSH machines in network namespaces (netns.py),
made ready by Ansible over SSH, training the digits example with torchrun across both, surviving a
spot-style SIGTERM on the second machine, and cleaned up by destroy.

Choices the namespace machines force, and why they are honest:
- Shared storage: every namespace sees the same filesystem, so a folder under the test's tmp dir
  plays the NAS. There is no NFS server, so the spec says `storage.nas.enabled: true` with that
  folder as `mount_point`: on `hosts` trainkit mounts nothing (no Terraform NAS output, so the nas
  role skips) and treats mount_point as a shared path that is already there, as on machines whose
  NFS share the admins mount. Checkpoints and runs go to <mount_point>/<cluster>/, seen by both.
- Node-local paths: `launch.root` is the same path on both hosts, but each host's mount namespace
  bind-mounts its own folder there (like /opt on two real machines), so nothing collides.
- Python: the hosts' /usr/bin/python3 has no torch and installing torch into a fresh venv takes
  minutes, so the training uses the role's `trainkit_venv_mode: reuse` with the controller's venv
  Python (reachable on the hosts through the shared filesystem). Ansible itself runs modules with
  /usr/bin/python3 (the inventory's ansible_python_interpreter for `hosts`).
- Site settings go where Ansible users put them: <workspace>/group_vars/all.yml next to the
  inventory (it overrides the inventory's group vars). It leaves this machine's kernel settings,
  clock and apt alone (base_manage_kernel/time_sync false, base_packages []), says the hosts have
  no accelerator and picks the reuse mode. /etc/hosts IS managed: each host's /etc/hosts is its
  own file, and torchrun needs the node names to resolve. `train` starts the run through the
  launcher (trainkit/runs/launch.py: a supervised, detached job per host over SSH), not Ansible.
  For speed only, Ansible keeps facts in a cache under the test's folder, so cleanup.yml does not
  gather them again.
- Preemption: the rank process on host 2 (the torchrun agent's child, found with `ip netns pids`)
  gets SIGTERM, as a spot notice would deliver it; every rank agrees to stop, rank 0 writes the
  checkpoint on the shared folder and `trainkit train` exits 75. `train --resume RUN` resumes it
  (the checkpoint folder is keyed by run id: a plain `train` would start a new run).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml
from netns import NetnsCluster

REPO = Path(__file__).resolve().parents[2]
TRAINKIT = Path(sys.executable).parent / "trainkit"
CLUSTER = "netns-pair"
# digits: 8 epochs x 19 steps at global batch 64 over 2 ranks; val accuracy passes 0.95 by epoch 4.
TRAIN_ARGS = ["--config", str(REPO / "examples/train/digits.yaml"), "epochs=8", "export.onnx=false"]
PREEMPT_AFTER_STEP = 20
SITE_VARS = {
    "base_packages": [], "base_manage_kernel": False, "base_manage_time_sync": False,
    "nvidia_enabled": False,
    "ascend_enabled": False,
    "trainkit_venv_mode": "reuse", "trainkit_node_python": sys.executable,
}


def write_spec(cluster: NetnsCluster, shared: Path, root: Path, path: Path) -> Path:
    spec = {
        "name": CLUSTER, "cloud": "hosts",
        "hosts": [{"name": h.name, "address": h.address, "port": h.port, "user": "root"}
                  for h in cluster.hosts],
        "ssh": {"user": "root", "private_key": str(cluster.key)},
        "storage": {"data_disk": {"enabled": False},
                    "nas": {"enabled": True, "mount_point": str(shared)}},
        "launch": {"nproc_per_node": 1, "rdzv_port": 29400, "python": sys.executable, "root": str(root)},
    }
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def trainkit(cluster: NetnsCluster, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run the CLI in its own process group; on timeout the whole group (ansible-playbook too) dies."""
    proc = _start(cluster, *args)
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        _kill_group(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")


def _start(cluster: NetnsCluster, *args: str) -> subprocess.Popen:
    return subprocess.Popen([str(TRAINKIT), *args], cwd=REPO, env=_env(cluster), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)


def _kill_group(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _env(cluster: NetnsCluster) -> dict:
    return {**os.environ, **cluster.ansible_env(), **cluster.ansible_fact_cache(), "OMP_NUM_THREADS": "1"}


def test_hosts_in_namespaces_train_across_both_survive_sigterm_and_destroy_cleanly(
        netns_hosts: NetnsCluster, tmp_path):
    cluster = netns_hosts
    h1, h2 = cluster.hosts
    shared = cluster.workdir / "shared"
    shared.mkdir()
    root = cluster.local_root / "trainkit"   # the mount point itself cannot be removed by destroy
    spec = write_spec(cluster, shared, root, tmp_path / "cluster.yaml")
    ws = tmp_path / "ws"
    (ws / "group_vars").mkdir(parents=True)
    (ws / "group_vars" / "all.yml").write_text(yaml.safe_dump(SITE_VARS))
    common = [str(spec), "--workdir", str(ws)]

    # apply: site.yml over SSH on both hosts
    t0 = time.monotonic()
    out = trainkit(cluster, "apply", *common, "--yes")
    assert out.returncode == 0, out.stdout
    for host in (h1, h2):
        assert (host.dir / "local" / "trainkit" / "configs").is_dir()
        assert h1.name in cluster.ssh(host, "cat /etc/hosts").stdout
        assert h2.name in cluster.ssh(host, "cat /etc/hosts").stdout
    print(f"apply {time.monotonic() - t0:.0f}s")

    # train, and SIGTERM the rank on host 2 mid-run
    t0 = time.monotonic()
    runs = shared / CLUSTER / "runs"
    proc = _start(cluster, "train", *common, *TRAIN_ARGS)
    try:
        rank_pid = _wait_for_rank(h2, runs, proc)
        os.kill(rank_pid, signal.SIGTERM)
        first_out, _ = proc.communicate(timeout=240)
    finally:
        _kill_group(proc)
    assert proc.returncode == 75, first_out
    first = _summary(ws)
    assert first["status"] == "preempted" and first["world_size"] == 2, first
    stopped_at = first["steps"]
    assert stopped_at >= PREEMPT_AFTER_STEP
    run_id = _latest_run(ws).name
    ckpts = sorted((shared / CLUSTER / "checkpoints" / run_id).glob("step-*"))
    assert ckpts and ckpts[-1].name == f"step-{stopped_at:08d}"
    print(f"preempted train {time.monotonic() - t0:.0f}s at step {stopped_at}")

    # train again: resumes from the shared checkpoint and reaches the accuracy target
    t0 = time.monotonic()
    out = trainkit(cluster, "train", *common, *TRAIN_ARGS, "--resume", run_id)
    assert out.returncode == 0, out.stdout
    run_dir = _latest_run(ws)
    assert run_dir.name == run_id
    done = json.loads((run_dir / "summary.json").read_text())
    assert done["status"] == "completed" and done["resumed_from_step"] == stopped_at > 0, done
    assert done["steps"] == done["total_steps"] and done["world_size"] == 2 and done["num_nodes"] == 2
    assert done["val_acc"] >= 0.95, done
    logs = run_dir / "logs"
    assert (logs / "rank-0.log").is_file() and (logs / "rank-1.log").is_file()
    assert f"on {h1.name}" in (logs / "node-0.log").read_text()
    assert f"on {h2.name}" in (logs / "node-1.log").read_text()
    print(f"resumed train {time.monotonic() - t0:.0f}s, val_acc {done['val_acc']:.3f}")

    # top: one row per node, sampled over SSH with the inventory's options; CPU figures (no GPUs)
    # and the job's last samples/s and data wait read from its metrics.jsonl on the shared folder
    out = trainkit(cluster, "top", *common, "--once", "--json", timeout=60)
    assert out.returncode == 0, out.stdout
    rows = json.loads(out.stdout[out.stdout.index("["):])
    assert [r["node"] for r in rows] == [h1.name, h2.name], rows
    for row in rows:
        assert "error" not in row and row["gpus"] == [] and 0 <= row["cpu_pct"] <= 100, row
        assert row["mem_total_gb"] > 0 and row["job"]["run_id"] == run_dir.name, row
        assert row["job"]["samples_per_s"] > 0 and row["verdict"], row

    # ssh: the command line `trainkit ssh` runs (the head by default, else the node named) logs in
    # to that host with the inventory's key and port
    for args, host in (((), h1), ((h2.name,), h2)):
        out = trainkit(cluster, "ssh", *common, *args, "--json", timeout=60)
        assert out.returncode == 0, out.stdout
        argv = json.loads(out.stdout[out.stdout.index("{"):])["argv"]
        login = subprocess.run(argv + ["hostname"], capture_output=True, text=True, timeout=60,
                               stdin=subprocess.DEVNULL)
        assert login.stdout.strip() == host.name, login.stderr

    # destroy: trainkit's folder leaves both hosts; the hosts stay up
    out = trainkit(cluster, "destroy", *common, "--yes")
    assert out.returncode == 0, out.stdout
    for host in (h1, h2):
        assert not (host.dir / "local" / "trainkit").exists()
        assert cluster.ssh(host, "hostname").stdout.strip() == host.name
    assert (run_dir / "summary.json").is_file()      # run artifacts are kept
    assert not (ws / "inventory.yml").exists()


def _wait_for_rank(host, runs: Path, proc: subprocess.Popen, timeout_s: float = 240) -> int:
    """PID of the training rank on `host` once the run has passed PREEMPT_AFTER_STEP."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read()
        if _max_step(runs) >= PREEMPT_AFTER_STEP:
            pid = _rank_pid(host)
            if pid:
                return pid
        time.sleep(0.5)
    raise AssertionError(f"no training step {PREEMPT_AFTER_STEP} on {host.name} in {timeout_s}s")


def _max_step(runs: Path) -> int:
    steps = [0]
    for metrics in runs.glob("*/metrics.jsonl"):
        for line in metrics.read_text().splitlines():
            if '"kind": "step"' in line:
                try:
                    steps.append(json.loads(line)["step"])
                except ValueError:  # a line being written
                    pass
    return max(steps)


def _rank_pid(host) -> int | None:
    """The rank: the child of the torchrun agent running `trainkit run` (not its DataLoader workers)."""
    procs = {}
    for pid in host.pids():
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        procs[pid] = (cmd, ppid)
    agents = {pid for pid, (cmd, _) in procs.items() if "torch.distributed.run" in cmd}
    ranks = [pid for pid, (cmd, ppid) in procs.items() if ppid in agents and "trainkit run" in cmd]
    return ranks[0] if ranks else None


def _latest_run(ws: Path) -> Path:
    return sorted(p for p in (ws / "runs").iterdir() if p.is_dir())[-1]


def _summary(ws: Path) -> dict:
    return json.loads((_latest_run(ws) / "summary.json").read_text())
