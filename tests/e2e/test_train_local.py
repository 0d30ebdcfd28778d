"""`trainkit train` on the `local` target with the built-in engine: the one launcher
(trainkit/runs/launch.py) starts torchrun on the node as a supervised, detached job, the run's
artifacts come back into runs/<run-id>/, the spec's `data:` and a job's own `stage:` section are
staged (ansible/stage.yml) before it, and a training that fails on the node comes back as a failed
run with the node's exit code recorded.

Real ansible-runner (connection local), real supervisors and real torchrun with CPU ranks; nothing
is stubbed. Each test applies the cluster without Ansible (`apply --no-provision`), as
tests/e2e/test_run_ops_local.py does: the local target reuses this Python, so there is nothing to
install.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
TRAINKIT = Path(sys.executable).parent / "trainkit"
LOCAL = REPO / "examples" / "clusters" / "local.yaml"   # local-demo: one node, 2 CPU ranks
NODE = "local-demo"
CONFIG = REPO / "examples" / "train" / "digits.yaml"
# What runs/<run-id>/ holds after a run: the head node's whole run folder (trainkit/runs/remote.py
# fetch_run), trainkit's own run record beside it. Checkpoints (local: runs/<id>/checkpoints, kept by
# destroy) and TensorBoard events (tb/) are checked on their own.
FETCHED = {"config.yaml", "curves.png", "events.jsonl", "hparams.yaml", "logs/node-0.log",
           "logs/rank-0.log", "logs/rank-1.log", "metrics.jsonl", "model.onnx", "run.json",
           "summary.json", "weights/best.pt", "weights/last.pt",
           "nodes/node-0/attempt-1.events.jsonl", "nodes/node-0/attempt-1.json", "nodes/node-0/attempt-1.exit",
           "nodes/node-0/attempt-1.progress",  # the engine's step for the hang watchdog
           "nodes/node-0/config.yaml", "nodes/node-0/launch.sh", "nodes/node-0/supervise.py",
           "nodes/node-0/jobstate.py", "nodes/node-0/notices.py"}  # the supervisor's own modules
# Only where the supervisor is started with setsid (no systemd as PID 1, or not root).
SETSID_ONLY = {"logs/supervisor-node-0.log"}
UNNAMED = ("checkpoints/", "tb/")
# Cross-entropy of a uniform guess over the 10 digit classes.
CHANCE_LOSS = math.log(10)


def trainkit(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([str(TRAINKIT), *args], check=False, cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"})


def applied(spec: Path, ws: Path) -> None:
    """The local cluster applied without Ansible: its inventory, nothing installed."""
    proc = trainkit("apply", str(spec), "--workdir", str(ws), "--yes", "--no-provision", cwd=spec.parent)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def only_run(ws: Path, prefix: str = "") -> Path:
    (run,) = [p for p in (ws / "runs").iterdir() if p.is_dir() and p.name.startswith(prefix)]
    return run


def test_train_runs_torchrun_on_the_local_node_and_fetches_the_run(tmp_path):
    ws = tmp_path / "ws"
    applied(LOCAL, ws)
    proc = trainkit("train", str(LOCAL), "--workdir", str(ws), "--config", str(CONFIG), "epochs=1", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = only_run(ws)
    assert f"results in {run}" in proc.stdout

    files = sorted(p for p in run.rglob("*") if p.is_file())
    named = {str(p.relative_to(run)) for p in files if not str(p.relative_to(run)).startswith(UNNAMED)}
    assert FETCHED <= named and named - FETCHED <= SETSID_ONLY, named ^ FETCHED
    assert any(p.name == "COMPLETE" for p in (run / "checkpoints").rglob("*"))
    assert any(p.name.startswith("events.out.tfevents") for p in (run / "tb").iterdir())
    # the config reached the node as written, and the override with it
    assert yaml.safe_load((run / "nodes" / "node-0" / "config.yaml").read_text()) == yaml.safe_load(CONFIG.read_text())
    assert yaml.safe_load((run / "config.yaml").read_text())["epochs"] == 1
    record = json.loads((run / "run.json").read_text())
    assert (record["status"], record["overrides"], record["mode"]) == ("completed", ["epochs=1"], "engine")
    state = json.loads((run / "nodes" / "node-0" / "attempt-1.json").read_text())
    assert (state["status"], state["exit_code"]) == ("completed", 0)

    summary = json.loads((run / "summary.json").read_text())
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert_two_ranks_trained_one_epoch(summary, records, run)
    assert f"completed after {summary['steps']} steps" in (run / "logs" / "node-0.log").read_text()
    assert "rank1" in (run / "logs" / "rank-1.log").read_text()

    launcher = (run / "nodes" / "node-0" / "launch.sh").read_text()
    assert "--standalone" in launcher and "--nproc-per-node $TRAINKIT_GPUS_PER_NODE" in launcher
    assert "export TRAINKIT_GPUS_PER_NODE=2" in launcher and "checkpoint.dir=" in launcher
    [torchrun] = [line for line in launcher.splitlines() if "torch.distributed.run" in line]
    assert torchrun.endswith("resume=true -- epochs=1 || rc=$?")  # the override reaches the node, after --
    assert socket_ifname(launcher) == "lo"  # gloo talks over the interface holding 127.0.0.1


def socket_ifname(launcher: str) -> str:
    """GLOO_SOCKET_IFNAME as the launcher's own lines set it, for the node's private IP."""
    lines = launcher.splitlines()
    exports = [ln for ln in lines if ln.startswith("export TRAINKIT_PRIVATE_IP=")]
    start = next(i for i, ln in enumerate(lines) if ln.startswith("ifname="))
    script = "\n".join([*exports, lines[start], lines[start + 1], 'printf %s "${GLOO_SOCKET_IFNAME:-}"'])
    return subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True).stdout


def test_the_spec_data_section_is_staged_on_the_node_and_feeds_the_split(tmp_path, range_http):
    """data: (https, an archive of <class>/<item>.npy) staged by stage.yml before the job starts;
    the run trains on the staged folder (data: folder) split 7:2:1."""
    www, url = range_http
    write_pets_archive(www / "pets.tar.gz")
    spec = tmp_path / "cluster.yaml"
    spec.write_text("name: local-data\ncloud: local\nstorage:\n  data_disk: {enabled: false}\n"
                    f"data:\n  sources:\n    - {{url: '{url}/pets.tar.gz', name: pets}}\n")
    ws = tmp_path / "ws"
    applied(spec, ws)
    data_root = ws.resolve() / "node" / "work" / "datasets"
    proc = trainkit("train", str(spec), "--workdir", str(ws), "--config", str(CONFIG), "epochs=6",
                    "data=folder", f"data_args={{path: {data_root}/pets}}", "model_args={num_classes: 2}",
                    "export.onnx=false", "batch=16", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (data_root / "pets" / "dog" / "3.npy").is_file()
    run = only_run(ws)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["val_acc"] > 0.9
    assert summary["world_size"] == 1 and summary["micro_batch"] == 16
    # on-disk items: `workers: auto` measured the loader instead of assuming
    rank0 = (run / "logs" / "rank-0.log").read_text()
    assert "workers: auto -> " in rank0 and "(measured" in rank0


def test_a_jobs_own_stage_section_is_staged_before_it_and_found_by_name(tmp_path, range_http):
    """A train config carrying `stage:`: the archive is staged under the node's data root before
    the job starts, and `data_args.path: pets` (relative) is found there through $TRAINKIT_DATA_ROOT."""
    www, url = range_http
    write_pets_archive(www / "pets.tar.gz")
    spec = tmp_path / "cluster.yaml"
    spec.write_text("name: local-stage\ncloud: local\nstorage:\n  data_disk: {enabled: false}\n")
    config = tmp_path / "pets.yaml"
    config.write_text(f"stage:\n  sources:\n    - {{url: '{url}/pets.tar.gz', name: pets}}\n"
                      "data: folder\ndata_args: {path: pets}\nmodel_args: {num_classes: 2}\n"
                      "epochs: 4\nbatch: 16\nexport: {onnx: false}\nplot: false\n")
    ws = tmp_path / "ws"
    applied(spec, ws)
    proc = trainkit("train", str(spec), "--config", str(config), "--workdir", str(ws), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (ws.resolve() / "node" / "work" / "datasets" / "pets" / "cat" / "0.npy").is_file()
    run = only_run(ws, "pets-")
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["val_acc"] > 0.9


def test_a_failing_training_comes_back_as_the_nodes_exit_code(tmp_path):
    """A data folder the node does not have (the controller cannot see the node's files, so the
    config passes its checks there): `trainkit run` refuses it on the node (exit 2 in every rank,
    1 from torchrun). `trainkit train` exits 6 naming the logs, which were still fetched, and the
    node's exit code is in its fetched state file."""
    ws = tmp_path / "ws"
    applied(LOCAL, ws)
    missing = tmp_path / "nowhere" / "pets"
    proc = trainkit("train", str(LOCAL), "--workdir", str(ws), "--config", str(CONFIG), "data=folder",
                    f"data_args={{path: {missing}}}", "model_args={num_classes: 2}", cwd=tmp_path)
    run = only_run(ws)
    assert proc.returncode == 6, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"run {run.name} failed" in proc.stderr and f"{run}/logs/" in proc.stderr
    assert "Traceback" not in proc.stderr
    state = json.loads((run / "nodes" / "node-0" / "attempt-1.json").read_text())
    assert (state["status"], state["exit_code"]) == ("failed", 1)
    assert json.loads((run / "run.json").read_text())["status"] == "failed"
    log = (run / "logs" / "node-0.log").read_text()
    assert f"data_args.path: no <class>/<item>.npy files under {missing}" in log
    summary = json.loads((run / "summary.json").read_text())  # the engine wrote none: trainkit's
    assert summary["status"] == "failed" and "steps" not in summary


def write_pets_archive(path: Path) -> None:
    """A .tar.gz of <class>/<item>.npy: 40 'cat' and 40 'dog' 1x8x8 arrays, easy to tell apart."""
    import io
    import tarfile

    import numpy as np

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        rng = np.random.default_rng(0)
        for label in ("cat", "dog"):
            for i in range(40):
                item = io.BytesIO()
                np.save(item, rng.random((1, 8, 8), dtype=np.float32) * 0.1 + 3 * (label == "dog"))
                info = tarfile.TarInfo(f"{label}/{i}.npy")
                info.size = item.tell()
                item.seek(0)
                tar.addfile(info, item)
    path.write_bytes(buf.getvalue())


def assert_two_ranks_trained_one_epoch(summary: dict, records: list[dict], run: Path) -> None:
    """summary.json and metrics.jsonl of a completed 1-epoch run on 2 CPU ranks of one node."""
    assert (summary["status"], summary["exit_reason"], summary["exit_code"]) == ("completed", "completed", 0)
    assert (summary["world_size"], summary["num_nodes"], summary["epochs_completed"]) == (2, 1, 1)
    first = records[0]
    assert first["kind"] == "run" and (first["world_size"], first["num_nodes"]) == (2, 1)
    assert summary["steps"] == summary["total_steps"] == first["total_steps"] == first["steps_per_epoch"] > 0
    assert summary["micro_batch"] * summary["grad_accum"] * 2 == summary["global_batch"] == 64
    for key in ("train_loss", "val_loss", "test_loss"):
        value = summary[key]
        assert isinstance(value, float) and math.isfinite(value) and 0 < value < CHANCE_LOSS, (key, value)
    for key in ("val_acc", "test_acc"):
        assert isinstance(summary[key], float) and 0 <= summary[key] <= 1, (key, summary[key])
    assert isinstance(summary["onnx_max_abs_diff"], float) and summary["onnx_max_abs_diff"] < 1e-4
    # on `local` the checkpoints live in the fetched run folder (runs/<id>/checkpoints; destroy keeps them)
    assert summary["checkpoint"] == str(run.resolve() / "checkpoints" / f"step-{summary['steps']:08d}")
    epochs = [r for r in records if r["kind"] == "epoch"]
    assert [(r["epoch"], r["step"]) for r in epochs] == [(0, summary["steps"])]
    assert epochs[0]["val_acc"] == summary["val_acc"]
    final = [r for r in records if r["kind"] == "checkpoint" and r["reason"] == "final"]
    assert [r["step"] for r in final] == [summary["steps"]]
