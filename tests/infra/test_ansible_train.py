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
