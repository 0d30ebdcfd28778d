"""Preemption and resume, for real: SIGTERM -> checkpoint -> exit 75 -> resume -> bitwise-equal
weights; kill -9 during a checkpoint write; corrupt and partial checkpoints skipped with a warning.

Every run is a subprocess (`python -m trainkit run`, one process, CPU, OMP_NUM_THREADS=1) on the
digits example cut to 40 steps (19 per epoch, so resumes land mid-epoch and on epoch boundaries) with
one DataLoader worker (which must ignore SIGTERM) and dropout on (so RNG state matters).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from trainkit.errors import PREEMPTED
from trainkit.train import checkpoint as ckpt
from trainkit.train import restore

REPO = Path(__file__).resolve().parents[2]
STEPS = 40
ARGS = ["examples/train/digits.yaml", f"max_steps={STEPS}", "workers=1", "log_every=1",
        "export.onnx=false", "plot=false", "tensorboard=false", "checkpoint.interval=null",
        "amp=false"]  # fp32: bitwise resume; the bf16 case has its own test


def env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("TRAINKIT_FAULT")}
    e.update(OMP_NUM_THREADS="1", PYTHONPATH=str(REPO), **extra)
    return e


def trainkit_run(run_dir: Path, *extra: str, timeout: int = 240, **fault: str):
    cmd = [sys.executable, "-m", "trainkit", "run", *ARGS, f"run_dir={run_dir}", *extra]
    return subprocess.run(cmd, cwd=REPO, env=env(**fault), capture_output=True, text=True,
                          timeout=timeout)


def final_weights(run_dir: Path) -> dict[str, torch.Tensor]:
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == STEPS, summary
    return restore.load(summary["checkpoint"])["model"]


def assert_bitwise_equal(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        assert torch.equal(a[key], b[key]), f"{key} differs"


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> dict[str, torch.Tensor]:
    """The uninterrupted run's final weights."""
    run_dir = tmp_path_factory.mktemp("baseline")
    proc = trainkit_run(run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return final_weights(run_dir)


def test_sigterm_at_several_steps_then_resume_is_bitwise_identical(tmp_path, baseline):
    # 5: mid-epoch 0; 19: exactly the end of epoch 0 (before validation); 26: mid-epoch 1
    stops = [5, 19, 26]
    for stop in stops:
        proc = trainkit_run(tmp_path, TRAINKIT_FAULT_SIGTERM_AT_STEP=",".join(map(str, stops)))
        assert proc.returncode == PREEMPTED, proc.stderr[-3000:]
        assert "stopped by SIGTERM" in proc.stderr and "Traceback" not in proc.stderr
        summary = json.loads((tmp_path / "summary.json").read_text())
        assert (summary["status"], summary["steps"], summary["exit_code"]) == ("preempted", stop, 75)
        assert restore.load(tmp_path / "checkpoints" / f"step-{stop:08d}")["step"] == stop
    proc = trainkit_run(tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((tmp_path / "summary.json").read_text())["resumed_from_step"] == stops[-1]
    assert_bitwise_equal(final_weights(tmp_path), baseline)


def test_sigterm_then_resume_under_bf16_autocast_is_bitwise_identical(tmp_path):
    """The default config's path on a CPU with native bf16 (and on GPUs), forced on every CPU."""
    bf16 = ("amp=true", "amp_dtype=bf16")
    proc = trainkit_run(tmp_path / "base", *bf16)
    assert proc.returncode == 0 and "amp: bf16 autocast on CPU" in proc.stderr, proc.stderr[-3000:]
    proc = trainkit_run(tmp_path / "cut", *bf16, TRAINKIT_FAULT_SIGTERM_AT_STEP="19")
    assert proc.returncode == PREEMPTED, proc.stderr[-3000:]
    proc = trainkit_run(tmp_path / "cut", *bf16)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert_bitwise_equal(final_weights(tmp_path / "cut"), final_weights(tmp_path / "base"))


def test_external_sigterm_while_training_then_resume_is_bitwise_identical(tmp_path, baseline):
    cmd = [sys.executable, "-m", "trainkit", "run", *ARGS, f"run_dir={tmp_path}"]
    proc = subprocess.Popen(cmd, cwd=REPO, env=env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    metrics = tmp_path / "metrics.jsonl"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        lines = metrics.read_text().splitlines() if metrics.exists() else []
        if any(json.loads(line).get("step", 0) >= 3 for line in lines if '"kind": "step"' in line):
            proc.send_signal(signal.SIGTERM)  # what torchrun / a spot shutdown sends
            break
        time.sleep(0.005)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == PREEMPTED, err[-3000:]
    stopped = json.loads((tmp_path / "summary.json").read_text())["steps"]
    assert 3 <= stopped < STEPS
    resumed = trainkit_run(tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert_bitwise_equal(final_weights(tmp_path), baseline)


def test_kill_9_mid_write_and_a_corrupt_checkpoint_are_skipped_then_resume_is_exact(tmp_path,
                                                                                     baseline):
    every = ["checkpoint.every_n_steps=4"]
    proc = trainkit_run(tmp_path, *every, TRAINKIT_FAULT_KILL_IN_SAVE="12")
    assert proc.returncode == -signal.SIGKILL
    root = tmp_path / "checkpoints"
    assert not (root / "step-00000012" / "COMPLETE").exists()  # the write never finished
    assert restore.load(root / "step-00000008")["step"] == 8      # the previous one is intact
    state = root / "step-00000008" / "__0_0.distcp"            # this rank's shard
    data = bytearray(state.read_bytes())
    data[len(data) // 2] ^= 0xFF                               # and now it is not
    state.write_bytes(bytes(data))
    proc = trainkit_run(tmp_path, *every)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "skipping checkpoint" in proc.stderr and "step-00000012" in proc.stderr
    assert "partial" in proc.stderr and "corrupt" in proc.stderr
    assert json.loads((tmp_path / "summary.json").read_text())["resumed_from_step"] == 4
    assert_bitwise_equal(final_weights(tmp_path), baseline)
