"""Node-side all-reduce timing for `trainkit doctor`: one process per node, torch.distributed.

Started on every node at once by the controller (piped to the node's Python over ssh), with
torch.distributed's env:// variables set: RANK (= the node's rank), WORLD_SIZE (= nodes),
MASTER_ADDR/MASTER_PORT (the head node). It times all_reduce(SUM) of one float32 buffer of
--bytes, the way nccl-tests' all_reduce_perf does (doc/PERFORMANCE.md there): --warmup untimed
calls, then --iters timed calls, the time per call is the mean, and a test's time is the mean
over its ranks (nccl-tests src/common.cu: `Allreduce(args, &deltaSec, average)`). Tests run one after the other, never two at
once: the whole world first, then each node pair of --pairs ("0-1,0-2,1-2") in its own group.

Rank 0 prints one JSON object: {"backend", "world", "bytes", "iters", "tests": [{"ranks": [...],
"seconds": t}]}. algbw/busbw are the controller's arithmetic (trainkit/cluster/doctor_verdict.py),
from these raw times.

    python allreduce_bench.py --backend gloo|nccl --bytes N --iters K --warmup W --pairs 0-1,...
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import time

INIT_TIMEOUT_S = 60  # every node starts within seconds of the others (one ssh each, in parallel)


def parse_pairs(text: str) -> list[list[int]]:
    return [[int(a), int(b)] for a, b in (p.split("-") for p in text.split(",") if p)]


def time_group(dist, torch, group, buf, iters: int, warmup: int, sync) -> float:
    """Mean seconds per all_reduce of `buf` over `group` on this rank."""
    for _ in range(warmup):
        dist.all_reduce(buf, group=group)
    sync()
    t0 = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(buf, group=group)
    sync()
    return (time.perf_counter() - t0) / iters


def parser() -> argparse.ArgumentParser:
    """The bench's options (trainkit passes each value as `--opt=value`, one word)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", choices=("gloo", "nccl"), default="gloo")
    ap.add_argument("--bytes", type=int, default=16 * 2**20)
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--pairs", default="")
    return ap


def main() -> None:
    args = parser().parse_args()

    import torch
    import torch.distributed as dist

    gpu = args.backend == "nccl"
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0"))) if gpu else torch.device("cpu")
    if gpu:
        torch.cuda.set_device(device)
    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=INIT_TIMEOUT_S))
    rank, world = dist.get_rank(), dist.get_world_size()
    pairs = parse_pairs(args.pairs)
    groups = [(list(range(world)), None)]
    groups += [(p, dist.new_group(p)) for p in pairs]  # every rank creates every group, same order

    def sync():
        if gpu:
            torch.cuda.synchronize(device)

    buf = torch.ones(max(1, args.bytes // 4), dtype=torch.float32, device=device)
    times = torch.zeros(len(groups), dtype=torch.float64, device=device)
    for i, (ranks, group) in enumerate(groups):
        dist.barrier()
        if rank in ranks:
            times[i] = time_group(dist, torch, group, buf, args.iters, args.warmup, sync)
    dist.all_reduce(times, op=dist.ReduceOp.SUM)  # non-members add 0: / members below = the mean
    if rank == 0:
        tests = [{"ranks": ranks, "seconds": float(t) / len(ranks)} for (ranks, _), t in zip(groups, times.tolist())]
        print(json.dumps({"backend": args.backend, "world": world, "bytes": buf.numel() * 4,
                          "iters": args.iters, "tests": tests}), flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
