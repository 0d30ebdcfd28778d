"""train.yml on the local target through trainkit.provision.playbook: torchrun runs, artifacts come back.

The local target runs the real playbook (ansible-runner, connection local) and real torchrun with two
CPU ranks; nothing is stubbed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from trainkit.provision import playbook as provision
from trainkit.errors import TRAIN, TrainkitError
from trainkit.spec.resolve import load_cluster
from trainkit.workspace import Workspace

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "examples" / "train" / "digits.yaml"
NODE = "local-train"
# What the head node's run folder holds after `trainkit run`, fetched by the train role's patterns
# (ansible/roles/train/defaults/main.yml train_fetch_patterns); checkpoints stay on the node.
FETCHED = {"config.yaml", "curves.png", "digits.yaml", "launch-node-0.sh", "logs/node-0.log",
           "logs/rank-0.log", "logs/rank-1.log", "metrics.jsonl", "model.onnx", "summary.json",
           "hparams.yaml", "weights/best.pt", "weights/last.pt"}
# On `local` the checkpoints live in the run folder (destroy keeps them); TensorBoard events in tb/.
UNNAMED = ("checkpoints/", "tb/")
# Cross-entropy of a uniform guess over the 10 digit classes.
CHANCE_LOSS = math.log(10)


def local_cluster(tmp_path: Path):
    spec = tmp_path / "cluster.yaml"
    spec.write_text(f"name: {NODE}\ncloud: local\nstorage:\n  data_disk: {{enabled: false}}\n"
                    "launch:\n  nproc_per_node: 2\n")
    return load_cluster(spec), Workspace(tmp_path / "ws")


def test_train_playbook_runs_torchrun_on_the_local_node_and_fetches_the_run(tmp_path):
    cluster, ws = local_cluster(tmp_path)
    result = provision.run_train(cluster, ws, CONFIG, ["epochs=1"],
                                 display=provision.ProgressDisplay(quiet=True))
    assert result.exit_codes == {NODE: 0}
    assert (result.playbook.status, result.playbook.rc, result.playbook.failures) == ("successful", 0, [])
    run = result.run_dir
    assert run.parent == ws.runs_dir
    named = {str(p.relative_to(run)) for p in result.files if not str(p.relative_to(run)).startswith(UNNAMED)}
    assert named == FETCHED
    assert any(p.name == "COMPLETE" for p in (run / "checkpoints").rglob("*"))
    assert any(p.name.startswith("events.out.tfevents") for p in (run / "tb").iterdir())
    assert result.files == sorted(p for p in run.rglob("*") if p.is_file())
    assert (run / "digits.yaml").read_text() == CONFIG.read_text()
    assert yaml.safe_load((run / "config.yaml").read_text())["epochs"] == 1  # the override reached the node

    summary = json.loads((run / "summary.json").read_text())
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert_two_ranks_trained_one_epoch(summary, records)
    assert f"completed after {summary['steps']} steps" in (run / "logs" / "node-0.log").read_text()
    assert "rank1" in (run / "logs" / "rank-1.log").read_text()

    launcher = (run / "launch-node-0.sh").read_text()
    assert "--standalone" in launcher and "--nproc-per-node 2" in launcher
    assert "GLOO_SOCKET_IFNAME=lo" in launcher and "checkpoint.dir=" in launcher


def test_the_spec_data_section_is_staged_on_the_node_and_feeds_the_split(tmp_path, range_http):
    """data: (https, an archive of <class>/<item>.npy) staged by the train role before torchrun;
    the run trains on the staged folder (data: folder) split 7:2:1."""
    www, url = range_http
    write_pets_archive(www / "pets.tar.gz")
    spec = tmp_path / "cluster.yaml"
    spec.write_text("name: local-data\ncloud: local\nstorage:\n  data_disk: {enabled: false}\n"
                    f"data:\n  sources:\n    - {{url: '{url}/pets.tar.gz', name: pets}}\n")
    cluster, ws = load_cluster(spec), Workspace(tmp_path / "ws")
    data_root = ws.root.resolve() / "node" / "work" / "datasets"
    result = provision.run_train(cluster, ws, CONFIG, [
        "epochs=6", "data=folder", f"data_args={{path: {data_root}/pets}}", "model_args={num_classes: 2}",
        "export.onnx=false", "batch=16"], display=provision.ProgressDisplay(quiet=True))
    assert result.exit_codes == {"local-data": 0}
    assert (data_root / "pets" / "dog" / "3.npy").is_file()
    summary = json.loads((result.run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["val_acc"] > 0.9
    assert summary["world_size"] == 1 and summary["micro_batch"] == 16
    # on-disk items: `workers: auto` measured the loader instead of assuming
    assert "workers: auto -> " in (result.run_dir / "logs" / "rank-0.log").read_text()
    assert "(measured" in (result.run_dir / "logs" / "rank-0.log").read_text()


def test_a_jobs_own_stage_section_is_staged_before_it_and_found_by_name(tmp_path, range_http):
    """`trainkit train` (the CLI, detached launcher) with a train config carrying `stage:`: the
    archive is staged under the node's data root before the job starts, and `data_args.path: pets`
    (relative) is found there through $TRAINKIT_DATA_ROOT."""
    import subprocess
    import sys

    from trainkit.provision.playbook import prepare_inventory

    www, url = range_http
    write_pets_archive(www / "pets.tar.gz")
    spec = tmp_path / "cluster.yaml"
    spec.write_text("name: local-stage\ncloud: local\nstorage:\n  data_disk: {enabled: false}\n")
    config = tmp_path / "pets.yaml"
    config.write_text(f"stage:\n  sources:\n    - {{url: '{url}/pets.tar.gz', name: pets}}\n"
                      "data: folder\ndata_args: {path: pets}\nmodel_args: {num_classes: 2}\n"
                      "epochs: 4\nbatch: 16\nexport: {onnx: false}\nplot: false\n")
    cluster, ws = load_cluster(spec), Workspace(tmp_path / "ws")
    prepare_inventory(cluster, ws)
    proc = subprocess.run([sys.executable, "-m", "trainkit", "train", str(spec), "--config", str(config),
                           "--workdir", str(ws.root)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert (ws.root.resolve() / "node" / "work" / "datasets" / "pets" / "cat" / "0.npy").is_file()
    (run,) = [p for p in ws.runs_dir.iterdir() if p.name.startswith("pets-")]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["val_acc"] > 0.9


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


def assert_two_ranks_trained_one_epoch(summary: dict, records: list[dict]) -> None:
    """summary.json and metrics.jsonl of a completed 1-epoch run on 2 CPU ranks of one node."""
    assert (summary["status"], summary["exit_reason"], summary["exit_code"]) == ("completed", "completed", 0)
    assert (summary["world_size"], summary["num_nodes"], summary["epochs_completed"]) == (2, 1, 1)
    run = records[0]
    assert run["kind"] == "run" and (run["world_size"], run["num_nodes"]) == (2, 1)
    assert summary["steps"] == summary["total_steps"] == run["total_steps"] == run["steps_per_epoch"] > 0
    assert summary["micro_batch"] * summary["grad_accum"] * 2 == summary["global_batch"] == 64
    for key in ("train_loss", "val_loss", "test_loss"):
        value = summary[key]
        assert isinstance(value, float) and math.isfinite(value) and 0 < value < CHANCE_LOSS, (key, value)
    for key in ("val_acc", "test_acc"):
        assert isinstance(summary[key], float) and 0 <= summary[key] <= 1, (key, summary[key])
    assert isinstance(summary["onnx_max_abs_diff"], float) and summary["onnx_max_abs_diff"] < 1e-4
    assert summary["checkpoint"].endswith(f"/checkpoints/step-{summary['steps']:08d}")  # runs/<id>/checkpoints on local
    epochs = [r for r in records if r["kind"] == "epoch"]
    assert [(r["epoch"], r["step"]) for r in epochs] == [(0, summary["steps"])]
    assert epochs[0]["val_acc"] == summary["val_acc"]
    final = [r for r in records if r["kind"] == "checkpoint" and r["reason"] == "final"]
    assert [r["step"] for r in final] == [summary["steps"]]


def test_a_failing_training_comes_back_as_the_nodes_exit_code(tmp_path):
    """`trainkit run` refuses a bad override on the node (exit 2 in every rank, 1 from torchrun):
    run_train raises the train phase's error naming the node, with the logs still fetched."""
    cluster, ws = local_cluster(tmp_path)
    run_dir = tmp_path / "run"
    with pytest.raises(TrainkitError) as err:
        provision.run_train(cluster, ws, CONFIG, ["optimizer=Adam"], run_dir=run_dir,
                            display=provision.ProgressDisplay(quiet=True))
    assert err.value.exit_code == TRAIN
    assert f"{NODE} exit 1" in err.value.message and f"logs: {run_dir}/logs/" in err.value.message
    assert "optimizer: expected 'AdamW' or 'SGD' (got 'Adam')" in (run_dir / "logs" / "node-0.log").read_text()
    assert not (run_dir / "summary.json").exists()
