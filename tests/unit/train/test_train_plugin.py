"""A user's own model and dataset, plugged in by import path, train without touching trainkit."""

from __future__ import annotations

import json
import textwrap

import pytest
from user_package import installed

from trainkit.errors import InputError
from trainkit.train.config import load_config

USER_MODULE = textwrap.dedent('''
    import torch
    from torch import nn
    from torch.utils.data import TensorDataset

    def build_model(hidden=16):
        return nn.Sequential(nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hidden, 3))

    def build_datasets(seed, n=300):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(n, 4, generator=g)
        y = (x[:, 0] > 0).long() + (x[:, 1] > 0.5).long()   # a learnable 3-class rule
        return TensorDataset(x, y)
''')


@pytest.fixture
def user_pkg(tmp_path, monkeypatch):
    yield from installed(tmp_path, monkeypatch, "userpkg", "mine", USER_MODULE)


def test_user_model_and_data_by_import_path_train_and_split_7_2_1(tmp_path, user_pkg):
    from trainkit.train.engine import train

    cfg = load_config(None, [f"model={user_pkg}:build_model", "model_args.hidden=8",
                             f"data={user_pkg}:build_datasets", "data_args.n=300", "epochs=3",
                             "batch=32", "workers=0", "tensorboard=false", "plot=false",
                             "checkpoint.interval=null", f"run_dir={tmp_path / 'run'}", "lr0=0.01"])
    result = train(cfg)
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert result.exit_code == 0 and summary["status"] == "completed"
    # 300 items split 7:2:1 -> 210 train = 6 steps of 32 per epoch (drop_last), 3 epochs
    assert summary["steps"] == 18 and summary["epochs_completed"] == 3
    assert summary["val_acc"] > 0.5  # learned something beyond chance (1/3)
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert {r["kind"] for r in records} >= {"run", "step", "epoch", "checkpoint"}
    assert (tmp_path / "run" / "logs" / "rank-0.log").exists()
    assert (tmp_path / "run" / "config.yaml").exists()


def test_a_missing_user_module_is_an_input_error(tmp_path):
    from trainkit.train.engine import train

    cfg = load_config(None, ["model=nosuchpkg.mod:build", f"run_dir={tmp_path}", "workers=0"])
    with pytest.raises(InputError, match="model: cannot import 'nosuchpkg.mod:build'"):
        train(cfg)
