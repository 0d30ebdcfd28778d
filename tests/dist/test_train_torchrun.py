"""Real torchrun, 2 processes, gloo on CPU (--standalone, OMP_NUM_THREADS=1).

- 2 processes and 1 process with the same GLOBAL batch give the same per-step losses and nearly the
  same weights, in fp32 (`amp=false`: rtol 1e-6 over 24 AdamW steps, the only difference being the
  order of float sums in the all-reduce; measured max 1.2e-7) and under bf16 autocast forced on
  (`amp_dtype=bf16`: rtol 5e-4; measured noise floor max 2.3e-4, median 2.5e-5, native and emulated
  bf16 alike);
- each rank reads a disjoint shard, the shards cover the global batch, set_epoch reshuffles;
- SIGTERM to torchrun (forwarded to both ranks) -> both stop at the same step, one checkpoint,
  resume under torchrun -> bitwise the uninterrupted 2-process run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from trainkit.train import checkpoint as ckpt
from trainkit.train import restore

REPO = Path(__file__).resolve().parents[2]
STEPS = 24
# dropout off: 1 and 2 processes draw different dropout masks (one RNG stream per rank)
ARGS = ["examples/train/digits.yaml", f"max_steps={STEPS}", "model_args.dropout=0.0", "workers=1",
        "log_every=1", "export.onnx=false", "plot=false", "tensorboard=false",
        "checkpoint.interval=null", "amp=false"]  # fp32 unless a test says otherwise
BF16 = ("amp=true", "amp_dtype=bf16")


def env(**extra: str) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith("TRAINKIT_FAULT")}
    e.update(OMP_NUM_THREADS="1", PYTHONPATH=os.pathsep.join([str(REPO), extra.pop("PYPATH", "")]),
             **extra)
    return e


def launch(nproc: int, run_dir: Path, *extra: str, args=ARGS, **envs: str):
    head = [sys.executable, "-m", "trainkit"] if nproc == 0 else [
        sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
        "-m", "trainkit"]
    cmd = [*head, "run", *args, f"run_dir={run_dir}", *extra]
    return subprocess.run(cmd, cwd=REPO, env=env(**envs), capture_output=True, text=True, timeout=300)


def step_losses(run_dir: Path) -> list[float]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r["loss"] for r in map(json.loads, lines) if r["kind"] == "step"]


def final(run_dir: Path) -> dict[str, torch.Tensor]:
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["status"] == "completed" and summary["steps"] == STEPS, summary
    return restore.load(summary["checkpoint"])["model"]


@pytest.fixture(scope="module")
def two_proc(tmp_path_factory) -> Path:
    run_dir = tmp_path_factory.mktemp("two")
    proc = launch(2, run_dir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return run_dir


def test_two_processes_match_one_process_under_bf16_autocast(tmp_path):
    runs = []
    for nproc in (0, 2):
        proc = launch(nproc, tmp_path / str(nproc), *BF16)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs.append(step_losses(tmp_path / str(nproc)))
    assert len(runs[0]) == len(runs[1]) == STEPS
    np.testing.assert_allclose(runs[1], runs[0], rtol=5e-4)  # bf16 floor: module docstring


def test_two_processes_match_one_process_at_the_same_global_batch(tmp_path, two_proc):
    proc = launch(0, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    one, two = step_losses(tmp_path), step_losses(two_proc)
    assert len(one) == len(two) == STEPS
    np.testing.assert_allclose(two, one, rtol=1e-6)
    summary = json.loads((two_proc / "summary.json").read_text())
    assert (summary["world_size"], summary["global_batch"], summary["micro_batch"]) == (2, 64, 32)
    a, b = final(tmp_path), final(two_proc)
    for key in a:
        torch.testing.assert_close(b[key], a[key], rtol=1e-3, atol=1e-4)
    assert (two_proc / "logs" / "rank-0.log").exists() and (two_proc / "logs" / "rank-1.log").exists()


def test_sigterm_to_torchrun_stops_both_ranks_at_one_step_and_resume_is_bitwise(tmp_path, two_proc):
    proc = launch(2, tmp_path, TRAINKIT_FAULT_SIGTERM_AT_STEP="7", TRAINKIT_FAULT_SIGTERM_TARGET="parent")
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["status"] == "preempted" and summary["exit_code"] == 75, proc.stderr[-3000:]
    stopped = summary["steps"]
    assert 7 <= stopped < STEPS
    assert [p.name for p in (tmp_path / "checkpoints").iterdir()] == [f"step-{stopped:08d}"]
    for rank in (0, 1):  # every rank stopped at the same step
        assert f"preempted after {stopped} steps" in (tmp_path / "logs" / f"rank-{rank}.log").read_text()
    proc = launch(2, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads((tmp_path / "summary.json").read_text())["resumed_from_step"] == stopped
    a, b = final(tmp_path), final(two_proc)
    assert all(torch.equal(a[k], b[k]) for k in a)


RECORDER = textwrap.dedent('''
    import os
    import torch
    from torch.utils.data import Dataset

    class Recording(Dataset):
        """Appends every index it serves to <dir>/rank-<RANK>.txt."""
        def __init__(self, out, n):
            self.out, self.n = out, n
            self.x = torch.randn(n, 4, generator=torch.Generator().manual_seed(0))
        def __len__(self):
            return self.n
        def __getitem__(self, i):
            with open(os.path.join(self.out, "rank-%s.txt" % os.environ["RANK"]), "a") as f:
                f.write("%d\\n" % i)
            return self.x[i], int(i % 3)

    def build(seed, out, n=80):
        ds = Recording(out, n)
        return ds, ds, ds          # train, val, test: only train is shuffled and sharded

    def model():
        return torch.nn.Linear(4, 3)
''')


def test_ranks_read_disjoint_shards_and_set_epoch_reshuffles(tmp_path):
    (tmp_path / "recmod.py").write_text(RECORDER)
    out = tmp_path / "seen"
    out.mkdir()
    args = ["model=recmod:model", "data=recmod:build", f"data_args={{out: '{out}', n: 80}}",
            "epochs=2", "batch=16", "workers=0", "export.onnx=false", "plot=false",
            "tensorboard=false", "checkpoint.interval=null", "warmup_epochs=0"]
    proc = launch(2, tmp_path / "run", args=args, PYPATH=str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    # each rank: 2 epochs x 5 steps x 8 samples of train, then val (40) and test (40) twice-ish;
    # the train part is the first 80 lines (val/test read their r::2 slices after each epoch)
    # (the first reads on each rank are items 0..7 and the val and test sets' item 0: the start-up
    # model-vs-data check, one micro-batch of train and one item of each other set)
    seen = {r: [int(v) for v in (out / f"rank-{r}.txt").read_text().split()][10:] for r in (0, 1)}
    per_epoch = 40  # 80 items / 2 ranks
    val_reads = 40  # r::2 of 80 val items, after epoch 0
    ep0 = {r: seen[r][:per_epoch] for r in (0, 1)}
    ep1 = {r: seen[r][per_epoch + val_reads:2 * per_epoch + val_reads] for r in (0, 1)}
    for ep in (ep0, ep1):
        assert not set(ep[0]) & set(ep[1])                     # disjoint shards
        assert sorted(ep[0] + ep[1]) == list(range(80))        # together: the whole set once
    assert ep0[0] != ep1[0]                                    # set_epoch changed the order
