"""Training engine vs a vanilla PyTorch loop, side by side in one process (not a test).

Prints ratios, measured in the same run on the same model, data and batch:
  1. step time: trainkit's hot loop (`engine.fit`: timing, metrics, schedule, agreement, checkpoint
     policy) vs a bare loop (forward, backward, step, zero_grad) -- Lightning's parity benchmark
     does the same (tests/parity_pytorch). Target overhead <= 2%.
  2. checkpoint blocking time: trainkit's save (async: stage to host, write in a thread) vs a
     synchronous torch.save of the same state (both fsynced), and the full atomic write time.
  3. data-wait share of the engine's steps.
Both loops use workers=0 and the same in-memory digits tensors so only the loop differs.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

STEPS, REPEATS = 300, 3


def _cfg(run_dir: str, **over):
    from trainkit.train.config import load_config

    args = [f"run_dir={run_dir}", f"max_steps={STEPS}", "epochs=100", "workers=0", "log_every=10",
            "tensorboard=false", "plot=false", "export.onnx=false", "checkpoint.interval=null", "grad_clip=null"]
    return load_config("examples/train/digits.yaml" if Path("examples/train/digits.yaml").exists()
                       else None, args + [f"{k}={v}" for k, v in over.items()])


def engine_loop(run_dir: str) -> tuple[float, float]:
    """Seconds for STEPS engine steps and the data-wait share (%), trainkit's fit()."""
    from trainkit.train import checkpoint as ckpt, dist
    from trainkit.train.engine import fit
    from trainkit.train.lifecycle import build_run
    from trainkit.train.monitor import Monitor

    cfg = _cfg(run_dir)
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    info = dist.setup("cpu")
    run = build_run(cfg, info)
    monitor = Monitor(Path(run_dir), True, cfg.log_every, False, None)
    preempt = dist.Preemption()
    fit(run, ckpt.Checkpointer(Path(run_dir) / "ck", 2), monitor, preempt)
    preempt.restore(), monitor.close()
    return monitor.total_step_s, monitor.data_wait_pct()  # step time only (no validation)


def vanilla_loop(run_dir: str) -> float:
    """Seconds for STEPS steps of the plainest loop over the same model, optimizer and loader."""
    import torch.nn.functional as F

    from trainkit.train import dist
    from trainkit.train.lifecycle import build_run

    run = build_run(_cfg(run_dir), dist.setup("cpu"))
    model, opt, step, total = run.model, run.opt, 0, 0.0
    while step < STEPS:
        batches = iter(run.loader)
        for _ in range(len(run.loader)):
            t0 = time.perf_counter()
            x, y = next(batches)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            total += time.perf_counter() - t0
            step += 1
            if step == STEPS:
                break
    return total


def checkpoint_blocking(tmp: str) -> dict[str, float]:
    """Blocked seconds: trainkit async save vs sync torch.save (+fsync) of the same state."""
    import torch

    from trainkit.train import checkpoint as ckpt, dist
    from trainkit.train.lifecycle import build_run

    Path(tmp).mkdir(parents=True, exist_ok=True)
    run = build_run(_cfg(tmp), dist.setup("cpu"))
    state = {"model": run.model.state_dict(), "optimizer": run.opt.state_dict(), "rng": [ckpt.rng_state()]}
    saver = ckpt.Checkpointer(Path(tmp) / "ck", keep=2)
    sync, blocked, write = [], [], []
    for i in range(REPEATS):
        t0 = time.perf_counter()
        with open(Path(tmp) / "plain.pt", "wb") as f:
            torch.save(state, f)
            f.flush(), os.fsync(f.fileno())
        sync.append(time.perf_counter() - t0)
        blocked.append(saver.save(state, i + 1, block=False))
        saver.wait()
        write.append(saver.last_write_s)
    return {"sync": statistics.median(sync), "blocked": statistics.median(blocked),
            "write": statistics.median(write)}


def main() -> None:
    print("== training engine (benchmarks/bench_train.py) ==")
    eng, van, waits = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(REPEATS):  # interleaved, so machine noise hits both alike
            van.append(vanilla_loop(f"{tmp}/v{i}"))
            took, wait = engine_loop(f"{tmp}/e{i}")
            eng.append(took), waits.append(wait)
        ck = checkpoint_blocking(f"{tmp}/ck")
    e, v = statistics.median(eng), statistics.median(van)
    print(f"step time: engine {1e3 * e / STEPS:.2f} ms, vanilla {1e3 * v / STEPS:.2f} ms, "
          f"ratio {e / v:.3f} (overhead {100 * (e / v - 1):+.1f}%, target <= +2%)")
    print(f"checkpoint: trainkit blocked {1e3 * ck['blocked']:.2f} ms vs sync torch.save+fsync "
          f"{1e3 * ck['sync']:.2f} ms, ratio {ck['blocked'] / ck['sync']:.3f}; full atomic write "
          f"{1e3 * ck['write']:.2f} ms (ratio {ck['write'] / ck['sync']:.2f} vs sync)")
    print(f"data-wait share (engine, workers=0): {statistics.median(waits):.1f}% of step time")


if __name__ == "__main__":
    main()
