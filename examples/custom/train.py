"""A plain PyTorch DDP script that follows trainkit's resumable-command contract (docs/runs.md).

Nothing here imports trainkit. Under torchrun it trains a small MLP on scikit-learn's 8x8 digits:

- checkpoints to $TRAINKIT_CHECKPOINT_DIR (rank 0; temp file + rename, so a file is whole or absent)
  every CKPT_EVERY steps, and resumes from the newest one at start;
- on SIGTERM (a spot notice or `trainkit cancel`) every rank finishes its step, the ranks agree,
  rank 0 writes a checkpoint, each node's local rank 0 writes "preempted" to
  $TRAINKIT_STATUS_FILE, and every rank exits 75;
- appends `run` / `step` / `epoch` records to $TRAINKIT_RUN_DIR/metrics.jsonl (optional: it lets
  `trainkit runs` show the step and the recovery loop measure lost work).

Run it alone too:  torchrun --standalone --nproc-per-node 2 train.py
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from sklearn.datasets import load_digits

EPOCHS = int(os.environ.get("EPOCHS", "12"))
CKPT_EVERY = int(os.environ.get("CKPT_EVERY", "5"))
BATCH = 64                  # global batch
PREEMPTED = 75              # the contract's exit code: checkpoint saved, run me again
STOP = {"requested": False}


def main() -> int:
    signal.signal(signal.SIGTERM, lambda *_: STOP.update(requested=True))
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    x, y = load_digits(return_X_y=True)
    x = torch.tensor(x / 16.0, dtype=torch.float32)
    y = torch.tensor(y)
    perm = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
    train_idx, val_idx = perm[: int(0.8 * len(x))], perm[int(0.8 * len(x)):]
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    ckpt_dir = Path(os.environ.get("TRAINKIT_CHECKPOINT_DIR", "checkpoints"))
    run_dir = Path(os.environ.get("TRAINKIT_RUN_DIR", "."))
    step = resume(ckpt_dir, model, opt)
    per_epoch = len(train_idx) // BATCH
    log(rank, run_dir, kind="run", world_size=world, resumed_from_step=step or None)
    while step < EPOCHS * per_epoch:
        epoch, i = divmod(step, per_epoch)
        order = train_idx[torch.randperm(len(train_idx), generator=torch.Generator().manual_seed(epoch))]
        batch = order[i * BATCH:(i + 1) * BATCH][rank::world]
        t0 = time.perf_counter()
        loss = F.cross_entropy(model(x[batch]), y[batch])
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        log(rank, run_dir, kind="step", step=step, loss=loss.item(), step_time_s=time.perf_counter() - t0)
        if step % per_epoch == 0:
            with torch.no_grad():
                acc = (model(x[val_idx]).argmax(1) == y[val_idx]).float().mean().item()
            log(rank, run_dir, kind="epoch", step=step, epoch=epoch, val_acc=acc)
        stop = torch.tensor([1 if STOP["requested"] else 0])
        dist.all_reduce(stop)                      # every rank stops at the same step
        if stop.item() or step % CKPT_EVERY == 0:
            save(ckpt_dir, rank, step, model, opt)
        if stop.item():
            if int(os.environ.get("LOCAL_RANK", "0")) == 0 and os.environ.get("TRAINKIT_STATUS_FILE"):
                Path(os.environ["TRAINKIT_STATUS_FILE"]).write_text("preempted\n")
            print(f"rank {rank}: stopped at step {step}, checkpoint saved", flush=True)
            dist.destroy_process_group()
            return PREEMPTED
    save(ckpt_dir, rank, step, model, opt)
    print(f"rank {rank}: done at step {step}", flush=True)
    dist.destroy_process_group()
    return 0


def resume(ckpt_dir: Path, model, opt) -> int:
    found = sorted(ckpt_dir.glob("step-*.pt"))
    if not found:
        return 0
    state = torch.load(found[-1], weights_only=True)
    model.module.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    print(f"resumed from {found[-1]}", flush=True)
    return int(state["step"])


def save(ckpt_dir: Path, rank: int, step: int, model, opt) -> None:
    if rank == 0:
        ckpt_dir.mkdir(parents=True, exist_ok=True)
        tmp = ckpt_dir / f".step-{step:08d}.pt.tmp"
        torch.save({"step": step, "model": model.module.state_dict(), "opt": opt.state_dict()}, tmp)
        tmp.replace(ckpt_dir / f"step-{step:08d}.pt")
    dist.barrier()


def log(rank: int, run_dir: Path, **record) -> None:
    if rank == 0:
        with open(run_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps({"time": round(time.time(), 3), **record}) + "\n")


if __name__ == "__main__":
    sys.exit(main())
