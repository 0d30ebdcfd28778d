"""The bound on work lost to a fault: a background checkpoint save is committed before the step
`checkpoint.overlap_steps` (default 1) after it is logged, so a fault mid-write loses at most one
checkpoint interval (recovery's promise; docs/runs.md). The write is made slower than a step
(real DCP write, then a pause before the commit is recorded): the order is causal, not timed."""

from __future__ import annotations

import json
import time
from pathlib import Path

from trainkit.train import sharded
from trainkit.train.config import load_config

REPO = Path(__file__).resolve().parents[3]


def test_a_background_save_is_committed_before_the_next_step_is_logged(tmp_path, monkeypatch):
    from trainkit.train.engine import train

    commits: dict[int, float] = {}
    real = sharded.Checkpointer._finish

    def slow(self, fut, folder, step, t0):
        time.sleep(0.5)   # longer than a digits step: unbounded, several steps would pass meanwhile
        real(self, fut, folder, step, t0)
        commits[step] = round(time.time(), 3)  # metrics.jsonl's resolution (monitor.py): rounding keeps <=

    monkeypatch.setattr(sharded.Checkpointer, "_finish", slow)
    cfg = load_config(REPO / "examples/train/digits.yaml",
                      ["epochs=1", "workers=0", "tensorboard=false", "plot=false", "export.onnx=false",
                       "checkpoint.interval=null", "checkpoint.every_n_steps=5", "log_every=1",
                       f"run_dir={tmp_path / 'run'}"])
    assert train(cfg).exit_code == 0
    records = [json.loads(x) for x in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    logged = {r["step"]: r["time"] for r in records if r["kind"] == "step"}
    saved = [r["step"] for r in records if r["kind"] == "checkpoint" and r["reason"] == "schedule"]
    assert saved and all(s in commits for s in saved)
    for s in saved:
        if s + 1 in logged:
            assert commits[s] <= logged[s + 1], (s, commits[s], logged[s + 1])
