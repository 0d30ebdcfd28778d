"""The shipped example is real: examples/train/digits.yaml reaches >= 95% validation accuracy on CPU
(one process, as `trainkit run` runs it), and leaves every documented artifact behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SUMMARY_KEYS = {"status", "exit_reason", "exit_code", "steps", "total_steps", "epochs_completed",
                "resumed_from_step", "world_size", "num_nodes", "strategy", "global_batch", "micro_batch",
                "grad_accum", "lr", "device", "train_loss", "val_loss", "val_acc", "val_ppl",
                "test_loss", "test_acc", "test_ppl", "samples_per_s", "data_wait_pct", "verdict", "checkpoint",
                "checkpoint_write_s", "onnx", "onnx_max_abs_diff", "wall_time_s", "config_hash",
                "torch_version", "trainkit_version"}


def test_digits_example_reaches_95_percent_and_writes_its_artifacts(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "trainkit", "run", "examples/train/digits.yaml",
                           f"run_dir={tmp_path}", "--json"], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert json.loads(proc.stdout) == summary
    assert set(summary) == SUMMARY_KEYS
    assert summary["val_acc"] >= 0.95 and summary["test_acc"] >= 0.90
    assert summary["exit_reason"] == "completed" and summary["epochs_completed"] == 15
    assert summary["onnx_max_abs_diff"] < 1e-4 and (tmp_path / "model.onnx").exists()
    assert summary["verdict"].startswith(("data-bound", "compute-bound"))
    for artifact in ("config.yaml", "curves.png", "logs/rank-0.log", "metrics.jsonl"):
        assert (tmp_path / artifact).exists(), artifact
    assert any(p.name.startswith("events.out.tfevents") for p in (tmp_path / "tb").iterdir())
    kinds = [json.loads(line)["kind"] for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert kinds[0] == "run" and kinds.count("epoch") == 15 and "checkpoint" in kinds
