"""Input pipeline: the engine with `workers: auto` vs a vanilla loop with the best DataLoader settings.

Side by side in one process, same model, data (the digits example, in memory) and batch:
  - engine, workers=auto (what users get: 0 for an in-memory dataset), and engine, workers=1 (the
    old default) -- step time and data-wait share (time around next() / step time);
  - a vanilla loop (forward, backward, step) over DataLoaders with 0 and 1 workers; the faster is
    "best DataLoader settings".
Target (issue 13): the example's data wait <= 5% with the default.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

STEPS, REPEATS = 200, 3


def engine(run_dir: str, workers: str) -> tuple[float, float]:
    """(ms per step, data wait %) of trainkit's fit() for STEPS steps."""
    from pathlib import Path

    from benchmarks.bench_train import _cfg
    from trainkit.train import data, dist
    from trainkit.train.engine import fit
    from trainkit.train.monitor import Monitor
    from trainkit.train.run import build_run
    from trainkit.train.sharded import Checkpointer

    cfg = _cfg(run_dir, workers=workers, max_steps=STEPS)
    Path(run_dir).mkdir(parents=True, exist_ok=True)
    run = build_run(cfg, dist.setup("cpu"))
    monitor = Monitor(Path(run_dir), True, cfg.log_every, False, None)
    preempt = dist.Preemption()
    try:
        fit(run, Checkpointer(Path(run_dir) / "ck", 2), monitor, preempt)
    finally:
        data.close_loader(run.loader)
        preempt.restore(), monitor.close()
    return 1e3 * monitor.total_step_s / run.step, monitor.data_wait_pct()


def vanilla(run_dir: str, workers: int) -> tuple[float, float]:
    """(ms per step, data wait %) of a bare loop over a DataLoader with `workers` workers."""
    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader

    from benchmarks.bench_train import _cfg
    from trainkit.train import dist
    from trainkit.train.run import build_run

    run = build_run(_cfg(run_dir, workers=0), dist.setup("cpu"))
    opts = {"num_workers": workers, "persistent_workers": workers > 0}
    loader = DataLoader(run.splits["train"], batch_size=run.plan.micro, shuffle=True, drop_last=True,
                        generator=torch.Generator().manual_seed(0), **opts)
    step, total, wait = 0, 0.0, 0.0
    while step < STEPS:
        it = iter(loader)
        for _ in range(len(loader)):
            t0 = time.perf_counter()
            x, y = next(it)
            wait += time.perf_counter() - t0
            loss = F.cross_entropy(run.model(x), y)
            loss.backward()
            run.opt.step()
            run.opt.zero_grad(set_to_none=True)
            total += time.perf_counter() - t0
            step += 1
            if step == STEPS:
                break
    del it, loader
    return 1e3 * total / STEPS, 100 * wait / total


def main() -> None:
    print("== input pipeline (benchmarks/bench_data.py) ==")
    results: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(REPEATS):  # interleaved, so machine noise hits all alike
            for name, fn in (("engine workers=auto", lambda d: engine(d, "auto")),
                             ("engine workers=1", lambda d: engine(d, "1")),
                             ("vanilla workers=0", lambda d: vanilla(d, 0)),
                             ("vanilla workers=1", lambda d: vanilla(d, 1))):
                results.setdefault(name, []).append(fn(f"{tmp}/{name.replace(' ', '_')}{i}"))
    med = {k: (statistics.median(s for s, _ in v), statistics.median(w for _, w in v))
           for k, v in results.items()}
    best = min(("vanilla workers=0", "vanilla workers=1"), key=lambda k: med[k][0])
    print(f"{'loop':24} {'step ms':>8} {'data wait':>10}")
    for name, (step, wait) in med.items():
        print(f"{name:24} {step:8.2f} {wait:9.1f}%" + ("   <- best vanilla" if name == best else ""))
    e = med["engine workers=auto"]
    print(f"engine (auto) vs best vanilla: step time ratio {e[0] / med[best][0]:.3f}, "
          f"data wait {e[1]:.1f}% vs {med[best][1]:.1f}% (target <= 5%)")


if __name__ == "__main__":
    main()
