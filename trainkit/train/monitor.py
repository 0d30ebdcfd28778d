"""Metrics and logs: metrics.jsonl, TensorBoard (optional), GPU stats (optional), curves, verdict.

Only rank 0 writes metrics; every rank logs to <run_dir>/logs/rank-N.log; rank 0 also prints
progress to stderr. metrics.jsonl records (one JSON object a line, field `kind`):
  run   : world_size, global_batch, micro_batch, grad_accum, lr, warmup_steps, total_steps,
          steps_per_epoch, workers, pin_memory, persistent_workers, prefetch_factor, device, amp,
          resumed_from_step, checkpoint_interval
  step  : step, epoch, loss, lr, samples_per_s, step_time_s, data_wait_s, data_wait_pct,
          [gpu_util_pct, gpu_mem_mb]   (means over the last `log_every` steps)
  epoch : epoch, step, train_loss, val_loss, val_acc, epoch_time_s, samples_per_s, data_wait_pct
  checkpoint : step, blocked_s, write_s, reason
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("trainkit.train")
# torchtitan/Lightning-style rule: a run is data-bound when waiting for batches takes > 10% of steps.
DATA_BOUND_PCT = 10.0
# ... and, on GPU, NVML utilisation stays below ~80% (NVML "util" = kernel presence, not occupancy).
GPU_BUSY_PCT = 80.0


def finite(obj: Any) -> Any:
    """`obj` with every NaN/inf float replaced by None (strict JSON has no NaN: jq, browsers)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    return obj


def open_jsonl(path: Path):
    """Open a JSON-lines file for appending. A half-written last line (the previous attempt was
    killed mid-write) is cut off first, so the next record does not run on into it."""
    if path.exists():
        with open(path, "rb+") as f:
            data = f.read()
            if data and not data.endswith(b"\n"):
                f.truncate(data.rfind(b"\n") + 1)
    return open(path, "a")


def setup_logging(run_dir: Path, rank: int) -> None:
    """Per-rank log file; progress to stderr on rank 0 only."""
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    log.handlers.clear()
    log.setLevel(logging.INFO)
    log.propagate = False
    fh = logging.FileHandler(run_dir / "logs" / f"rank-{rank}.log")
    fh.setFormatter(logging.Formatter(f"%(asctime)s rank{rank} %(levelname)s %(message)s"))
    log.addHandler(fh)
    if rank == 0:
        sh = logging.StreamHandler(sys.stderr)
        sh.setFormatter(logging.Formatter("%(message)s"))
        log.addHandler(sh)


class GpuStats:
    """NVML utilisation/memory of one device; every method returns {} when NVML is unavailable."""

    def __init__(self, device_index: int | None) -> None:
        self.handle = None
        if device_index is None:
            return
        try:
            import pynvml
            pynvml.nvmlInit()
            self.handle = pynvml.nvmlDeviceGetHandleByIndex(device_index)
            self._nvml = pynvml
        except Exception as err:  # missing package, no driver: degrade gracefully
            log.info("GPU stats off (%s)", err)

    def sample(self) -> dict[str, float]:
        if self.handle is None:
            return {}
        try:
            util = self._nvml.nvmlDeviceGetUtilizationRates(self.handle)
            mem = self._nvml.nvmlDeviceGetMemoryInfo(self.handle)
            return {"gpu_util_pct": float(util.gpu), "gpu_mem_mb": mem.used / 2**20}
        except Exception:
            return {}


class Monitor:
    """Collects per-step timings; writes windowed step records and epoch records (rank 0)."""

    def __init__(self, run_dir: Path, is_main: bool, log_every: int, tensorboard: bool,
                 gpu_index: int | None) -> None:
        self.run_dir, self.is_main, self.log_every = run_dir, is_main, log_every
        self.file = open_jsonl(run_dir / "metrics.jsonl") if is_main else None
        self.tb = _tensorboard(run_dir / "tb") if (is_main and tensorboard) else None
        self.gpu = GpuStats(gpu_index) if is_main else GpuStats(None)
        self.window: list[tuple[float, float, float]] = []  # (loss, step_s, wait_s)
        self.total_step_s = self.total_wait_s = 0.0
        self.samples = self.steps = 0
        self.gpu_util: list[float] = []
        self.epoch_t0 = time.perf_counter()
        self.epoch_losses: list[float] = []

    @property
    def last_train_loss(self) -> float | None:
        """The newest step's global mean loss not yet folded into an epoch record, or None."""
        losses = self.epoch_losses or [w[0] for w in self.window]
        return losses[-1] if losses else None

    def write(self, kind: str, **fields: Any) -> None:
        if self.file is None:
            return
        rec = finite({"kind": kind, "time": round(time.time(), 3), **fields})
        self.file.write(json.dumps(rec) + "\n")
        self.file.flush()
        if self.tb is not None and kind in ("step", "epoch"):
            for key, value in fields.items():
                if isinstance(value, (int, float)) and key not in ("step", "epoch"):
                    self.tb.add_scalar(f"{kind}/{key}", value, fields.get("step", 0))

    def step(self, step: int, epoch: int, loss: float, lr: float, step_s: float, wait_s: float,
             batch: int) -> None:
        self.window.append((loss, step_s, wait_s))
        self.epoch_losses.append(loss)
        self.total_step_s += step_s
        self.total_wait_s += wait_s
        self.samples += batch
        self.steps += 1
        if len(self.window) < self.log_every:
            return
        losses, times, waits = zip(*self.window)
        self.window.clear()
        rec = {"step": step, "epoch": epoch, "loss": sum(losses) / len(losses), "lr": lr,
               "samples_per_s": batch * len(times) / sum(times), "step_time_s": sum(times) / len(times),
               "data_wait_s": sum(waits) / len(waits), "data_wait_pct": 100 * sum(waits) / sum(times),
               **self.gpu.sample()}
        if "gpu_util_pct" in rec:
            self.gpu_util.append(rec["gpu_util_pct"])
        self.write("step", **rec)
        log.info("epoch %d step %d loss %.4f lr %.2e %.0f samples/s data-wait %.1f%%", epoch, step,
                 rec["loss"], lr, rec["samples_per_s"], rec["data_wait_pct"])

    def epoch(self, epoch: int, step: int, val: dict[str, float]) -> dict[str, Any]:
        took = time.perf_counter() - self.epoch_t0
        train_loss = sum(self.epoch_losses) / max(1, len(self.epoch_losses))
        rec = {"epoch": epoch, "step": step, "train_loss": train_loss, "val_loss": val["loss"],
               "val_acc": val["acc"], "epoch_time_s": took, "data_wait_pct": self.data_wait_pct()}
        self.write("epoch", **rec)
        log.info("epoch %d done: train loss %.4f val loss %.4f val acc %.4f (%.1fs)", epoch,
                 train_loss, val["loss"], val["acc"], took)
        self.epoch_t0, self.epoch_losses = time.perf_counter(), []
        return rec

    def final(self, step: int, summary: dict[str, Any], hparams: dict[str, Any]) -> None:
        """At the end (rank 0): the test (and final val) metrics as TensorBoard scalars at `step`,
        and the run's hyperparameters with those metrics in the HParams plugin's format (one
        experiment + session summary, as torch.utils.tensorboard's add_hparams writes, but into
        this run's own event folder instead of a timestamped sub-run)."""
        if self.tb is None:
            return
        metrics = {f"{split}/{name}": summary[f"{split}_{name}"] for split in ("test", "val")
                   for name in ("loss", "acc", "ppl") if _number(summary.get(f"{split}_{name}"))}
        for key, value in metrics.items():
            self.tb.add_scalar(key, value, step)
        from torch.utils.tensorboard.summary import hparams as hparams_summary

        hp = {k: (v if isinstance(v, (bool, str)) or _number(v) else str(v)) for k, v in hparams.items()}
        for part in hparams_summary(hp, metrics):
            self.tb.file_writer.add_summary(part, step)
        self.tb.flush()

    def data_wait_pct(self) -> float:
        return 100 * self.total_wait_s / self.total_step_s if self.total_step_s else 0.0

    def throughput(self) -> float:
        return self.samples / self.total_step_s if self.total_step_s else 0.0

    def verdict(self, workers: int, max_workers: int, load_s: float | None = None) -> str:
        """One line: data-bound (data wait > 10%, and GPU util < 80% where measured) or not.

        `load_s`: seconds this process takes to load one step's batches itself (measured by the
        caller). With workers, a wait longer than that is hand-off (IPC, pickling, worker start-up),
        not loading: fewer workers (or 0) would wait less, so that is what it suggests.
        """
        pct = self.data_wait_pct()
        util = sum(self.gpu_util) / len(self.gpu_util) if self.gpu_util else None
        util_txt = f", GPU util {util:.0f}%" if util is not None else ""
        if pct > DATA_BOUND_PCT and (util is None or util < GPU_BUSY_PCT):
            return f"data-bound: data wait {pct:.1f}% of step time{util_txt}; " + self._advice(
                workers, max_workers, load_s)
        return f"compute-bound: data wait {pct:.1f}% of step time{util_txt}"

    def _advice(self, workers: int, max_workers: int, load_s: float | None) -> str:
        wait = self.total_wait_s / max(1, self.steps)
        if workers > 0 and load_s is not None and wait > load_s:
            return (f"the wait ({1e3 * wait:.1f} ms/step) exceeds loading in-process "
                    f"({1e3 * load_s:.1f} ms/step): worker hand-off dominates; lower workers "
                    f"(now {workers}; try {workers // 2})")
        if workers < max_workers:
            return f"raise workers (now {workers}, machine bound {max_workers})"
        return "make __getitem__/collate cheaper or pre-process"

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
        if self.tb is not None:
            self.tb.close()


def _number(value: Any) -> bool:
    """A finite int/float that is not a bool (what a TensorBoard scalar or hparam can hold)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value == value \
        and abs(value) != float("inf")


def _tensorboard(path: Path):
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        log.info("TensorBoard events off (tensorboard is not installed; extra 'train')")
        return None
    return SummaryWriter(str(path))
