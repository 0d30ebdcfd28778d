"""Training engine vs a vanilla PyTorch loop with the same features, side by side (not a test).

Prints, measured in the same run on the same model, data and batch:
  1. step time: trainkit's hot loop (`engine.fit`: timing, metrics, loss agreement, checkpoint
     policy, per-sample dropout keys) vs a *fair* vanilla loop that does everything the engine's
     step does for the user: the same loader (DistributedSampler + set_epoch), autocast with the
     engine's dtype (bf16 where the CPU has it), GradScaler calls, gradient clipping at the config's
     grad_clip, the LR schedule stepped every step, zero_grad(set_to_none), and loss.item() every
     step (what a loop that logs or checks for NaN does). Lightning's parity benchmark compares the
     same way (tests/parity_pytorch). Rounds alternate ABBA (vanilla, engine, engine, vanilla, ...)
     so drift on a shared machine hits both alike; the median of each and of the per-round ratios,
     and their spread (min..max), are printed. Goal: engine/vanilla <= 1.02.
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

STEPS, ROUNDS = 200, 8  # 8 rounds = two ABBA blocks
_OVER: dict[str, str] = {}  # config overrides of the current comparison (main)


def _cfg(run_dir: str, **over):
    from trainkit.train.config import load_config

    args = [f"run_dir={run_dir}", f"max_steps={STEPS}", "epochs=100", "workers=0", "log_every=10",
            "tensorboard=false", "plot=false", "export.onnx=false", "checkpoint.interval=null"]
    return load_config("examples/train/digits.yaml" if Path("examples/train/digits.yaml").exists()
                       else None, args + [f"{k}={v}" for k, v in {**_OVER, **over}.items()])


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
    """Seconds for STEPS steps of a plain loop with the engine's features (see the docstring)."""
    import torch
    import torch.nn.functional as F

    from trainkit.train import dist
    from trainkit.train.run import build_run

    run = build_run(_cfg(run_dir), dist.setup("cpu"))
    model, opt, sched, scaler, clip = run.model, run.opt, run.sched, run.scaler, run.cfg.grad_clip
    amp = run.amp_dtype is not None
    step, epoch, total = 0, 0, 0.0
    while step < STEPS:
        run.sampler.set_epoch(epoch)
        batches = iter(run.loader)
        for _ in range(len(run.loader)):
            t0 = time.perf_counter()
            x, y = next(batches)
            with torch.autocast("cpu", dtype=run.amp_dtype, enabled=amp):
                loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            if clip:
                scaler.unscale_(opt)
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
            sched.step()
            loss.item()
            total += time.perf_counter() - t0
            step += 1
            if step == STEPS:
                break
        epoch += 1
    return total


def spread(values: list[float], scale: float = 1.0, fmt: str = "{:.2f}") -> str:
    """'median (min..max)' of `values` times `scale`."""
    v = sorted(x * scale for x in values)
    return f"{fmt.format(statistics.median(v))} ({fmt.format(v[0])}..{fmt.format(v[-1])})"


def rounds(over: dict[str, str]) -> tuple[list[float], list[float], list[float]]:
    """(engine seconds, vanilla seconds, engine data-wait %) per round, ABBA: V E | E V | ..."""
    global _OVER
    _OVER = over
    eng, van, waits = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(ROUNDS):
            order = ("vanilla", "engine") if i % 2 == 0 else ("engine", "vanilla")
            for which in order:
                if which == "vanilla":
                    van.append(vanilla_loop(f"{tmp}/v{i}"))
                else:
                    took, wait = engine_loop(f"{tmp}/e{i}")
                    eng.append(took), waits.append(wait)
    return eng, van, waits


def main() -> None:
    import torch

    from trainkit.train.run import pick_amp_dtype

    print("== training engine vs a fair vanilla loop (benchmarks/bench_train.py) ==")
    eng, van, waits = rounds({})
    dtype = pick_amp_dtype(True, torch.device("cpu"))
    e, v = statistics.median(eng), statistics.median(van)
    ratios = [a / b for a, b in zip(eng, van)]
    print(f"both loops: autocast {str(dtype).replace('torch.', '') if dtype else 'off (no bf16 on this CPU)'}, "
          f"grad_clip, LR schedule, same loader; {STEPS} steps x {ROUNDS} rounds in ABBA order")
    print(f"step time, median (min..max): engine {spread(eng, 1e3 / STEPS)} ms, "
          f"vanilla {spread(van, 1e3 / STEPS)} ms")
    print(f"engine/vanilla: ratio of medians {e / v:.3f}; per-round ratios {spread(ratios, fmt='{:.3f}')} "
          f"(goal <= 1.02)")
    print(f"data-wait share (engine, workers=0): {statistics.median(waits):.1f}% of step time")
    # What the gap is made of: the same comparison without dropout leaves out the engine's
    # per-sample dropout masks (rng.KeyedDropout hashes every element; the vanilla loop draws
    # torch's bernoulli mask), so what remains is the loop itself.
    eng, van, _ = rounds({"model_args.dropout": "0.0"})
    print(f"the same with model_args.dropout=0 (no masks): engine {spread(eng, 1e3 / STEPS)} ms, "
          f"vanilla {spread(van, 1e3 / STEPS)} ms; ratio of medians "
          f"{statistics.median(eng) / statistics.median(van):.3f}; per-round ratios "
          f"{spread([a / b for a, b in zip(eng, van)], fmt='{:.3f}')}")


if __name__ == "__main__":
    main()
