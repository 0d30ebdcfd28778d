"""Checkpoint cost: trainkit's async sharded save vs a synchronous torch.save of the same state.

Model: the built-in GPT at >= 100M parameters (15 blocks of width 768: ~106M), AdamW state
initialised by one step, so the state is ~1.3 GB (fp32 weights + two moments). One process on CPU
(the shard of a 1-rank run). Two figures, both as ratios to a synchronous torch.save(model +
optimizer state) + fsync of the same state (what a loop is blocked for without async):

  blocked  the time the training loop waits: `Checkpointer.save` (launches the staging copy) plus
           `wait_staged()` before the next optimizer step, as the engine's loop does;
  window   the extra wall time of the N training steps (forward, backward, AdamW step) from the
           save on, against the same N steps without a save: what the background write (staging,
           files, .metadata, the COMPLETE marker with sha256) costs the steps it runs beside, on
           shared cores and memory bandwidth. N covers the write (1.5x the first round's write
           time in steps, at least 4); the print says in how many rounds the write ended inside
           the window (when it did not, the window figure is a lower bound).

Round 0 allocates the staging buffers and sizes N; then ROUNDS rounds, each: a sync save, and the
two windows in ABBA order (save first in even rounds, plain first in odd ones). Medians and
min..max are printed. Goal: blocked / sync <= 0.10 (PyTorch's async DCP report: 148.8 s -> 6.3 s
blocked for a 7B model); the window ratio says how much of a sync save the async one still costs.
"""

from __future__ import annotations

import math
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

ROUNDS = 4


def build(width: int = 768, layers: int = 15):
    import torch

    from trainkit.train.gpt import GPT

    model = GPT(block_size=64, n_layer=layers, n_head=12, n_embd=width, dropout=0.0)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    step(model)
    opt.step()
    opt.zero_grad(set_to_none=True)
    return model, opt


def step(model, opt=None) -> float:
    """One forward + backward (and the AdamW step when `opt` is given). Returns its seconds."""
    import torch

    t0 = time.perf_counter()
    model(torch.zeros(4, 64, dtype=torch.long)).float().logsumexp(-1).mean().backward()
    if opt is not None:
        opt.step()
        opt.zero_grad(set_to_none=True)
    return time.perf_counter() - t0


def sync_save(model, opt, path: Path) -> float:
    import torch

    t0 = time.perf_counter()
    with open(path, "wb") as f:
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict()}, f)
        f.flush()
        os.fsync(f.fileno())
    return time.perf_counter() - t0


def window(model, opt, steps: int, saver=None, at: int = 0) -> tuple[float, float, bool]:
    """`steps` training steps, the first preceded by an async save when `saver` is given.
    Returns (wall seconds of the whole window, seconds blocked by the save, whether the
    background write ended inside the window)."""
    import torch

    tokens = torch.zeros(4, 64, dtype=torch.long)
    t0, blocked = time.perf_counter(), 0.0
    if saver is not None:
        blocked += saver.save(model, opt, {"step": at}, at, block=False)
    for _ in range(steps):
        model(tokens).float().logsumexp(-1).mean().backward()
        if saver is not None:
            blocked += saver.wait_staged()  # as the engine does before the optimizer step
        opt.step()
        opt.zero_grad(set_to_none=True)
    took = time.perf_counter() - t0
    done = saver is None or not saver.writing
    if saver is not None:
        saver.wait()
    return took, blocked, done


def spread(values: list[float], fmt: str = "{:.3f}") -> str:
    v = sorted(values)
    return f"{fmt.format(statistics.median(v))} ({fmt.format(v[0])}..{fmt.format(v[-1])})"


def main() -> None:
    from trainkit.train import sharded

    print("== checkpoint cost (benchmarks/bench_checkpoint.py) ==")
    model, opt = build()
    n = sum(p.numel() for p in model.parameters())
    tmp = Path(tempfile.mkdtemp(prefix="trainkit-bench-ckpt-", dir=os.environ.get("BENCH_DIR")))
    saver = sharded.Checkpointer(tmp / "ck", keep=2)
    sync, blocked, extra, inside = [], [], [], 0
    try:
        t_step = statistics.median(step(model, opt) for _ in range(3))
        saver.save(model, opt, {"step": 1}, 1, block=True)  # round 0: staging buffers, write time
        steps = max(4, math.ceil(1.5 * saver.last_write_s / t_step))
        for i in range(ROUNDS):
            sync.append(sync_save(model, opt, tmp / "plain.pt"))
            (tmp / "plain.pt").unlink()
            order = ("save", "plain") if i % 2 == 0 else ("plain", "save")
            took = {}
            for which in order:
                took[which] = window(model, opt, steps, saver if which == "save" else None, at=i + 2)
            blocked.append(took["save"][1])
            extra.append(took["save"][0] - took["plain"][0])
            inside += took["save"][2]
    finally:
        saver.close()
        shutil.rmtree(tmp, ignore_errors=True)
    s = statistics.median(sync)
    print(f"model {n / 1e6:.1f}M parameters + AdamW state; {ROUNDS} rounds, windows in ABBA order; "
          f"a step {t_step:.3f} s, window {steps} steps; medians (min..max)")
    print(f"sync torch.save+fsync: {spread(sync)} s")
    print(f"blocked by the async save: {spread(blocked)} s = {statistics.median(blocked) / s:.3f} of a sync save "
          f"(goal <= 0.10)")
    print(f"extra wall time of the {steps} steps around the save vs the same steps without one: "
          f"{spread(extra)} s = {statistics.median(extra) / s:.3f} of a sync save "
          f"(write ended inside the window in {inside}/{ROUNDS} rounds)")


if __name__ == "__main__":
    main()
