"""The run folder's artifacts: best/last weights, hparams, summary fields, curves."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from trainkit.train import artifacts
from trainkit.train.config import load_config

pytestmark = pytest.mark.unit


def fake_run(tmp_path: Path):
    cfg = load_config(None, [f"run_dir={tmp_path / 'digits-20261130-120000'}"])
    return SimpleNamespace(cfg=cfg, info=SimpleNamespace(is_main=True), model=torch.nn.Linear(2, 2),
                           epoch=0, step=0, extra={}, splits={})


def test_best_weights_follow_the_best_val_acc_and_load_with_plain_torch(tmp_path):
    run = fake_run(tmp_path)
    best_w = None
    for epoch, acc in enumerate([0.5, 0.8, 0.7]):
        run.epoch, run.step = epoch, 10 * (epoch + 1)
        with torch.no_grad():
            run.model.weight.fill_(epoch)
        if acc == 0.8:
            best_w = run.model.weight.clone()
        artifacts.on_epoch(run, {"acc": acc, "loss": 1 - acc})
    out = artifacts.finish(run, {"world_size": 1})
    assert out["best_epoch"] == 1 and out["best_val_acc"] == 0.8 and out["best_metric"] == "val_acc"
    model = torch.nn.Linear(2, 2)
    model.load_state_dict(torch.load(Path(run.cfg.run_dir) / out["weights"]["best"], weights_only=True))
    assert torch.equal(model.weight, best_w)
    model.load_state_dict(torch.load(Path(run.cfg.run_dir) / out["weights"]["last"], weights_only=True))
    assert torch.all(model.weight == 2)
    assert out["run_id"] == "digits-20261130-120000"


def test_curves_are_1200_px_wide_with_three_panels(tmp_path):
    from PIL import Image

    recs = [{"kind": "step", "step": s, "loss": 1 / s, "lr": 1e-3 * s} for s in range(1, 30)]
    recs += [{"kind": "epoch", "epoch": e, "step": 10 * e, "val_loss": 1 / (e + 1), "val_acc": e / 3}
             for e in range(3)]
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in recs) + "\n")
    out = artifacts.plot_curves(tmp_path, {"run_id": "r1", "best_epoch": 2, "best_val_acc": 2 / 3,
                                           "test_acc": 0.6, "test_loss": 0.4, "steps": 29})
    assert Image.open(out).size == (1200, 450)


def test_class_names_come_from_the_dataset_through_subsets():
    from torch.utils.data import Subset, TensorDataset

    ds = TensorDataset(torch.zeros(4, 1))
    ds.classes = ["cat", "dog"]
    assert artifacts.class_names(Subset(Subset(ds, [0, 1]), [0])) == ["cat", "dog"]
    assert artifacts.class_names(TensorDataset(torch.zeros(1))) is None
