"""The shipped example is real: examples/train/digits.yaml reaches >= 95% validation accuracy on CPU
(one process, as `trainkit run` runs it), and leaves every documented artifact behind."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

import trainkit
from trainkit.train.schedule import suggested_workers

REPO = Path(__file__).resolve().parents[2]
SUMMARY_KEYS = {"status", "exit_reason", "exit_code", "steps", "total_steps", "epochs_completed",
                "resumed_from_step", "world_size", "num_nodes", "strategy", "global_batch", "micro_batch",
                "grad_accum", "lr", "device", "train_loss", "val_loss", "val_acc", "val_ppl",
                "test_loss", "test_acc", "test_ppl", "samples_per_s", "data_wait_pct", "verdict", "checkpoint",
                "checkpoint_write_s", "onnx", "onnx_max_abs_diff", "onnx_error", "wall_time_s", "config_hash",
                "torch_version", "trainkit_version", "run_id", "best_epoch", "best_metric",
                "best_val_acc", "best_val_loss", "weights", "checkpoint_dir"}
# Cross-entropy of a uniform guess over the 10 digit classes: a trained model's losses lie below it.
CHANCE_LOSS = math.log(10)


# The shipped config has `amp: true`, whose dtype depends on the CPU (bf16 where it is native, else
# fp32): both paths are forced here, so the outcome never depends on the machine CI lands on.
PRECISIONS = {"bf16": (["amp_dtype=bf16"], "bfloat16"), "fp32": (["amp=false"], None)}


@pytest.mark.parametrize("precision", sorted(PRECISIONS))
def test_digits_example_reaches_95_percent_and_writes_its_artifacts(tmp_path, precision):
    overrides, dtype = PRECISIONS[precision]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "trainkit", "run", "examples/train/digits.yaml",
                           f"run_dir={tmp_path}", *overrides, "--json"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert json.loads(proc.stdout) == summary
    assert set(summary) == SUMMARY_KEYS
    assert summary["val_acc"] >= 0.95 and summary["test_acc"] >= 0.90
    assert summary["exit_reason"] == "completed" and summary["epochs_completed"] == 15
    assert summary["onnx_max_abs_diff"] < 1e-4 and (tmp_path / "model.onnx").exists()
    for artifact in ("config.yaml", "curves.png", "logs/rank-0.log", "metrics.jsonl", "hparams.yaml",
                     "weights/best.pt", "weights/last.pt"):
        assert (tmp_path / artifact).exists(), artifact
    assert any(p.name.startswith("events.out.tfevents") for p in (tmp_path / "tb").iterdir())
    records = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    kinds = [r["kind"] for r in records]
    assert kinds[0] == "run" and kinds.count("epoch") == 15 and "checkpoint" in kinds
    assert records[0]["amp"] == dtype  # the path this case forces is the one that ran
    assert_summary_values_are_real(summary, tmp_path, records[0])
    last_epoch = [r for r in records if r["kind"] == "epoch"][-1]
    assert summary["data_wait_pct"] == last_epoch["data_wait_pct"]  # cumulative over training steps
    assert summary["verdict"] == expected_verdict(summary["data_wait_pct"], records[0]["workers"])


def assert_summary_values_are_real(summary: dict, run_dir: Path, run: dict) -> None:
    """Every summary value has its documented type and a value this CPU run can produce."""
    assert (summary["status"], summary["exit_code"], summary["resumed_from_step"]) == ("completed", 0, None)
    assert (summary["world_size"], summary["num_nodes"], summary["device"]) == (1, 1, "cpu")
    assert summary["steps"] == summary["total_steps"] == run["total_steps"] == 15 * run["steps_per_epoch"]
    assert summary["global_batch"] == summary["micro_batch"] * summary["grad_accum"] == 64
    assert summary["lr"] == run["lr"] == 0.003  # lr0 at batch == nbs (linear scaling is 1x)
    for key in ("train_loss", "val_loss", "test_loss"):
        assert is_real(summary[key]) and 0 < summary[key] < CHANCE_LOSS, (key, summary[key])
    for key in ("val_acc", "test_acc"):
        assert is_real(summary[key]) and 0 <= summary[key] <= 1, (key, summary[key])
    assert is_real(summary["samples_per_s"]) and summary["samples_per_s"] > 0
    assert is_real(summary["data_wait_pct"]) and 0 <= summary["data_wait_pct"] <= 100
    assert is_real(summary["checkpoint_write_s"]) and summary["checkpoint_write_s"] > 0
    assert is_real(summary["wall_time_s"]) and 0 < summary["wall_time_s"] < 600  # the subprocess timeout
    assert is_real(summary["onnx_max_abs_diff"]) and summary["onnx_max_abs_diff"] >= 0
    assert summary["checkpoint"] == str(run_dir / "checkpoints" / f"step-{summary['steps']:08d}")
    assert Path(summary["checkpoint"]).is_dir()
    assert summary["onnx"] == str(run_dir / "model.onnx")
    assert re.fullmatch(r"[0-9a-f]{16}", summary["config_hash"]) and summary["config_hash"] == run["config_hash"]
    assert summary["torch_version"] == version("torch")
    assert summary["trainkit_version"] == trainkit.__version__


def is_real(value) -> bool:
    """A finite float (an int or None is not a measured loss, rate or time)."""
    return isinstance(value, float) and math.isfinite(value)


def expected_verdict(pct: float, workers: int) -> str:
    """The verdict docs/training.md promises for a CPU run (no GPU utilisation is measured):
    data-bound above 10% data wait, with the advice that fits the worker count."""
    bound = suggested_workers(os.cpu_count() or 1, 1)
    if pct <= 10.0:
        return f"compute-bound: data wait {pct:.1f}% of step time"
    advice = (f"raise workers (now {workers}, machine bound {bound})" if workers < bound
              else "make __getitem__/collate cheaper or pre-process")
    return f"data-bound: data wait {pct:.1f}% of step time; {advice}"
