"""The training engine: `train(cfg)` builds a run, resumes it, runs the hot loop, finishes it.

Contract: `train(cfg)` returns a `Result` (exit code 0 when done, 75 = PREEMPTED when SIGTERM or
Ctrl-C stopped it after a checkpoint, 6 = TRAIN when the loss became NaN/inf: nothing is saved after
that step) and always leaves <run_dir>/summary.json. It works under torchrun
(any world size; every rank calls it; DDP or FSDP2: parallel.py) and in a plain process. Per-step
losses do not depend on the world size (rng.py, data.GlobalBatchSampler). Raises InputError for bad
input.
"""

from __future__ import annotations

import logging
import math
import os
import signal
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from trainkit.errors import OK, PREEMPTED, TRAIN
from trainkit.train import artifacts, data, dist, parallel, rng, schedule
from trainkit.train.config import TrainConfig, write_config
from trainkit.train.model import loss_fn
from trainkit.train.monitor import Monitor, setup_logging
from trainkit.train.progress import Progress
from trainkit.train.run import Result, Run, build_run, describe, make_saver, resume, summarize
from trainkit.train.sharded import Checkpointer, SavePolicy, save_run

log = logging.getLogger("trainkit.train")


def train(cfg: TrainConfig) -> Result:
    """Run `cfg` to completion or preemption on this rank; see the module docstring."""
    info = dist.setup(cfg.device)
    try:
        return _train(cfg, info)
    finally:
        dist.teardown()


def _train(cfg: TrainConfig, info: dist.DistInfo) -> Result:
    t_start = time.time()
    if cfg.export.onnx:  # a bad opset fails now, not after the last epoch
        from trainkit.train.export import check_opset
        check_opset(cfg.export.opset)
    run_dir = Path(cfg.run_dir)
    artifacts.make_dir(run_dir, "run_dir")
    artifacts.make_dir(cfg.checkpoint_dir, "checkpoint.dir")
    setup_logging(run_dir, info.rank)
    preempt = dist.Preemption()
    run = build_run(cfg, info)
    saver = make_saver(run)
    resume(run, saver)
    if info.is_main:  # only now: a refused attempt leaves the run's config.yaml as it was
        write_config(cfg, run_dir / "config.yaml")
    monitor = Monitor(run_dir, info.is_main, cfg.log_every, cfg.tensorboard,
                      info.local_rank if info.device.type == "cuda" else None)
    monitor.write("run", **describe(run))
    try:
        reason = fit(run, saver, monitor, preempt)
        return finish(run, saver, monitor, reason, t_start)
    finally:
        data.close_loader(run.loader)
        saver.close()
        monitor.close()
        preempt.restore()


def fit(run: Run, saver: Checkpointer, monitor: Monitor, preempt: dist.Preemption) -> str:
    """The hot loop. Returns "completed", "max_steps", "preempted" or "diverged" (the global loss
    is NaN/inf: stop before anything is saved from these weights)."""
    cfg, info, plan, dev = run.cfg, run.info, run.plan, run.info.device
    move = dev.type != "cpu"   # the loader's tensors are on the CPU already: no .to() per batch
    policy, fault, agree = SavePolicy(cfg, info), SigtermFault.from_env(info.is_main), dist.Agreement(info)
    beat = Progress.from_env(info.local_rank == 0)   # the supervisor's watchdog reads it (progress.py)
    while run.epoch < cfg.epochs and run.step < run.total_steps:
        run.sampler.set_epoch(run.epoch, start=run.step_in_epoch * plan.per_rank)
        batches = iter(run.loader)
        while run.step_in_epoch < run.steps_per_epoch and run.step < run.total_steps:
            t0, wait, loss_sum = time.perf_counter(), 0.0, None
            for micro in range(plan.accum):
                t = time.perf_counter()
                x, y = next(batches)
                wait += time.perf_counter() - t
                if move:
                    x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
                sync = parallel.grad_sync(run.wrapped, micro == plan.accum - 1)
                with sync, run.autocast(), rng.keys_for(*run.keys(micro)):  # per-sample dropout
                    loss = loss_fn(run.wrapped(x), y)
                    loss = loss / plan.accum if plan.accum > 1 else loss   # x / 1 == x: skip the op
                run.scaler.scale(loss).backward()
                loss_sum = loss.detach() if loss_sum is None else loss_sum + loss.detach()
            lr = run.sched.get_last_lr()[0]  # the LR this step used (the scheduler steps next)
            saver.wait_staged()  # an async checkpoint's copy of the weights must be done first
            optimizer_step(run)
            run.step, run.step_in_epoch = run.step + 1, run.step_in_epoch + 1
            fault.after_step(run.step)
            loss, stop, save = agree(loss_sum, preempt.requested, policy.due(run.step))
            # a save in flight for checkpoint.overlap_steps steps is committed before this step
            # counts (is logged): a fault then loses at most one interval + overlap_steps - 1 (a
            # commit needs every rank's shard: a rank lost mid-write leaves the save incomplete)
            overlap = run.cfg.checkpoint.overlap_steps
            if overlap and saver.in_flight_step is not None and run.step - saver.in_flight_step >= overlap:
                beat.mark(run.step - 1, "save")
                saver.wait()
            monitor.step(run.step, run.epoch, loss, lr, time.perf_counter() - t0, wait,
                         plan.global_batch)
            beat.mark(run.step)
            if not math.isfinite(loss) and not scaler_absorbs(run):
                return "diverged"
            if save or stop:
                beat.mark(run.step, "save")
                save_run(run, saver, monitor, "sigterm" if stop else "schedule", block=stop)
                policy.saved(saver)
            if stop:
                return "preempted"
        if run.step_in_epoch >= run.steps_per_epoch:  # a whole epoch: validate, next epoch
            beat.mark(run.step, "eval")
            run.extra["val"] = evaluate(run, "val")
            run.extra["val_step"] = run.step
            monitor.epoch(run.epoch, run.step, run.extra["val"])
            artifacts.on_epoch(run, run.extra["val"])
            run.epoch, run.step_in_epoch = run.epoch + 1, 0
    return "completed" if run.epoch >= cfg.epochs else "max_steps"


def scaler_absorbs(run: Run) -> bool:
    """fp16 + GradScaler: a non-finite loss made the scaler skip this step (weights untouched) and
    halve its scale, which is how fp16 overflow is meant to be handled. The run has diverged only
    when the scale has fallen below 1: 17 skips in a row from PyTorch's defaults (init_scale 2**16,
    backoff_factor 0.5; torch.amp.GradScaler)."""
    return run.scaler.is_enabled() and run.scaler.get_scale() >= 1.0


def optimizer_step(run: Run) -> None:
    """unscale -> clip -> step -> update -> zero_grad -> LR schedule (PyTorch AMP examples order)."""
    if run.cfg.grad_clip:
        run.scaler.unscale_(run.opt)
        torch.nn.utils.clip_grad_norm_(run.model.parameters(), run.cfg.grad_clip)
    run.scaler.step(run.opt)
    run.scaler.update()
    run.opt.zero_grad(set_to_none=True)
    run.sched.step()


@torch.no_grad()
def evaluate(run: Run, split: str) -> dict[str, float]:
    """Mean loss, top-1 accuracy and perplexity per target on `split`; each rank takes its r::world
    slice and every rank runs the same number of forwards (FSDP collectives need all ranks)."""
    run.model.eval()
    ds, batch = run.splits[split], run.plan.micro * 4
    loader = iter(data.eval_loader(ds, batch, run.cfg, run.info))
    totals = torch.zeros(3, dtype=torch.float64, device=run.info.device)
    pad = None  # what a rank that has run out of items forwards (not counted)
    for _ in range(data.eval_batches(len(ds), batch, run.info.world_size)):
        x, y = next(loader, (None, None))
        real = x is not None
        pad = x[:1] if real else (pad if pad is not None else ds[0][0].unsqueeze(0))
        x = (x if real else pad).to(run.info.device)
        with run.autocast():
            logits = run.wrapped(x).flatten(0, -2).float()
        if real:
            y = y.to(run.info.device).flatten()
            totals += torch.stack([F.cross_entropy(logits, y, reduction="sum").double(),
                                   (logits.argmax(-1) == y).sum().double(),
                                   torch.tensor(float(y.numel()), dtype=torch.float64, device=y.device)])
    if run.info.distributed:
        torch.distributed.all_reduce(totals)
    run.model.train()
    loss, correct, count = totals.tolist()
    loss = loss / max(count, 1)
    return {"loss": loss, "acc": correct / max(count, 1), "ppl": math.exp(min(loss, 700))}


class SigtermFault:
    """Test hooks, read ONCE at start-up (never in the hot loop): TRAINKIT_FAULT_SIGTERM_AT_STEP=k[,k2...]
    makes rank 0 send SIGTERM after step k to itself (or, with TRAINKIT_FAULT_SIGTERM_TARGET=parent,
    to torchrun, which forwards it to all ranks); TRAINKIT_FAULT_STEP_SLEEP=<seconds> makes every
    rank sleep that long after each step (a small model standing in for a slow one, so that a
    recovery test's replacement comes up while the run still trains)."""

    def __init__(self, steps: str | None, target: str | None, is_main: bool, sleep: str | None = None) -> None:
        self.steps = {int(k) for k in steps.split(",")} if steps and is_main else set()
        self.parent = target == "parent"
        self.sleep = float(sleep) if sleep else 0.0

    @classmethod
    def from_env(cls, is_main: bool) -> "SigtermFault":
        env = os.environ
        return cls(env.get("TRAINKIT_FAULT_SIGTERM_AT_STEP"), env.get("TRAINKIT_FAULT_SIGTERM_TARGET"), is_main,
                   env.get("TRAINKIT_FAULT_STEP_SLEEP"))

    def after_step(self, step: int) -> None:
        if self.sleep:
            time.sleep(self.sleep)
        if step not in self.steps:
            return
        if self.parent:
            os.kill(os.getppid(), signal.SIGTERM)
            time.sleep(1.0)  # let torchrun forward it; ranks agree on the stop step either way
        else:
            os.kill(os.getpid(), signal.SIGTERM)


def finish(run: Run, saver: Checkpointer, monitor: Monitor, reason: str, t_start: float) -> Result:
    """Final checkpoint, test metrics, ONNX, plot, summary. Preempted: the checkpoint is already
    written; diverged: these weights are NaN/inf, so no checkpoint, weights or ONNX come from them."""
    stopped = reason in ("preempted", "diverged")
    if not stopped and run.extra.get("saved_step") != run.step:
        save_run(run, saver, monitor, "final", block=True)
    saver.wait()
    metrics: dict[str, Any] = {"samples_per_s": monitor.throughput(),
                               "data_wait_pct": monitor.data_wait_pct(),
                               "checkpoint": str(saver.last_path) if saver.last_path else None,
                               "checkpoint_write_s": saver.last_write_s or None}
    if not stopped:
        val = run.extra["val"] if run.extra.get("val_step") == run.step else evaluate(run, "val")
        test = evaluate(run, "test")
        metrics.update(val_loss=val["loss"], val_acc=val["acc"], val_ppl=val["ppl"],
                       test_loss=test["loss"], test_acc=test["acc"], test_ppl=test["ppl"])
    if monitor.last_train_loss is not None:
        metrics["train_loss"] = monitor.last_train_loss
    opts = data.loader_options(run.cfg, run.info, run.loader.num_workers)
    load_s = (data.load_seconds(run.splits["train"], run.plan.micro) * run.plan.accum
              if opts["num_workers"] > 0 else None)
    metrics["verdict"] = monitor.verdict(opts["num_workers"], schedule.suggested_workers(
        os.cpu_count() or 1, run.info.local_world_size), load_s)
    run_dir = Path(run.cfg.run_dir)
    if run.cfg.export.onnx and not stopped:
        weights = parallel.full_state_dict(run.model)  # collective: every rank takes part
        if run.info.is_main:
            metrics.update(export_and_verify(run, weights, run_dir / "model.onnx"))
    dist.barrier(run.info)
    code = {"preempted": PREEMPTED, "diverged": TRAIN}.get(reason, OK)
    code = TRAIN if metrics.get("onnx_error") else code
    metrics["wall_time_s"] = time.time() - t_start
    summary = summarize(run, reason, code, metrics)
    if run.info.is_main:
        if run.cfg.plot:
            artifacts.plot_curves(run_dir, summary)
        artifacts.write_json(run_dir / "summary.json", summary)
        monitor.final(run.step, summary, flat_hparams({**run.cfg.to_dict(), **describe(run)}))
    log.info("%s after %d steps; %s", reason, run.step, metrics["verdict"])
    return Result(code, summary)


def flat_hparams(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"optimizer": {"lr0": ..}} -> {"optimizer.lr0": ..}: leaves only (None and lists dropped,
    as the HParams plugin holds numbers, strings and bools)."""
    out: dict[str, Any] = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            out.update(flat_hparams(value, f"{prefix}{key}."))
        elif isinstance(value, (bool, int, float, str)):
            out[f"{prefix}{key}"] = value
    return out


def export_and_verify(run: Run, weights: dict[str, Any], out: Path) -> dict[str, Any]:
    """export.onnx: rebuild the plain model, load the full `weights`, write <run_dir>/model.onnx
    and check it against PyTorch with onnxruntime. A failure is returned as `onnx_error` (and no
    model.onnx is left), so last.pt and summary.json are still written after it."""
    from trainkit.errors import TrainkitError
    from trainkit.train.export import export_onnx, verify_onnx
    from trainkit.train.model import build_model

    model = build_model(run.cfg)
    model.load_state_dict(weights)
    shape, e = run.extra["input_shape"], run.cfg.export
    try:
        export_onnx(model, shape, out, e.opset, artifacts.onnx_metadata(run))
        check = verify_onnx(model, out, shape, e.rtol, e.atol)
    except TrainkitError as err:
        out.unlink(missing_ok=True)
        log.warning("ONNX export failed: %s", err.message)
        return {"onnx_error": err.message.splitlines()[0]}
    log.info("exported %s (onnxruntime max abs diff %.2e)", out, check["max_abs_diff"])
    return {"onnx": str(out), "onnx_max_abs_diff": check["max_abs_diff"]}
