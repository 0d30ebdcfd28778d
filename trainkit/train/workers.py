"""`workers: auto`: how many DataLoader workers fit this dataset on this machine.

In-memory datasets (a TensorDataset, possibly inside Subsets, or any dataset with a true
`in_memory` attribute) get 0: indexing a tensor is cheaper than shipping the batch back from a
worker process (measured on the digits example: ~20% data wait with 1 worker, ~5% with 0).
Anything else is measured at start-up: a few batches are timed with 0, 1, 2, ... workers (up to
Lightning's bound, `schedule.suggested_workers`), stopping once adding a worker no longer helps,
and the fewest workers within 5% of the fastest are kept. Rank 0 decides; every rank uses its choice.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

import torch
from torch.utils.data import DataLoader, Dataset, Subset, TensorDataset

log = logging.getLogger("trainkit.train")

PROBE_BATCHES = 6    # timed batches per candidate, after one warm-up batch (worker start-up)
NEAR_BEST = 1.05     # within 5% of the fastest counts as as fast: prefer fewer processes


def in_memory(ds: Dataset) -> bool:
    """True for a TensorDataset (through any Subset wrappers) or a dataset flagged `in_memory`."""
    while True:
        if getattr(ds, "in_memory", False) is True or isinstance(ds, TensorDataset):
            return True
        if not isinstance(ds, Subset):
            return False
        ds = ds.dataset


def pick(timings: dict[int, float]) -> int:
    """The fewest workers whose time is within NEAR_BEST of the fastest (pure)."""
    best = min(timings.values())
    return min(n for n, t in timings.items() if t <= best * NEAR_BEST)


def measure(ds: Dataset, batch: int, bound: int, time_one: Callable[[int], float] | None = None
            ) -> dict[int, float]:
    """Seconds for PROBE_BATCHES batches at 0, 1, ... `bound` workers; stops after the first count
    slower than the best so far. `time_one(n)` is injectable (tests)."""
    time_one = time_one or (lambda n: _time_loader(ds, batch, n))
    timings: dict[int, float] = {}
    for n in range(bound + 1):
        timings[n] = time_one(n)
        if n > 0 and timings[n] > min(timings.values()):
            break
    return timings


def _time_loader(ds: Dataset, batch: int, workers: int) -> float:
    gen = torch.Generator().manual_seed(0)
    n = min(len(ds), batch * (PROBE_BATCHES + 1))
    idx = torch.randperm(len(ds), generator=gen)[:n].tolist()
    opts: dict[str, Any] = {"num_workers": workers}
    if workers:
        opts["prefetch_factor"] = 2
    it = iter(DataLoader(Subset(ds, idx), batch_size=batch, **opts))
    next(it, None)  # warm-up: worker start-up is paid once per run (persistent workers)
    t0 = time.perf_counter()
    for _ in it:
        pass
    took = time.perf_counter() - t0
    del it
    return took


def choose(ds: Dataset, batch: int, bound: int, is_main: bool = True,
           share: Callable[[Any], Any] = lambda x: x) -> int:
    """The worker count for `workers: auto` (see module docstring); logs the choice on rank 0.
    `share` broadcasts rank 0's answer (dist.broadcast_object)."""
    choice: tuple[int, str] | None = None
    if is_main:
        if in_memory(ds):
            choice = (0, "in-memory dataset: batches are tensor slices")
        else:
            timings = measure(ds, batch, bound)
            n = pick(timings)
            shown = ", ".join(f"{k}: {1e3 * t:.0f} ms" for k, t in timings.items())
            choice = (n, f"measured {PROBE_BATCHES} batches ({shown})")
    n, why = share(choice)
    if is_main:
        log.info("workers: auto -> %d (%s)", n, why)
    return n
