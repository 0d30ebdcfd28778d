"""Recovery end to end on the `hosts` target with the user-command example: three SSH machines in
network namespaces, two active and one spare (`spare: true`), checkpointing every 5 steps on the
shared folder.

A detached run survives its controller being killed, and `runs` / `logs --follow` see it to the
end; then, under `--recover`, every process of host 2's namespace is killed mid-run (sshd included:
the machine is gone, as a spot reclaim leaves it) and the run resumes on the spare. Choices the
namespaces force are those of test_hosts_multinode.py (shared folder as the NAS, node-local
launch.root, the controller's venv). The engine job's faults (a worker, the head, both nodes, a
dying spare, a killed controller), each against an uninterrupted run bit for bit, are the fault
matrix in test_fault_matrix*.py (faultbench.py); the helpers here (_runs, _wait_step, _assert_same_weights) serve it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from netns import NetnsCluster, missing_tools, names_for
from test_hosts_multinode import SITE_VARS, _env, _kill_group

PREFIX, SUBNET = names_for(__name__)  # this module's own namespace names and /24

REPO = Path(__file__).resolve().parents[2]
TRAINKIT = Path(sys.executable).parent / "trainkit"
CLUSTER = "netns-spare"
DIGITS = ["--config", str(REPO / "examples/train/digits.yaml"), "epochs=8", "export.onnx=false",
          "plot=false", "tensorboard=false", "checkpoint.interval=null", "checkpoint.every_n_steps=5",
          "log_every=1", "workers=0"]
FAST = ["--poll", "1", "--backoff", "1"]
KILL_AFTER_STEP = 30


@pytest.fixture
def trio(request, tmp_path_factory) -> NetnsCluster:
    missing = missing_tools()
    if missing:
        pytest.fail("namespace hosts need: " + ", ".join(missing))
    base = tmp_path_factory.mktemp("nr")
    cluster = NetnsCluster(base, count=3, prefix=PREFIX, local_root=base / "node-local",
                           subnet=SUBNET)
    request.addfinalizer(cluster.stop)
    return cluster.start()


def write_spec(cluster: NetnsCluster, shared: Path, path: Path) -> Path:
    hosts = [{"name": h.name, "address": h.address, "port": h.port, "user": "root"} for h in cluster.hosts]
    hosts[-1]["spare"] = True
    spec = {"name": CLUSTER, "cloud": "hosts", "hosts": hosts,
            "ssh": {"user": "root", "private_key": str(cluster.key)},
            "storage": {"data_disk": {"enabled": False}, "nas": {"enabled": True, "mount_point": str(shared)}},
            "launch": {"nproc_per_node": 1, "rdzv_port": 29400, "python": sys.executable,
                       "root": str(cluster.local_root / "trainkit")}}
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def tk(cluster, *args, timeout=400) -> subprocess.CompletedProcess:
    proc = subprocess.Popen([str(TRAINKIT), *args], cwd=REPO, env=_env(cluster), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    finally:
        _kill_group(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")


def _assert_same_weights(root: Path, ref_id: str, run_id: str) -> None:
    from trainkit.train import restore

    def final(run_id):
        return restore.load(restore.newest_valid(root / run_id))

    a, b = final(ref_id), final(run_id)
    assert a["step"] == b["step"]
    assert a["model"].keys() == b["model"].keys()
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key


def _runs(ws: Path) -> list[Path]:
    return sorted((p for p in (ws / "runs").iterdir() if (p / "run.json").is_file()),
                  key=lambda p: json.loads((p / "run.json").read_text())["created_at"])


def _wait_new_run(ws: Path, old: Path | None, proc, timeout_s=60) -> Path:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read()
        new = [p for p in _runs(ws) if p != old] if (ws / "runs").is_dir() else []
        if new:
            return new[-1]
        time.sleep(0.3)
    raise AssertionError("no new run")


def _wait_step(metrics: Path, step: int, proc, timeout_s=240) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stdout.read()
        if metrics.is_file() and any(f'"step": {step},' in x for x in metrics.read_text().splitlines()):
            return
        time.sleep(0.2)
    raise AssertionError(f"step {step} never reached")


CUSTOM = ["--config", str(REPO / "examples/custom/train.yaml")]


def test_user_command_detached_survives_its_controller_and_recovers_onto_the_spare(trio, tmp_path):
    h1, h2, h3 = trio.hosts
    shared = trio.workdir / "shared"
    shared.mkdir()
    spec = write_spec(trio, shared, tmp_path / "cluster.yaml")
    ws = tmp_path / "ws"
    (ws / "group_vars").mkdir(parents=True)
    (ws / "group_vars" / "all.yml").write_text(yaml.safe_dump(SITE_VARS))
    common = [str(spec), "--workdir", str(ws)]
    assert tk(trio, "apply", *common, "--yes").returncode == 0
    runs_on_nas = shared / CLUSTER / "runs"

    # the controller is killed mid-run: the job goes on; runs and logs --follow see it to the end
    proc = subprocess.Popen([str(TRAINKIT), "train", *common, *CUSTOM, *FAST], cwd=REPO, env=_env(trio),
                            text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        run = _wait_new_run(ws, None, proc)
        _wait_step(runs_on_nas / run.name / "metrics.jsonl", 20, proc)
    finally:
        _kill_group(proc)                      # SIGKILL to the controller's whole process group
    listed = json.loads(tk(trio, "runs", *common, "--json").stdout)
    assert [(r["run_id"], r["status"]) for r in listed] == [(run.name, "running")] and listed[0]["step"] >= 20
    follow = tk(trio, "logs", *common, run.name, "--follow")
    assert follow.returncode == 0 and "rank 0: done at step" in follow.stdout, follow.stdout
    listed = json.loads(tk(trio, "runs", *common, "--json").stdout)
    assert listed[0]["status"] == "completed"
    attach = tk(trio, "train", *common, "--attach", run.name, *FAST)
    assert attach.returncode == 0 and (run / "logs" / "node-1.log").is_file(), attach.stdout

    # --recover with the user's command: host 2 dies, the spare takes over, the job resumes
    proc = subprocess.Popen([str(TRAINKIT), "train", *common, *CUSTOM, *FAST, "--recover"], cwd=REPO,
                            env=_env(trio), text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        second = _wait_new_run(ws, run, proc)
        _wait_step(runs_on_nas / second.name / "metrics.jsonl", 40, proc)
        for pid in h2.pids():
            os.kill(pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=400)
    finally:
        _kill_group(proc)
    assert proc.returncode == 0, out
    events = [json.loads(x) for x in (second / "events.jsonl").read_text().splitlines()]
    resumed = [e for e in events if e["event"] == "resumed"]
    assert len(resumed) == 1 and resumed[0]["step"] % 5 == 0 and resumed[0]["step"] >= 40 - 5, events
    assert [(e["node"], e["by"]) for e in events if e["event"] == "replaced"] == [(h2.name, h3.name)]
    metrics = [json.loads(x) for x in (second / "metrics.jsonl").read_text().splitlines()]
    assert [m for m in metrics if m["kind"] == "epoch"][-1]["val_acc"] >= 0.95
    assert "rank 0: done at step" in (second / "logs" / "node-0.log").read_text()
