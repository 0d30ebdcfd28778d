"""Training engine vs a vanilla PyTorch loop, side by side in one process (not a test).

Prints ratios, measured in the same run on the same model, data and batch:
  1. step time: trainkit's hot loop (`engine.fit`: timing, metrics, schedule, agreement, checkpoint
     policy, per-sample dropout keys) vs a bare loop (forward, backward, step, zero_grad) --
     Lightning's parity benchmark does the same (tests/parity_pytorch). Median of ROUNDS
     alternating rounds. Target overhead <= 2%.
  2. data-wait share of the engine's steps.
(Checkpoint blocking: bench_checkpoint.py.)
Both loops use workers=0 and the same in-memory digits tensors so only the loop differs.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

STEPS, REPEATS = 200, 7


def _cfg(run_dir: str, **over):
    from trainkit.train.config import load_config

    args = [f"run_dir={run_dir}", f"max_steps={STEPS}", "epochs=100", "workers=0", "log_every=10",
            "tensorboard=false", "plot=false", "export.onnx=false", "checkpoint.interval=null", "grad_clip=null"]
    return load_config("examples/train/digits.yaml" if Path("examples/train/digits.yaml").exists()
                       else None, args + [f"{k}={v}" for k, v in over.items()])


def engine_loop(run_dir: str) -> tuple[float, float]:
    """Seconds for STEPS engine steps and the data-wait share (%), trainkit's fit()."""
    from trainkit.train import dist
    from trainkit.train.engine import fit
    from trainkit.train.monitor import Monitor
    from trainkit.train.run import build_run, make_saver

    cfg = _cfg(run_dir)
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    info = dist.setup("cpu")
    run = build_run(cfg, info)
    monitor = Monitor(Path(run_dir), True, cfg.log_every, False, None)
    preempt = dist.Preemption()
    fit(run, make_saver(run), monitor, preempt)
    preempt.restore(), monitor.close()
    return monitor.total_step_s, monitor.data_wait_pct()  # step time only (no validation)


def vanilla_loop(run_dir: str) -> float:
    """Seconds for STEPS steps of the plainest loop over the same model, optimizer and loader."""
    import torch.nn.functional as F

    from trainkit.train import dist
    from trainkit.train.run import build_run

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


def main() -> None:
    print("== training engine (benchmarks/bench_train.py) ==")
    eng, van, waits = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(REPEATS):  # interleaved, so machine noise hits both alike
            van.append(vanilla_loop(f"{tmp}/v{i}"))
            took, wait = engine_loop(f"{tmp}/e{i}")
            eng.append(took), waits.append(wait)
    e, v = statistics.median(eng), statistics.median(van)
    ratios = sorted(a / b for a, b in zip(eng, van))
    print(f"step time: engine {1e3 * e / STEPS:.2f} ms, vanilla {1e3 * v / STEPS:.2f} ms, "
          f"ratio {e / v:.3f} (overhead {100 * (e / v - 1):+.1f}%, target <= +2%; per-round ratios "
          f"{ratios[0]:.3f}..{ratios[-1]:.3f}, {REPEATS} alternating rounds)")
    print(f"data-wait share (engine, workers=0): {statistics.median(waits):.1f}% of step time")


if __name__ == "__main__":
    main()
