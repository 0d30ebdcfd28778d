"""The main job exactly as the README runs it: `make cluster train destroy` on the local target.

Real Ansible (ansible-runner on localhost), real torchrun with 2 CPU processes, real ONNX export
checked with onnxruntime, then cleanup that keeps the run's results.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import yaml


def test_make_cluster_train_destroy_on_local(repo, tmp_path):
    ws = tmp_path / "ws"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(["make", "-C", str(repo), "cluster", "train", "destroy", f"WORKDIR={ws}"],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]

    runs = sorted((ws / "runs").iterdir())
    assert len(runs) == 1
    run = runs[0]
    assert f"results in {run}" in proc.stdout  # the job says where its results are
    assert f"tensorboard --logdir {run / 'tb'}" in proc.stdout  # and what to run next
    assert "--down: destroying cluster local-demo (the run is over)" in proc.stderr  # one command did it all

    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["world_size"] == 2
    assert summary["val_acc"] >= 0.95
    assert {p.name for p in (run / "logs").iterdir()} >= {"rank-0.log", "rank-1.log"}
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in lines if m["kind"] == "step"]
    epochs = [m for m in lines if m["kind"] == "epoch"]
    assert steps and all({"loss", "lr", "samples_per_s", "data_wait_pct"} <= m.keys() for m in steps)
    assert epochs and epochs[-1]["val_acc"] == summary["val_acc"]

    import onnxruntime as ort  # the exported model really runs, with a dynamic batch axis

    session = ort.InferenceSession(str(run / "model.onnx"), providers=["CPUExecutionProvider"])
    meta = session.get_modelmeta().custom_metadata_map  # what a deployment reads
    assert meta["run_id"] == run.name and json.loads(meta["class_names"]) == [str(d) for d in range(10)]
    assert meta["input_name"] == "input" and json.loads(meta["input_shape"]) == ["batch", 1, 8, 8]
    for batch in (1, 5):
        x = np.random.default_rng(0).random((batch, 1, 8, 8), dtype=np.float32)
        (logits,) = session.run(None, {session.get_inputs()[0].name: x})
        assert logits.shape == (batch, 10)

    # the run folder an engineer inspects: weights, TensorBoard events, hparams, curves
    assert summary["run_id"] == run.name and summary["best_epoch"] is not None
    assert list((run / "tb").glob("events.out.tfevents.*"))
    hp = yaml.safe_load((run / "hparams.yaml").read_text())
    assert hp["run_id"] == run.name and hp["derived"]["world_size"] == 2
    from PIL import Image

    assert Image.open(run / "curves.png").size[0] >= 1200
    # the full resumable checkpoint lives under runs/ (destroy keeps it), and summary.json says where
    assert Path(summary["checkpoint"]).is_relative_to(run) and Path(summary["checkpoint"]).exists()
    # plain torch.load + load_state_dict restores the best model: its accuracy is summary.json's
    import torch

    from trainkit.train.config import load_config
    from trainkit.train.data import build_splits
    from trainkit.train.model import build_model

    cfg = load_config(repo / "examples/train/digits.yaml")
    model = build_model(cfg)
    assert summary["weights"] == {"best": "weights/best.pt", "last": "weights/last.pt"}
    model.load_state_dict(torch.load(run / "weights" / "last.pt", weights_only=True))  # loads too
    model.load_state_dict(torch.load(run / summary["weights"]["best"], weights_only=True))
    val = build_splits(cfg)["val"]
    x = torch.stack([val[i][0] for i in range(len(val))])
    y = torch.tensor([val[i][1] for i in range(len(val))])
    with torch.no_grad():
        acc = (model.eval()(x).argmax(1) == y).float().mean().item()
    assert abs(acc - summary["best_val_acc"]) < 1e-6, (acc, summary["best_val_acc"])

    # destroy removed what trainkit deployed and kept the results
    # (the lock, and the marker saying whose workspace this is, stay with the runs)
    assert sorted(p.name for p in ws.iterdir() if p.name not in ("lock", ".trainkit-workspace")) == ["runs"]


def test_a_failing_train_in_the_main_job_still_destroys(repo, tmp_path):
    # `make cluster train destroy` with a job that fails: make fails, and nothing is left up
    bad = tmp_path / "fails.yaml"
    bad.write_text("name: fails\ncommand: exit 3\n")
    ws = tmp_path / "ws"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(["make", "-C", str(repo), "cluster", "train", "destroy", f"WORKDIR={ws}", f"TRAIN={bad}"],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode != 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "--down: destroying cluster local-demo (after a failure)" in proc.stderr, proc.stderr[-4000:]
    assert "note: --down: cluster local-demo was destroyed after this failure" in proc.stderr
    assert not (ws / "inventory.yml").exists()  # status says "not created"
    status = subprocess.run([str(repo / ".venv/bin/trainkit"), "status", str(repo / "examples/clusters/local.yaml"),
                             "--workdir", str(ws)], capture_output=True, text=True, timeout=120)
    assert status.returncode == 0 and "local-demo (local): not created" in status.stdout, status.stdout + status.stderr
    (run,) = (ws / "runs").iterdir()  # the failed run's record and logs are kept
    assert json.loads((run / "run.json").read_text())["status"] == "failed"
