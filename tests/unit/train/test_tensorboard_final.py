"""TensorBoard holds what summary.json holds: the test metrics as scalars and the run's
hyperparameters in the HParams plugin (read back with tensorboard's own EventAccumulator)."""

from __future__ import annotations

import json

import pytest
from cli_run import run_cli


def test_tensorboard_gets_test_metrics_and_hparams(tmp_path, capsys):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    run = tmp_path / "run"
    code, err = run_cli(capsys, "run", "max_steps=4", "batch=64", "workers=0", "plot=false",
                        "checkpoint.interval=null", "tensorboard=true", "lr0=0.02", f"run_dir={run}")
    assert code == 0, err
    summary = json.loads((run / "summary.json").read_text())
    events = EventAccumulator(str(run / "tb"), size_guidance={"tensors": 0, "scalars": 0})
    events.Reload()
    scalars = events.Tags()["scalars"]
    assert {"test/loss", "test/acc", "val/acc"} <= set(scalars), scalars
    assert events.Scalars("test/acc")[-1].value == pytest.approx(summary["test_acc"], rel=1e-6)
    assert events.Scalars("test/acc")[-1].step == summary["steps"]

    content = events.PluginTagToContent("hparams")
    session = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/session_start_info"])
    hparams = {k: v for k, v in session.session_start_info.hparams.items()}
    assert hparams["lr0"].number_value == pytest.approx(0.02)
    assert hparams["world_size"].number_value == 1 and hparams["model"].string_value
    experiment = plugin_data_pb2.HParamsPluginData.FromString(content["_hparams_/experiment"])
    assert {m.name.tag for m in experiment.experiment.metric_infos} >= {"test/acc", "test/loss"}
