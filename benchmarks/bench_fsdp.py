"""FSDP vs DDP on the GPT example (examples/train/gpt.yaml), CPU, 2 processes (torchrun, gloo).

Per strategy, alternating rounds: mean step time over STEPS optimizer steps, and per rank the peak
RSS (whole process: Python, torch, data) and the bytes of parameters + optimizer state the rank
holds (FSDP should hold about half of DDP's with 2 ranks; gradients follow the parameters).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STEPS, ROUNDS = 20, 2


def one(strategy: str, tmp: Path) -> list[dict]:
    out = tmp / f"{strategy}.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                    "--nproc-per-node=2", "benchmarks/fsdp_worker.py", strategy, str(STEPS), str(out)],
                   cwd=REPO, env=env, check=True, capture_output=True)
    return [json.loads(Path(f"{out}.{r}").read_text()) for r in (0, 1)]


def main() -> None:
    print("== FSDP vs DDP, GPT example, CPU, 2 processes (benchmarks/bench_fsdp.py) ==")
    runs: dict[str, list[list[dict]]] = {"ddp": [], "fsdp": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(ROUNDS):
            for strategy in runs:
                runs[strategy].append(one(strategy, Path(tmp)))
    summary = {}
    for strategy, rounds in runs.items():
        step = statistics.median(max(r["step_s"] for r in ranks) for ranks in rounds)
        rss = max(r["peak_rss_mb"] for ranks in rounds for r in ranks)
        state = max(r["param_opt_mb"] for ranks in rounds for r in ranks)
        summary[strategy] = (step, rss, state)
        print(f"{strategy:5} step {1e3 * step:7.1f} ms  peak RSS/rank {rss:7.1f} MiB  "
              f"params+optimizer state/rank {state:6.2f} MiB")
    (d, dr, ds), (f, fr, fs) = summary["ddp"], summary["fsdp"]
    print(f"fsdp/ddp: step time {f / d:.2f}x, peak RSS {fr / dr:.2f}x, params+optimizer state "
          f"{fs / ds:.2f}x (ideal 0.50 with 2 ranks)")


if __name__ == "__main__":
    main()
