"""train.yml on the local target through trainkit.provision: torchrun runs, artifacts come back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainkit import provision
from trainkit.resolve import load_cluster
from trainkit.workspace import Workspace

REPO = Path(__file__).resolve().parents[2]
CONFIG = REPO / "examples" / "train" / "digits.yaml"

pytestmark = pytest.mark.skipif(not (REPO / "trainkit" / "train").is_dir() or not CONFIG.is_file(),
                                reason="trainkit/train or examples/train/digits.yaml missing")


def test_train_playbook_runs_torchrun_on_the_local_node_and_fetches_the_run(tmp_path):
    spec = tmp_path / "cluster.yaml"
    spec.write_text("name: local-train\ncloud: local\nstorage:\n  data_disk: {enabled: false}\n"
                    "launch:\n  nproc_per_node: 2\n")
    cluster, ws = load_cluster(spec), Workspace(tmp_path / "ws")
    result = provision.run_train(cluster, ws, CONFIG, ["epochs=1"],
                                 display=provision.ProgressDisplay(quiet=True))
    assert result.exit_codes == {"local-train": 0}
    run = result.run_dir
    assert run.parent == ws.runs_dir
    for name in ("metrics.jsonl", "summary.json", "model.onnx", "config.yaml", "logs/rank-0.log",
                 "logs/rank-1.log", "logs/node-0.log", "launch-node-0.sh"):
        assert (run / name).is_file(), name
    assert json.loads((run / "summary.json").read_text())
    launcher = (run / "launch-node-0.sh").read_text()
    assert "--standalone" in launcher and "--nproc-per-node 2" in launcher
    assert "GLOO_SOCKET_IFNAME=lo" in launcher and "checkpoint.dir=" in launcher


def test_the_spec_data_section_is_staged_on_the_node_and_feeds_the_split(tmp_path, range_http):
    """data: (https, an archive of <class>/<item>.npy) staged by the train role before torchrun;
    the run trains on the staged folder (data: folder) split 7:2:1."""
    import io
    import tarfile

    import numpy as np

    www, url = range_http
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
    (www / "pets.tar.gz").write_bytes(buf.getvalue())
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
