"""GPU checks: AMP on CUDA, NCCL across ranks, NVML utilisation in the metrics.

Only for machines with an NVIDIA GPU (`make test-gpu`); `make test` and CI never select this tier.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch


@pytest.fixture(autouse=True)
def _cuda():
    """The tier is opt-in (`make test-gpu`); on a machine without CUDA there is nothing to check."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")


def run(repo, tmp_path, argv, **over):
    overrides = [f"{k}={v}" for k, v in {"run_dir": tmp_path / "run", "epochs": 3, **over}.items()]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([*argv, str(repo / "examples/train/digits.yaml"), *overrides],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    metrics = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    return summary, metrics


@pytest.mark.parametrize("amp", [True, False])
def test_digits_trains_on_cuda_and_logs_gpu_use(repo, tmp_path, amp):
    summary, metrics = run(repo, tmp_path, [sys.executable, "-m", "trainkit", "run"], amp=amp)
    assert summary["device"].startswith("cuda") and summary["val_acc"] >= 0.9
    run_rec = next(m for m in metrics if m["kind"] == "run")
    assert (run_rec["amp"] is not None) == amp  # bf16 (or fp16 + GradScaler) only when asked
    steps = [m for m in metrics if m["kind"] == "step"]
    assert steps and all("gpu_util_pct" in m and m["gpu_mem_mb"] > 0 for m in steps)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="NCCL across ranks needs 2 GPUs")
def test_two_ranks_over_nccl_match_one_rank(repo, tmp_path):
    one, _ = run(repo, tmp_path / "one", [sys.executable, "-m", "trainkit", "run"], amp=False)
    two, _ = run(repo, tmp_path / "two", [sys.executable, "-m", "torch.distributed.run", "--standalone",
                                          "--nproc-per-node", "2", "-m", "trainkit", "run"], amp=False)
    assert two["world_size"] == 2 and two["steps"] == one["steps"]
    assert two["val_acc"] >= 0.9
