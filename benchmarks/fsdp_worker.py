"""One rank of benchmarks/bench_fsdp.py (run under torchrun): train the GPT example for a few steps
with the given strategy, write this rank's step time, peak RSS and training-state bytes as JSON."""

from __future__ import annotations

import json
import resource
import sys
from pathlib import Path


def local_bytes(t) -> int:
    t = t.to_local() if hasattr(t, "to_local") else t
    return t.numel() * t.element_size()


def main(strategy: str, steps: int, out: str) -> None:
    from trainkit.train import dist
    from trainkit.train.config import load_config
    from trainkit.train.engine import fit
    from trainkit.train.monitor import Monitor
    from trainkit.train.run import build_run, make_saver

    run_dir = Path(out).parent / strategy
    cfg = load_config("examples/train/gpt.yaml", [f"strategy={strategy}", f"max_steps={steps}",
                                                  f"run_dir={run_dir}", "checkpoint.interval=null",
                                                  "tensorboard=false", "plot=false", "log_every=1000"])
    info = dist.setup("cpu")
    run = build_run(cfg, info)
    monitor = Monitor(run_dir, False, cfg.log_every, False, None)
    preempt = dist.Preemption()
    fit(run, make_saver(run), monitor, preempt)
    state = sum(local_bytes(p) for p in run.model.parameters())
    state += sum(local_bytes(v) for s in run.opt.state.values() for v in s.values()
                 if hasattr(v, "numel") and v.dim() > 0)
    rec = {"rank": info.rank, "step_s": monitor.total_step_s / monitor.steps,
           "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
           "param_opt_mb": state / 2**20, "strategy": run.strategy}
    Path(f"{out}.{info.rank}").write_text(json.dumps(rec))
    dist.teardown()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
